"""Does the model *see* the highlight? A linear probe on the vision tokens.

For each V-Clk image of the given splits, the model's vision tower (its merged
tokens and the deepstack features the language model receives, one token per
cell at 32 px a cell) is run, and each token is labelled with whether its cell
lies in the highlighted region and whether it is an exception cell. A logistic
regression fitted on the first half of the first split's tokens is scored on
its other half and on every other split: near 100% means the tokens carry the
label linearly; near the majority rate (printed) means they hardly carry it.

    python experiments/transfer/highlight_probe.py MODEL data/probe-dev-vclk data/rdev-dim data/fdev-dim [--merged-only]

Each split is a release-format folder (``metadata_test.jsonl``); only its
T4_CLICK_VISUAL_REGION items are read. One torch thread; about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rosetrain.core import protocol as P  # noqa: E402
from rosetrain.core.regions import cells_in_region  # noqa: E402

LABELS = ("highlighted", "odd")


def visual_items(split: Path) -> list[tuple[Path, set, set, int]]:
    """(image, highlighted cells, exception cells, columns) of each V-Clk item."""
    out = []
    for line in (split / "metadata_test.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        if r["task_template"] == P.T4:
            region = cells_in_region(r["region_type"], r["region_params"], r["rows"], r["cols"])
            odd = {tuple(cell) for cell in r["target_cells"]}
            out.append((split / r["image"], region, odd, r["cols"]))
    return out


@torch.no_grad()
def token_table(model, processor, items, merged_only: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One row per vision token: its features, and each label (1.0 or 0.0)."""
    from PIL import Image

    rows, labels = [], {name: [] for name in LABELS}
    for path, region, odd, cols in items:
        pixels = processor.image_processor(images=[Image.open(path).convert("RGB")], return_tensors="pt")
        out = model.model.visual(pixels["pixel_values"], grid_thw=pixels["image_grid_thw"])
        # the merged tokens the language model reads, and the deepstack features added to its first layers
        deepstack = [] if merged_only else out.deepstack_features
        features = torch.cat([out.pooler_output, *deepstack], dim=-1)
        for k, token in enumerate(features):  # merged tokens in reading order, one a cell
            cell = (k // cols + 1, k % cols + 1)
            rows.append(token)
            labels["highlighted"].append(float(cell in region))
            labels["odd"].append(float(cell in odd))
    return torch.stack(rows), {name: torch.tensor(v) for name, v in labels.items()}


def fit(x: torch.Tensor, y: torch.Tensor):
    """A standardized, L2-regularized logistic regression; returns its predictor."""
    mean, std = x.mean(0), x.std(0) + 1e-6
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=500)
    z = (x - mean) / std

    def loss():
        optimizer.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(z @ w + b, y) + 1e-3 * w.square().sum()
        value.backward()
        return value

    optimizer.step(loss)
    return lambda x_new: ((((x_new - mean) / std) @ w + b) > 0).float().detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model folder")
    parser.add_argument("splits", type=Path, nargs="+", help="the first is fitted on (half of it)")
    parser.add_argument(
        "--merged-only", action="store_true", help="the merged tokens alone, no deepstack features"
    )
    args = parser.parse_args()
    from transformers import AutoModelForImageTextToText, AutoProcessor

    torch.set_num_threads(1)
    model = AutoModelForImageTextToText.from_pretrained(args.model).eval()
    processor = AutoProcessor.from_pretrained(args.model)
    tables = {
        split: token_table(model, processor, visual_items(split), args.merged_only) for split in args.splits
    }
    first = args.splits[0]
    half = len(tables[first][0]) // 2
    print("| label | " + " | ".join(f"{s.name} (majority rate)" for s in args.splits) + " |")
    print("|---" * (len(args.splits) + 1) + "|")
    for name in LABELS:
        x, y = tables[first][0], tables[first][1][name]
        predict = fit(x[:half], y[:half])
        cells = []
        for split in args.splits:
            x_test, y_test = (
                (x[half:], y[half:]) if split == first else (tables[split][0], tables[split][1][name])
            )
            accuracy = (predict(x_test) == y_test).float().mean().item()
            majority = max(y_test.mean().item(), 1 - y_test.mean().item())
            cells.append(f"{100 * accuracy:.1f} ({100 * majority:.0f})")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
