#!/usr/bin/env bash
# One call on a lent GPU machine (16 CPU cores, one H100/H200, no network):
# round 8's reasoning design (docs/experiments.md): the transfer design with
# data.reasoning=odd, from the px4 base (runs/base-px4/checkpoint-final,
# carried) and from the shipped every-palette base (one vision token a cell),
# side by side, 5,000 steps, a checkpoint every 500; then steps 2,500 and
# 5,000 evaluated on the four dim splits, regenerated here from their specs and
# seeds (the same scenes and images as data/*-dim; only the dataset_version
# name differs).
# A run the deadline stops leaves its last checkpoint (optimizer state too) in
# $OUT as tar parts, to resume on the CPU with the same transfer_curves command.
# The packages the image lacks travel as wheels in .whl/ (docs/experiments.md says how).
source "$(dirname "$0")/setup.sh"

G=rosetrain/assets/demo/generators
gen() { python3 -m rosetrain generate --formats release --quiet "$@" >/dev/null || exit 1; }
gen --spec $G/heldout-palette.yaml --out data/r-dim --split test --scenes 100
gen --spec $G/heldout-palette.yaml --out data/rdev-dim --split test --scenes 200 --seed 99 --exclude data/r-dim/metadata_test.jsonl
gen --spec $G/heldout-varied.yaml --out data/vdev-dim --split test --scenes 100 --seed 99
gen --spec $G/heldout.yaml --out data/id-dim --split test --scenes 100
echo "splits made: $(date +%T)"

# curves NAME BASE SEEDS: one transfer_curves run, the transfer design thinking first
curves() {
  python3 benchmarks/transfer_curves.py --base "$2" \
    --recipe $G/../recipes/demo-sft-transfer.yaml \
    --design "$1"=$G/transfer.yaml --set data.reasoning=odd --max-new-tokens 96 \
    --seeds $3 --workers 3 --steps 5000 --every 500 --eval-every 2500 \
    --deadline "${DEADLINE:-6.5}" --eval-jobs 6 --batch-size 128 \
    --split rdev=data/rdev-dim --split vdev=data/vdev-dim --split id=data/id-dim --split r=data/r-dim \
    --out "runs/gpu-$1" > "runs/gpu-$1.txt" 2>&1
  grep -v "it/s\]" "runs/gpu-$1.txt" | tail -20
  for run in runs/gpu-$1/$1-seed*/; do
    name=$(basename "$run")
    tail -c 300 "runs/gpu-$1/$name.log" | tr '\r' '\n' | tail -1
    [ -d "$run/checkpoint-5000" ] && continue
    last=$(ls -d "$run"/checkpoint-[0-9]* 2>/dev/null | sort -V | tail -1)
    # with the run folder's recipe and ownership marker, so the trainer here resumes it
    [ -n "$last" ] && tar -C "$(dirname "$run")" -cf - "$name/$(basename "$last")" \
      "$name/rosetrain_recipe.yaml" "$name/.rosetrain.json" | split -b 15M - "$OUT/$name-$(basename "$last").tar."
  done
}
# px4 thinking, seed 1 (seed 0 runs on the CPU), beside the one-token-a-cell
# (dim) design thinking, seed 0, from the shipped every-palette base: the design
# that would fit the demo's 20 minutes if thinking carries it as far
curves think ${PX4_BASE:-runs/base-px4/checkpoint-final} "${PX4_SEEDS:-1}" & px4=$!
curves thinkdim rosetrain/assets/demo-base-palettes "${DIM_SEEDS:-0}" & dim=$!
wait $px4 $dim  # not a bare `wait`: it would wait for setup.sh's tee too, for ever
tar -cf "$OUT/curves.tar" runs/gpu-*/curves.md runs/gpu-*/curves.json runs/gpu-*/eval/*/evaluation_summary.json runs/gpu-*/eval/*/by_region_case.csv runs/gpu-*/eval/*/predictions.jsonl 2>/dev/null
ls -la "$OUT"
echo "done: $(date +%T)"
