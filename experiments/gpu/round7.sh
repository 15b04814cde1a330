#!/usr/bin/env bash
# One call on a lent GPU machine (16 CPU cores, one H200, no network): two
# seeds of a rung-2 design side by side from the 6k family base (tracked, so
# it travels without carry), trained until the deadline and evaluated on the
# CPU (no data split travels: the wheels and the tracked files fill the
# 64 MiB). Round 16 (docs/experiments.md): family.yaml with the `cells-seen`
# thinking, seeds 0 and 1. Each run's last checkpoint (optimizer state too)
# comes back in $OUT as tar parts; untar them into runs/curves-NAME-sSEED and
# finish each run on the CPU with its transfer_curves command and
# `--set resume=runs/curves-NAME-sSEED/NAME-seedSEED/checkpoint-N`.
#   DESIGN=famseen=experiments/transfer/family.yaml REASONING=cells-seen SEEDS="0 1" DEADLINE=8.6 \
#     bash experiments/gpu/round7.sh
source "$(dirname "$0")/setup.sh"

DESIGN=${DESIGN:-famseen=experiments/transfer/family.yaml}
NAME=${DESIGN%%=*}
SEEDS=${SEEDS:-0 1}
train() {  # train SEED: one run, stopped at the deadline
  python3 benchmarks/transfer_curves.py --base experiments/transfer/bases/family-cells-6k \
    --recipe rosetrain/assets/demo/recipes/demo-sft-transfer.yaml --design "$DESIGN" --seeds "$1" \
    --set data.reasoning="${REASONING:-cells-seen}" --workers "${WORKERS:-5}" --steps 5000 --every "${EVERY:-250}" \
    --deadline "${DEADLINE:-8.6}" --train-only --out "runs/curves-$NAME-s$1" > "runs/gpu-$NAME-s$1.txt" 2>&1
}
mkdir -p runs
pids=()
for seed in $SEEDS; do train "$seed" & pids+=($!); done
wait "${pids[@]}"  # not a bare `wait`: it would wait for setup.sh's tee too, for ever
for seed in $SEEDS; do
  name=$NAME-seed$seed run=runs/curves-$NAME-s$seed
  grep -v "it/s\]" "runs/gpu-$NAME-s$seed.txt" | tail -3
  tr '\r' '\n' < "$run/$name.log" | grep "it/s\]" | tail -1
  send_back "$run" "$name"
done
ls -la "$OUT"
echo "done: $(date +%T)"
