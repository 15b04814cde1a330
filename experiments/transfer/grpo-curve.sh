#!/usr/bin/env bash
# Evaluate a grpo-vcnt-band.sh run's checkpoints on rdev as it saves them, and
# compare each with the SFT it started from (docs/experiments.md, rounds 19 and 20).
#
#   [SFT=famseen] [SFT_STEPS=5000] bash experiments/transfer/grpo-curve.sh TAG SEED STEP...
#
# Run beside the training; each checkpoint is copied to runs/TAG/ck-sS-STEP
# first, as save_total_limit may remove it while it is read.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv ] && source .venv/bin/activate
SFT=${SFT:-famseen} SFT_STEPS=${SFT_STEPS:-5000} O=runs/$1 S=$2
shift 2
for N in "$@"; do
  while [ ! -f $O/s$S/checkpoint-$N/model.safetensors ] && [ ! -f $O/cmp-s$S/compare.json ]; do sleep 30; done
  [ -d $O/s$S/checkpoint-$N ] || continue
  sleep 20 # the checkpoint's other files written whole
  [ -d $O/ck-s$S-$N ] || cp -r $O/s$S/checkpoint-$N $O/ck-s$S-$N  # a rerun keeps its copy
  rosetrain eval --model $O/ck-s$S-$N --data data/rdev-dim --max-new-tokens 96 --out $O/eval-s$S-$N-rdev --no-progress
  rosetrain compare runs/curves-$SFT-s$S/eval/$SFT-seed$S-$SFT_STEPS-rdev $O/eval-s$S-$N-rdev --out $O/cmp-s$S-$N
done
