#!/usr/bin/env bash
# GRPO on the band's V-Cnt prompts (experiments/transfer/rl-vcnt-band.yaml) after
# one of round 16's family SFTs, for each seed given: train, evaluate on rdev,
# compare with the SFT (docs/experiments.md, rounds 17, 19 and 20). SPEC names
# another prompt spec of experiments/transfer/ (round 32: rl-count-band).
#
#   [SFT=famseen] [SFT_STEPS=5000] [TAG=grpo-vcb] [STEPS=60] [LR=1e-5] [CORES=1] \
#     [SPEC=rl-vcnt-band] [EXTRA="--set ..."] bash experiments/transfer/grpo-vcnt-band.sh SEED...
#
# CORES=2 trains a seed on two processes of one thread (torchrun, gloo), each
# with half the recipe's 4 prompts an update, so the update is the same size
# (1.56-1.65x one process for F: docs/benchmarks.md); a run resumes only on
# the number of processes it started with.
#
# Reads runs/curves-SFT-sS (the SFT and its rdev evaluation at step SFT_STEPS) and data/rdev-dim;
# where runs/ lacks the SFT (runs/ is not kept from one machine to the next),
# its final model committed as experiments/transfer/sft/SFT-seedS, evaluated
# on rdev first if its evaluation is missing too.
# writes runs/TAG/{sS,eval-sS-rdev,cmp-sS}. Two runners may share a TAG: each
# takes a seed by creating runs/TAG/claim-sS, and skips seeds taken. A run
# stopped midway resumes from its last checkpoint (the recipe's resume: auto)
# when its claim is removed and the script run again.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv ] && source .venv/bin/activate
SFT=${SFT:-famseen} SFT_STEPS=${SFT_STEPS:-5000} SPEC=${SPEC:-rl-vcnt-band} STEPS=${STEPS:-60} LR=${LR:-1e-5} O=runs/${TAG:-grpo-vcb} C=${CORES:-1}
if [ "$C" -gt 1 ]; then
  GRPO=(python -m torch.distributed.run --standalone --nproc-per-node "$C" -m rosetrain train grpo
    --set cpu_threads=1 --set gradient_accumulation_steps=$((4 / C)))
else
  GRPO=(rosetrain train grpo)
fi
for S in "$@"; do
  M=runs/curves-$SFT-s$S/$SFT-seed$S/checkpoint-final E=runs/curves-$SFT-s$S/eval/$SFT-seed$S-$SFT_STEPS-rdev
  [ -f $M/model.safetensors ] || M=experiments/transfer/sft/$SFT-seed$S
  mkdir -p "$O"
  mkdir "$O/claim-s$S" 2>/dev/null || continue
  [ -f $E/evaluation_summary.json ] ||
    rosetrain eval --model $M --data data/rdev-dim --max-new-tokens 96 --out $E --no-progress
  # shellcheck disable=SC2086  # EXTRA holds several flags
  OMP_NUM_THREADS=1 "${GRPO[@]}" --recipe rosetrain/assets/demo/recipes/demo-grpo.yaml --set model=$M \
    --set data.spec=experiments/transfer/$SPEC.yaml --set data.seed=$((S + 2)) --set seed=$((S + 2)) \
    --set max_steps=$STEPS --set learning_rate=$LR --set save_steps=100 --set save_total_limit=4 \
    --set output_dir=$O/s$S ${EXTRA:-}
  rosetrain eval --model $O/s$S --data data/rdev-dim --max-new-tokens 96 --out $O/eval-s$S-rdev --no-progress
  rosetrain compare $E $O/eval-s$S-rdev --out $O/cmp-s$S
done
