"""The GPU path in one command: the real recipes' settings on one CUDA GPU.

    python benchmarks/gpu_check.py [--wheels DIR] [--out DIR]    # make gpu-check
    python benchmarks/gpu_check.py --dry-run                     # the same checks on the CPU (CI)

One line per check, ``PASS|FAIL|SKIP name: what it measured (seconds)``:

1. **packages**: torch sees CUDA; trl, datasets, peft (...) import, else they
   are installed from the wheels in ``--wheels`` (a GPU machine here has torch,
   transformers and peft but no TRL or datasets, and no network).
2. **tiny model**: a tiny Qwen2.5-VL (``rosetrain tiny-model --family qwen2.5-vl``).
3. **data**: a training split and a held-out split (``rosetrain generate``, the
   demo's specs, which need no system fonts).
4. **sft**: ``recipes/sft-lora-qwen2.5-vl-3b.yaml`` as shipped (bf16, gradient
   checkpointing, LoRA on Qwen2.5-VL's attention) on the tiny model, a few steps.
5. **grpo**: ``recipes/grpo-lora-qwen2.5-vl-3b.yaml`` from the SFT run, a few steps.
6. **eval**: ``rosetrain eval`` of the GRPO run with the transformers runner.
7. **qwen2.5-vl-3b**: the full-size Qwen2.5-VL-3B built from its configuration
   (random weights: nothing downloaded), LoRA as the SFT recipe sets it, a few
   steps at the recipe's batch and image size; prints peak GPU memory and
   tokens per second, so the recipe's memory claim is measured.

``--dry-run`` runs every check on the CPU at toy sizes (fp32, no bf16, the 3B's
shape shrunk): the same code paths, no figure worth reporting. A check that
fails does not stop the others; the exit status is 1 when any failed.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The demo's specs draw attribute cells only: the check needs no system fonts (the
# `curriculum` spec's emoji families need Noto Color Emoji, which a GPU image may lack)
DEMO_SPECS = ROOT / "rosetrain" / "assets" / "demo" / "generators"
NEEDED = ("trl", "datasets", "peft", "accelerate", "msgspec", "orjson", "PIL")
WHEEL_NAMES = {"PIL": "pillow"}

# Qwen2.5-VL-3B-Instruct's configuration (its config.json), the sizes that decide memory
QWEN25_VL_3B_TEXT = dict(
    hidden_size=2048,
    intermediate_size=11008,
    num_hidden_layers=36,
    num_attention_heads=16,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=128000,
)
QWEN25_VL_3B_VISION = dict(
    depth=32,
    hidden_size=1280,
    intermediate_size=3420,
    num_heads=16,
    out_hidden_size=2048,
    window_size=112,
    fullatt_block_indexes=[7, 15, 23, 31],
)
# --dry-run: the same architecture, shrunk to run on a CPU in seconds
TOY_TEXT = dict(QWEN25_VL_3B_TEXT, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                num_attention_heads=2, num_key_value_heads=2, vocab_size=4096)  # fmt: skip
TOY_VISION = dict(QWEN25_VL_3B_VISION, depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                  out_hidden_size=64, fullatt_block_indexes=[1])  # fmt: skip


class Checks:
    """Runs each check, prints its line, remembers whether any failed."""

    def __init__(self) -> None:
        self.failed = False

    def run(self, name: str, check: Callable[[], str]) -> bool:
        start = time.perf_counter()
        try:
            detail = check()
            status = "SKIP" if detail.startswith("skipped") else "PASS"
        except Exception as err:  # a check's failure is reported, and the next one runs
            detail, status = (
                f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}",
                "FAIL",
            )
            self.failed = True
        print(f"{status}  {name}: {detail} ({time.perf_counter() - start:.1f} s)", flush=True)
        return status == "PASS"


def ensure_packages(wheels: Path | None) -> str:
    missing = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing and wheels is None:
        raise RuntimeError(f"missing {', '.join(missing)}; give --wheels DIR holding their wheels")
    if missing:
        packages = [WHEEL_NAMES.get(name, name) for name in missing]
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels)]
        subprocess.run([*command, *packages], check=True)
        importlib.invalidate_caches()
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    installed = f"; installed {', '.join(missing)} from {wheels}" if missing else ""
    return f"torch {torch.__version__}, {device}{installed}"


def cli(*argv: str) -> None:
    """``rosetrain ARGV`` in this interpreter; a non-zero exit is an error naming the command."""
    from rosetrain.cli import main

    code = main(list(argv))
    if code:
        raise RuntimeError(f"`rosetrain {' '.join(argv)}` exited {code}")


def train(
    method: str, recipe: str, out: Path, model: Path, data: Path, heldout: Path, gpu: bool, steps: int
) -> Path:
    run = out / f"{method}-run"
    overrides = [
        f"model={model}",
        f"output_dir={run}",
        f"data.folder={data}",
        "data.split=train",
        "data.spec=null",
        f"eval.folder={heldout}",
        f"eval.every_steps={steps}",
        f"eval.items={16 if gpu else 4}",
        "eval.max_new_tokens=16",
        f"max_steps={steps}",
        "save_steps=1000",
        "report_to=[none]",
        "resume=never",
    ]
    if not gpu:  # the CPU cannot run bf16 training at speed; everything else is the recipe's
        overrides += ["bf16=false", "gradient_checkpointing=false", "per_device_train_batch_size=2",
                      "gradient_accumulation_steps=1", "grpo.num_generations=2",
                      "grpo.max_completion_length=16"]  # fmt: skip
    cli("train", method, "--recipe", recipe, "--quiet", *[a for o in overrides for a in ("--set", o)])
    return run


def full_size_steps(out: Path, tiny: Path, gpu: bool, steps: int) -> str:
    """Qwen2.5-VL-3B from its configuration, LoRA as the SFT recipe sets it, a few
    steps at the recipe's batch and image size; peak memory and tokens per second."""
    import torch
    from peft import get_peft_model
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from rosetrain.train.recipe import load_recipe, peft_config

    recipe = load_recipe(ROOT / "recipes" / "sft-lora-qwen2.5-vl-3b.yaml")
    processor = AutoProcessor.from_pretrained(tiny)  # its image tokens; the 3B's embedding is larger
    config = AutoModelForImageTextToText.from_pretrained(tiny).config
    for key, value in (QWEN25_VL_3B_TEXT if gpu else TOY_TEXT).items():
        setattr(config.text_config, key, value)
    text = config.text_config
    if getattr(text, "layer_types", None):  # one entry a layer, sized at init
        text.layer_types = text.layer_types[:1] * text.num_hidden_layers
    # M-RoPE splits half a head's dimensions over (time, height, width): 3B's [16, 24, 24]
    half = text.hidden_size // text.num_attention_heads // 2
    text.rope_parameters = {
        **text.rope_parameters,
        "mrope_section": [half // 4, 3 * half // 8, half - half // 4 - 3 * half // 8],
    }
    for key, value in (QWEN25_VL_3B_VISION if gpu else TOY_VISION).items():
        setattr(config.vision_config, key, value)
    dtype = torch.bfloat16 if gpu else torch.float32
    device = "cuda" if gpu else "cpu"
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    parameters = sum(p.numel() for p in model.parameters())
    if gpu:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model = get_peft_model(model, peft_config(recipe))
    side = int((recipe.max_pixels or 1003520) ** 0.5) // 28 * 28 if gpu else 112
    processor.image_processor.size = {"shortest_edge": 28 * 28, "longest_edge": side * side}
    batch = recipe.per_device_train_batch_size or 4
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "How many cells differ?"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "COUNT(3)"}]}]  # fmt: skip
    text = processor.apply_chat_template(messages, tokenize=False)
    image = Image.new("RGB", (side, side), (40, 160, 200))
    inputs = processor(text=[text] * batch, images=[image] * batch, return_tensors="pt").to(device)
    inputs["labels"] = inputs["input_ids"].clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    start = None
    for step in range(steps + 1):
        if step == 1:  # the first step warms up
            if gpu:
                torch.cuda.synchronize()
            start = time.perf_counter()
        model(**inputs).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    if gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - (start or time.perf_counter())
    tokens = int(inputs["input_ids"].numel()) * steps
    peak = f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB, " if gpu else ""
    return (
        f"{parameters / 1e9:.2f}B parameters, batch {batch} at {side}x{side} px "
        f"({inputs['input_ids'].shape[1]} tokens a row): {peak}{tokens / max(seconds, 1e-9):,.0f} tokens/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheels", type=Path, help="wheels of the packages the machine lacks (pip --find-links)"
    )
    parser.add_argument("--out", type=Path, help="working folder (default: a temporary one)")
    parser.add_argument("--dry-run", action="store_true", help="every check on the CPU at toy sizes (CI)")
    parser.add_argument("--steps", type=int, default=4, help="training steps of each check (default 4)")
    args = parser.parse_args(argv)
    checks = Checks()
    if not checks.run("packages", lambda: ensure_packages(args.wheels)):
        return 1
    import torch

    gpu = torch.cuda.is_available() and not args.dry_run
    if not gpu and not args.dry_run:
        print("FAIL  cuda: no CUDA device; --dry-run runs the checks on the CPU", flush=True)
        return 1
    items = 16 if gpu else 4
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        tiny, data, heldout = out / "tiny-qwen2.5-vl", out / "data", out / "heldout"
        made = checks.run(
            "tiny model", lambda: cli("tiny-model", "--out", str(tiny), "--family", "qwen2.5-vl") or str(tiny)
        )
        made &= checks.run(
            "data",
            lambda: (
                cli(
                    "generate",
                    "--spec",
                    str(DEMO_SPECS / "train.yaml"),
                    "--out",
                    str(data),
                    "--split",
                    "train",
                    "--scenes",
                    "16",
                    "--formats",
                    "release,hf",
                    "--quiet",
                )  # fmt: skip
                or cli(
                    "generate",
                    "--spec",
                    str(DEMO_SPECS / "heldout.yaml"),
                    "--out",
                    str(heldout),
                    "--split",
                    "test",
                    "--scenes",
                    "8",
                    "--quiet",
                )
                or f"{data}, {heldout}"
            ),
        )
        runs: dict[str, Path] = {}

        def stage(method: str, base: Path) -> str:
            recipe = str(ROOT / "recipes" / f"{method}-lora-qwen2.5-vl-3b.yaml")
            runs[method] = train(method, recipe, out, base, data, heldout, gpu, args.steps)
            return f"{args.steps} steps of {Path(recipe).name} ({'bf16, gradient checkpointing' if gpu else 'fp32, CPU'})"

        if made and checks.run("sft", lambda: stage("sft", tiny)):
            if checks.run("grpo", lambda: stage("grpo", runs["sft"])):
                checks.run(
                    "eval",
                    lambda: (
                        cli(
                            "eval",
                            "--model",
                            str(runs["grpo"]),
                            "--data",
                            str(heldout),
                            "--out",
                            str(out / "eval"),
                            "--limit",
                            str(items),
                            "--max-new-tokens",
                            "16",
                            "--quiet",
                        )  # fmt: skip
                        or f"transformers runner on {'cuda' if gpu else 'cpu'}, {items} items"
                    ),
                )
        if made:
            checks.run("qwen2.5-vl-3b", lambda: full_size_steps(out, tiny, gpu, max(1, args.steps // 2)))
    return 1 if checks.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
