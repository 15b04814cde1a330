#!/usr/bin/env bash
# The larger stand-in (issue item 4; docs/experiments.md, rounds 22 and 24): the
# one-token chain that `famseen` stands on, rebuilt on `tiny-model --size medium`
# (12.2M parameters against small's 2.5M), then round 16's `cells-seen` SFT for
# each seed given. The four counting stages, with the small chain's recipes,
# steps and data seeds:
#   1. recipes/demo-base-sft.yaml, 2,000 steps (the demo's counting base);
#   2. recipes/demo-base-sft-palettes.yaml, 4,000 steps (every palette, roles swapped);
#   3. experiments/transfer/base-family.yaml with cells thinking, 3,000 steps;
#   4. the same with data.seed=1, 3,000 more steps (`family-cells-6k`'s counterpart).
# At 0.75-0.8 s a step on one CPU core the stages take about 2.7 hours; an
# SFT seed (longer thinking targets: 1.45-1.7 s a step) 2.2 hours more, with
# its rdev evaluation (docs/experiments.md, round 27). With CORES=2 a stage
# trains on two processes of one thread, the batch of 16 split (torchrun,
# gloo; about 1.45x one core): a different run from the one-core one, as any
# change of processes is. Everything resumes: a finished stage is skipped, a
# stopped one goes on from its last checkpoint (the recipes' resume: auto) on
# the same number of processes.
# A stage's final model committed under experiments/transfer/bases/medium-baseN
# counts as finished too (runs/ is not kept from one machine to the next), and
# the next stage starts from it.
#
#   [CORES=2] bash experiments/transfer/medium-chain.sh [SEED...]
#
# On a fresh checkout run it once without a seed first (it makes data/rdev-dim
# and evaluates the base), then the seeds, one run a core.
#
# Writes models/demo-medium, runs/medium-base{1,2,3,4}, runs/medium-base4-eval-rdev
# and runs/curves-medseen-sS; then `SFT=medseen bash experiments/transfer/grpo-vcnt-band.sh S`.
# The base and each SFT seed's final model are copied into git's tree
# (experiments/transfer/bases/medium-base4, experiments/transfer/sft/medseen-seedS):
# commit them, as runs/ does not outlive the machine. With CORES=2 the SFT
# seeds train one after another, each on two processes.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv ] && source .venv/bin/activate
M=models/demo-medium R=runs/medium-base B=experiments/transfer/bases/medium-base
C=${CORES:-1}
train() { # rosetrain train sft ARGS, on C processes
  if [ "$C" -gt 1 ]; then
    python -m torch.distributed.run --standalone --nproc-per-node "$C" -m rosetrain train sft "$@" \
      --set cpu_threads=1 --set per_device_train_batch_size=$((16 / C)) --set dataloader_num_workers=0
  else
    rosetrain train sft "$@"
  fi
}
final() { # N: stage N's final model, trained here or committed
  if [ -f $R$1/checkpoint-final/model.safetensors ] || [ ! -f $B$1/model.safetensors ]; then
    echo $R$1/checkpoint-final
  else
    echo $B$1
  fi
}
finished() { # N: stage N, or a later one, has its final model (a later one makes N moot)
  local k
  for k in $(seq "$1" 4); do [ -f "$(final $k)/model.safetensors" ] && return 0; done
  return 1
}
keep() { # FROM TO: a final model's files copied into git's tree, to be committed
  [ -f "$2/model.safetensors" ] && return
  [ -f "$1/model.safetensors" ] || { echo "no final model in $1 yet: nothing to keep"; return 0; }
  mkdir -p "$2"
  cp "$1"/{model.safetensors,config.json,generation_config.json,chat_template.jinja,processor_config.json,tokenizer.json,tokenizer_config.json} "$2"/
}
stage() { # N FROM RECIPE STEPS [--set ...]
  local n=$1 from=$2 recipe=$3 steps=$4
  shift 4
  finished $n && return
  [ "$from" != $M ] || [ -f $M/config.json ] || rosetrain tiny-model --size medium --family qwen3-vl --seed 0 --out $M
  train --recipe "$recipe" --set model="$from" --set max_steps="$steps" \
    --set output_dir=$R$n --set save_steps=250 --set save_total_limit=2 "$@"
}
FAMILY=(--set data.spec=experiments/transfer/base-family.yaml --set data.reasoning=cells)
stage 1 $M recipes/demo-base-sft.yaml 2000
stage 2 "$(final 1)" recipes/demo-base-sft-palettes.yaml 4000
stage 3 "$(final 2)" recipes/demo-base-sft-palettes.yaml 3000 "${FAMILY[@]}"
stage 4 "$(final 3)" recipes/demo-base-sft-palettes.yaml 3000 "${FAMILY[@]}" --set data.seed=1
keep "$(final 4)" ${B}4
# rdev (and r, whose scenes rdev excludes) as round 5 made them, then the base's
# evaluation: only in a run without seeds, as two seed runs side by side would
# race for them
G=rosetrain/assets/demo/generators
if [ $# -eq 0 ] && [ ! -f data/rdev-dim/metadata_test.jsonl ]; then
  rosetrain generate --formats release --quiet --spec $G/heldout-palette.yaml --out data/r-dim --split test --scenes 100
  rosetrain generate --formats release --quiet --spec $G/heldout-palette.yaml --out data/rdev-dim --split test \
    --scenes 200 --seed 99 --exclude data/r-dim/metadata_test.jsonl
fi
[ $# -gt 0 ] || [ -f ${R}4-eval-rdev/evaluation_summary.json ] ||
  rosetrain eval --model "$(final 4)" --data data/rdev-dim --max-new-tokens 96 --out ${R}4-eval-rdev --no-progress
for S in "$@"; do
  python benchmarks/transfer_curves.py --base "$(final 4)" \
    --recipe rosetrain/assets/demo/recipes/demo-sft-transfer.yaml \
    --design medseen=experiments/transfer/family.yaml --seeds "$S" \
    --set data.reasoning=cells-seen --max-new-tokens 96 --split rdev=data/rdev-dim \
    --steps 5000 --every 1000 --eval-every 5000 --eval-jobs 1 --cores "$C" --out runs/curves-medseen-s"$S"
  keep runs/curves-medseen-s"$S"/medseen-seed"$S"/checkpoint-final experiments/transfer/sft/medseen-seed"$S"
done
