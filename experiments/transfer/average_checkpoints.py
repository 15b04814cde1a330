"""The uniform average of full-model checkpoints of one architecture (a model
soup: checkpoints of one GRPO run, or of runs from the same SFT), written as a
model folder that `rosetrain eval` reads (docs/experiments.md, round 30).

    python experiments/transfer/average_checkpoints.py OUT CHECKPOINT CHECKPOINT...

OUT gets the last checkpoint's config, processor and tokenizer files and the
averaged `model.safetensors`; optimizer and trainer states are not copied.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

NOT_COPIED = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "checkpoint-*", "model.safetensors")


def average(out: Path, checkpoints: list[Path]) -> None:
    if out.exists():
        raise SystemExit(f"{out}: exists; give a new folder")
    states = [load_file(path / "model.safetensors") for path in checkpoints]
    keys = set(states[0])
    for path, state in zip(checkpoints[1:], states[1:]):
        if set(state) != keys or any(state[k].shape != states[0][k].shape for k in keys):
            raise SystemExit(f"{path}: not the architecture of {checkpoints[0]}")
    mean = {k: (sum(s[k].double() for s in states) / len(states)).to(states[0][k].dtype) for k in keys}
    shutil.copytree(checkpoints[-1], out, ignore=shutil.ignore_patterns(*NOT_COPIED))
    save_file(mean, out / "model.safetensors", metadata={"format": "pt"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("checkpoints", type=Path, nargs="+")
    args = parser.parse_args()
    average(args.out, args.checkpoints)
    print(f"averaged {len(args.checkpoints)} checkpoints -> {args.out}")


if __name__ == "__main__":
    main()
