#!/usr/bin/env bash
# Round 16's family SFT (`cells-seen`) at four vision tokens a cell, for GRPO after
# it (issue item 4; docs/experiments.md, round 21). First the px4 family base:
# round 13's cells family base (6,000 steps) trained 2,000 more counting-only steps
# with the processor's budget at 192x192 px, so every 32 px cell is 2x2 merged
# vision tokens (the budget is saved with the model: training, evaluation and GRPO
# see the same images); then round 16's SFT from it, for each seed given, with
# rdev evaluated at step 5,000.
#
#   bash experiments/transfer/px4-famseen.sh SEED...
#
# Writes runs/base-famcells-px4 and runs/curves-famseenpx4-sS. A stopped run
# resumes from its last checkpoint when the script is run again (resume: auto);
# then `SFT=famseenpx4 bash experiments/transfer/grpo-vcnt-band.sh SEED` runs GRPO.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv ] && source .venv/bin/activate
B=runs/base-famcells-px4
if [ ! -f $B/checkpoint-final/model.safetensors ]; then
  rosetrain train sft --recipe recipes/demo-base-sft-palettes.yaml \
    --set model=experiments/transfer/bases/family-cells-6k --set data.spec=experiments/transfer/base-family.yaml \
    --set data.reasoning=cells --set data.seed=2 --set min_pixels=36864 --set max_pixels=36864 \
    --set max_steps=2000 --set output_dir=$B
fi
for S in "$@"; do
  python benchmarks/transfer_curves.py --base $B/checkpoint-final \
    --recipe recipes/demo-sft-transfer.yaml --design famseenpx4=experiments/transfer/family.yaml \
    --seeds "$S" --set data.reasoning=cells-seen --max-new-tokens 96 --split rdev=data/rdev-dim \
    --steps 5000 --every 1000 --eval-every 5000 --eval-jobs 1 --out runs/curves-famseenpx4-s"$S"
done
