#!/usr/bin/env bash
# Round 39's S3, the GRPO design that meets issue 37's item 4 (docs/experiments.md,
# rounds 37 and 39), in one command: round 37's S (900 steps from the famseen
# SFT: the frontier filter keeping live groups, the gold answer in groups no
# sample solves, the band's counting prompts), run again twice from its own
# final model, each time with a new prompt stream and the learning rate
# warming up and decaying again (2,700 GRPO steps in all), then judged on the
# band's held-out splits (grpo-heldout.sh).
#
#   bash experiments/transfer/grpo-s3.sh SEED...
#
# Each stage is a grpo-vcnt-band.sh run (runs/grpo-r37s, runs/grpo-r39s2,
# runs/grpo-r39s3), which skips a seed whose stage another run has claimed and
# resumes one stopped midway once its claim is removed; a stage starts only
# from the previous stage's final model. 25-35 minutes of one core a stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
COMMON="--set save_steps=300 --set save_total_limit=4 --set grpo.frontier_reuse=true \
--set grpo.frontier_gold=true --set grpo.thinking=cells-seen"
stage() { # TAG SEED [--set ...]: one 900-step stage of seed SEED
  local tag=$1 seed=$2
  shift 2
  SFT=famseen SPEC=rl-count-band TAG=$tag STEPS=900 EXTRA="$COMMON $*" \
    bash experiments/transfer/grpo-vcnt-band.sh "$seed"
  [ -f "runs/$tag/s$seed/checkpoint-final/model.safetensors" ] || {
    echo "runs/$tag/s$seed has no final model (claimed by another run, still going?); stopping" >&2
    exit 1
  }
}
for S in "$@"; do
  stage grpo-r37s "$S"
  stage grpo-r39s2 "$S" --set model=runs/grpo-r37s/s$S/checkpoint-final --set data.seed=$((S + 102))
  stage grpo-r39s3 "$S" --set model=runs/grpo-r39s2/s$S/checkpoint-final --set data.seed=$((S + 202))
  SFT=famseen bash experiments/transfer/grpo-heldout.sh grpo-r39s3 "$S"
done
