#!/usr/bin/env bash
# One call on a lent GPU machine (16 CPU cores, one H100/H200, no network):
# round 12's rung 2 from the family base (docs/experiments.md), seeds 3 and 4
# side by side: the same transfer_curves command as seeds 0-2 on the CPU
# (experiments/transfer/family.yaml from runs/base-family/checkpoint-final,
# carried, with data.reasoning=cells), a checkpoint every 500 steps, stopped
# at the deadline. RESUME=STEP continues both runs from that checkpoint (a
# second call on the same warm machine). Each run's last checkpoint (optimizer
# state too) comes back in $OUT as tar parts (untar into runs/curves-NAME-sSEED),
# to finish on the CPU with the same command and `--set resume=CHECKPOINT`; the evaluations run there, on the
# three dim splits. On 2026-11-28 (H200): DEADLINE=6.5 reached step 3,000 at
# 9.1 steps/s a run, then RESUME=3000 DEADLINE=4 reached 4,500.
# Another rung-2 lever: FAMILY_BASE=<carried base> DESIGN=<name>=<spec> SEEDS="0 1"; the cells
# base is tracked, so it travels without carry: FAMILY_BASE=experiments/transfer/bases/family-cells.
# The packages the image lacks travel as wheels in .whl/ (docs/experiments.md says how).
source "$(dirname "$0")/setup.sh"

BASE=${FAMILY_BASE:-runs/base-family/checkpoint-final}
DESIGN=${DESIGN:-fambase=experiments/transfer/family.yaml}
NAME=${DESIGN%%=*}
train() {  # train SEED: one run, stopped at the deadline
  python3 benchmarks/transfer_curves.py --base "$BASE" \
    --recipe rosetrain/assets/demo/recipes/demo-sft-transfer.yaml \
    --design "$DESIGN" --seeds "$1" \
    --set data.reasoning=cells --max-new-tokens 96 ${RESUME:+--set resume=runs/gpu-$NAME-s$1/$NAME-seed$1/checkpoint-$RESUME} \
    --split fdev=data/fdev-dim --workers 3 --steps 5000 --every 500 --eval-every 5000 \
    --deadline "${DEADLINE:-6}" --eval-jobs 2 --batch-size 128 \
    --out "runs/gpu-$NAME-s$1" > "runs/gpu-$NAME-s$1.txt" 2>&1  # a folder a seed, as on the CPU
}
pids=()
for seed in ${SEEDS:-3 4}; do train "$seed" & pids+=($!); done
wait "${pids[@]}"  # not a bare `wait`: it would wait for setup.sh's tee too, for ever
for seed in ${SEEDS:-3 4}; do
  name=$NAME-seed$seed
  grep -v "it/s\]" "runs/gpu-$NAME-s$seed.txt" | tail -3
  send_back "runs/gpu-$NAME-s$seed" "$name"
done
ls -la "$OUT"
echo "done: $(date +%T)"
