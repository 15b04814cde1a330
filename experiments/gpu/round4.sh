#!/usr/bin/env bash
# One call on a lent GPU machine (16 CPU cores, one H100/H200, no network):
#   1. benchmarks/gpu_check.py: the shipped Qwen2.5-VL-3B SFT and GRPO recipes on a
#      tiny model, eval, and the full-size 3B built from its configuration (memory, tokens/s)
#   2. benchmarks/train_step.py on CUDA: real/floor with 4 and 8 DataLoader workers,
#      then the model compiled (torch.compile), the one lever left for the launch-bound
#      tiny model (docs/benchmarks.md)
# The packages the image lacks travel as wheels in .whl/ (docs/experiments.md says how).
# Results: $OUT/log.txt, $OUT/gpu_check.txt, $OUT/train_step-*.txt
source "$(dirname "$0")/setup.sh"

timeout 240 python3 benchmarks/gpu_check.py --steps 6 2>&1 | grep -v "it/s\]" | tee "$OUT/gpu_check.txt"
echo "gpu check done: $(date +%T)"

for w in 4 8; do
  timeout 90 python3 benchmarks/train_step.py --device cuda --workers $w --blocks 3 --block 10 2>&1 \
    | grep -E "^(train step|  |Traceback|[A-Za-z]*Error)" | tee "$OUT/train_step-w$w.txt"
done
timeout 130 python3 benchmarks/train_step.py --device cuda --workers 8 --compile --warmup 8 --blocks 3 --block 10 2>&1 \
  | grep -E "^(train step|  |Traceback|[A-Za-z]*Error)" | tail -20 | tee "$OUT/train_step-compiled.txt"
echo "done: $(date +%T)"
