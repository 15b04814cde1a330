#!/usr/bin/env bash
# One call on a lent GPU machine (16 CPU cores, one H100/H200, no network):
#   1. benchmarks/train_step.py on CUDA: real/floor and steps/s, 1 and 4 DataLoader workers
#   2. transfer learning curves: four SFT designs x two seeds side by side from the
#      every-palette base, checkpoints every 500 steps until the deadline, evaluated
#      on the development split of the held-out band (never the held-out split itself
#      for choosing), the designs' own distribution and the demo's palette.
# The packages the image lacks travel as wheels in .whl/ (docs/experiments.md says how).
# Results: $OUT/train_step-*.txt, $OUT/curves.md, $OUT/curves.json, $OUT/log.txt
source "$(dirname "$0")/setup.sh"
python3 -c "import rosetrain.data.generate, rosetrain.train.build, rosetrain.evaluation.evaluate, rosetrain.demo.report" || exit 1

G=rosetrain/assets/demo/generators
gen() { python3 -m rosetrain generate --formats release --quiet "$@" >/dev/null || exit 1; }
gen --spec $G/heldout-palette.yaml --out data/r --split test --scenes 100
gen --spec $G/heldout-palette.yaml --out data/r-dev --split test --scenes 200 --seed 99 --exclude data/r/metadata_test.jsonl
gen --spec $G/heldout-varied.yaml --out data/v-dev --split test --scenes 100 --seed 99
gen --spec $G/heldout.yaml --out data/id --split test --scenes 100
echo "splits made: $(date +%T)"

for w in 1 4; do
  timeout 120 python3 benchmarks/train_step.py --device cuda --workers $w --blocks 4 --block 10 2>&1 \
    | grep -E "^(train step|  )" | tee "$OUT/train_step-w$w.txt"
done
echo "benchmarks done: $(date +%T)"

E=experiments/transfer
python3 benchmarks/transfer_curves.py --base rosetrain/assets/demo-base-palettes \
  --recipe rosetrain/assets/demo/recipes/demo-sft-transfer.yaml \
  --design transfer=$G/transfer.yaml --design perceive-band=$E/perceive-band.yaml \
  --design shifts=$E/shifts.yaml --design shifts-band=$E/shifts-band.yaml \
  --seeds 0 1 --workers 1 --steps 5000 --every 500 --eval-every 1000 \
  --deadline "${DEADLINE:-4.5}" --eval-jobs 12 \
  --split rdev=data/r-dev --split vdev=data/v-dev --split id=data/id \
  --out runs/gpu-curves 2>&1 | grep -v "it/s\]" | tail -60
cp runs/gpu-curves/curves.md runs/gpu-curves/curves.json "$OUT"/ 2>/dev/null
for f in runs/gpu-curves/*.log; do tail -c 400 "$f" | tr '\r' '\n' | tail -2; done
echo "done: $(date +%T)"
