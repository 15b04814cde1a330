#!/usr/bin/env bash
# A grpo-vcnt-band.sh run judged where item 4 is judged: on the band's held-out
# splits, never used to choose anything (docs/experiments.md, rounds 32-33).
# For each seed: the SFT and the GRPO run's final model evaluated on r (500
# items) and on rconf (2,000 items: the same spec, its own seed, no scene of r
# or rdev), then `rosetrain compare` of the two on each.
#
#   [SFT=famseen] bash experiments/transfer/grpo-heldout.sh TAG SEED...
#
# Reads runs/TAG/sS and the SFT as grpo-vcnt-band.sh finds it (runs/curves-SFT-sS,
# else experiments/transfer/sft/SFT-seedS); makes data/r-dim and data/rconf-dim
# when missing (data/rdev-dim must exist for the exclusion: medium-chain.sh
# makes it). Writes runs/heldout/{SFT-sS-SPLIT,TAG-sS-SPLIT,cmp-TAG-sS-SPLIT};
# an evaluation already there is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv ] && source .venv/bin/activate
SFT=${SFT:-famseen} TAG=$1 G=rosetrain/assets/demo/generators O=runs/heldout
shift
[ -f data/r-dim/metadata_test.jsonl ] ||
  rosetrain generate --formats release --quiet --spec $G/heldout-palette.yaml --out data/r-dim --split test --scenes 100
[ -f data/rconf-dim/metadata_test.jsonl ] ||
  rosetrain generate --formats release --quiet --spec $G/heldout-palette.yaml --out data/rconf-dim --split test \
    --scenes 400 --seed 2033 --exclude data/r-dim/metadata_test.jsonl --exclude data/rdev-dim/metadata_test.jsonl
evaluate() { # MODEL SPLIT OUT
  [ -f "$3/per_item_eval.jsonl" ] ||
    rosetrain eval --model "$1" --data "data/$2-dim" --max-new-tokens 96 --out "$3" --no-progress
}
for S in "$@"; do
  M=runs/curves-$SFT-s$S/$SFT-seed$S/checkpoint-final
  [ -f $M/model.safetensors ] || M=experiments/transfer/sft/$SFT-seed$S
  for D in r rconf; do
    evaluate $M $D $O/$SFT-s$S-$D
    evaluate runs/$TAG/s$S $D $O/$TAG-s$S-$D
    rosetrain compare $O/$SFT-s$S-$D $O/$TAG-s$S-$D --out $O/cmp-$TAG-s$S-$D
  done
done
