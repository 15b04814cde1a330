#!/usr/bin/env bash
# The device tool sends the working tree (tracked files and untracked ones git
# does not ignore) and refuses one over 64 MiB. The final models committed under
# experiments/transfer/{bases,sft} (so that CPU chains resume across machines)
# hold about 150 MB, so before a device call move the ones the call does not
# need out of the tree, and put them back after it:
#
#   bash experiments/gpu/travel.sh out [KEEP...]   # KEEP: model folders that must travel
#   ... the device call ...
#   bash experiments/gpu/travel.sh back
#   bash experiments/gpu/travel.sh size            # what would travel now, in MiB
#
# `out` moves the folders into .stash-models/ (git ignores it through
# .git/info/exclude, and it does not travel); `back` restores them and checks
# that git sees the tree as it was. Never commit between the two.
set -euo pipefail
cd "$(dirname "$0")/../.."
STASH=.stash-models
size() {
  { git ls-files -z; git ls-files -z --others --exclude-standard; } |
    xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {printf "%.1f MiB would travel\n", s / 1048576}'
}
case "${1:-}" in
  out)
    shift
    mkdir -p .git/info "$STASH"
    grep -qx "/$STASH/" .git/info/exclude 2>/dev/null || echo "/$STASH/" >> .git/info/exclude
    for folder in experiments/transfer/bases/* experiments/transfer/sft/*; do
      [ -f "$folder/model.safetensors" ] || continue
      for keep in "$@"; do [ "${keep%/}" = "$folder" ] && continue 2; done
      mkdir -p "$STASH/$(dirname "$folder")"
      mv "$folder" "$STASH/$folder"
    done
    size
    ;;
  back)
    [ -d "$STASH" ] || { echo "nothing moved out"; exit 0; }
    (cd "$STASH" && find experiments -mindepth 3 -maxdepth 3 -type d) | while read -r folder; do
      mv "$STASH/$folder" "$folder"
    done
    rm -r "$STASH"
    if git status --porcelain -- experiments/transfer | grep -q '^ D'; then
      echo "a committed model is still missing:" >&2
      git status --porcelain -- experiments/transfer >&2
      exit 1
    fi
    size
    ;;
  size) size ;;
  *)
    echo "usage: bash experiments/gpu/travel.sh out [KEEP...] | back | size" >&2
    exit 2
    ;;
esac
