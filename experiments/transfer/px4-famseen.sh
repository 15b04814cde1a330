#!/usr/bin/env bash
# Round 16's family SFT (`cells-seen`) at four vision tokens a cell, for GRPO after
# it (issue item 4; docs/experiments.md, round 21). First the px4 family base:
# round 13's cells family base (6,000 steps) trained 2,000 more counting-only steps
# with the processor's budget at 192x192 px, so every 32 px cell is 2x2 merged
# vision tokens (the budget is saved with the model: training, evaluation and GRPO
# see the same images); with LONG=1, 4,000 more steps from that one on a fresh
# schedule. Then round 16's SFT from the base, for each seed given, with rdev
# evaluated at step 5,000.
#
#   [LONG=1] bash experiments/transfer/px4-famseen.sh SEED...
#
# Writes runs/base-famcells-px4[-6k] and runs/curves-famseenpx4[6k]-sS. A stopped
# run resumes from its last checkpoint when the script is run again (resume:
# auto); then `SFT=famseenpx4[6k] bash experiments/transfer/grpo-vcnt-band.sh SEED`
# runs GRPO.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv ] && source .venv/bin/activate
base() { # FROM OUT STEPS DATA_SEED
  [ -f "$2/checkpoint-final/model.safetensors" ] && return
  rosetrain train sft --recipe recipes/demo-base-sft-palettes.yaml \
    --set model="$1" --set data.spec=experiments/transfer/base-family.yaml \
    --set data.reasoning=cells --set data.seed="$4" --set min_pixels=36864 --set max_pixels=36864 \
    --set max_steps="$3" --set output_dir="$2"
}
B=runs/base-famcells-px4 D=famseenpx4
base experiments/transfer/bases/family-cells-6k $B 2000 2
if [ "${LONG:-0}" = 1 ]; then
  base $B/checkpoint-final $B-6k 4000 3
  B=$B-6k D=${D}6k
fi
for S in "$@"; do
  python benchmarks/transfer_curves.py --base $B/checkpoint-final \
    --recipe recipes/demo-sft-transfer.yaml --design $D=experiments/transfer/family.yaml \
    --seeds "$S" --set data.reasoning=cells-seen --max-new-tokens 96 --split rdev=data/rdev-dim \
    --steps 5000 --every 1000 --eval-every 5000 --eval-jobs 1 --out runs/curves-$D-s"$S"
done
