"""Run the README's commands as a user would, from an empty folder, and stop at
the first claim that is not true.

    python tests/readme_commands.py [--bin DIR] [--work DIR] [--full]

Every line of the README's fenced blocks (plain, ``bash`` and ``python``) runs
in order in WORK (default: a new temporary folder) with the ``rosetrain`` and
``python`` of BIN (default: this interpreter's folder; give an installed
wheel's environment to check that installed works like cloned). A command that
needs what a CPU-only, offline machine lacks is listed as skipped, with why:

- ``hf download``, ``hf://`` and a suite of the real ROSE release (the Hub;
  tests/test_hub_release.py runs that section offline on a stand-in cache),
  ``--runner vllm|openai`` (a GPU, an endpoint), ``accelerate launch`` (GPUs),
  ``make`` and ``pip`` (installing: tests/test_install_wheel.py builds and
  installs the wheel);
- a training recipe of a real model (a GPU and its weights from the Hub): it
  runs as ``train ... --check`` with the stand-in model instead (every check
  of the run, no training), which must pass;
- a command that reads what no command before it wrote (a copy of the ROSE
  release), or what a skipped command would have written.

Stand-in model: a model the README names by Hub id or by a checkpoint path no
command here makes (``--model Qwen/Qwen2.5-VL-3B-Instruct``, ``--model
runs/sft/checkpoint-final``, ``--set model=...``) becomes a tiny Qwen2.5-VL
built once with ``rosetrain tiny-model --out stand-in-model`` in WORK, so
``eval`` (transformers runner), ``compare`` and ``curriculum`` run for real
(the listing marks each such command). Its answers are noise: what is checked
is that each command runs and writes what the README says, not its figures.

The predictions file the README's ``score`` line reads stands for the user's
own: here it holds the gold answers, so the run must score 100. The fast half
(the default, which the tests run) makes 3 scenes where the README says more
and evaluates the first 8 items with 8 new tokens; ``--full`` keeps the
README's numbers. After each command, what the README
says it writes is checked. Exit status 1 and the command at the first failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
FAST_SCENES = "3"
FAST_EVAL = ["--limit", "8", "--max-new-tokens", "8", "--threads", "1"]
REAL_RECIPE = "a GPU and the Hub weights of recipe"
STAND_IN = "stand-in-model"  # the tiny model in WORK that stands for the README's models
# what the README's text says each command writes (beside the command's --out)
WRITES = {
    "generate": ["metadata_{split}.jsonl", "images", "hf/{split}"],
    "score": [
        "per_item_eval.jsonl",
        "error_cases.jsonl",
        "evaluation_summary.json",
        "table1_row.txt",
        "table2_row.txt",
    ],
    "compare": ["compare.json", "report.md", "report.html"],
    # "eval ... writes every file of the official ROSE evaluator", and the answers it scored
    "eval": ["predictions.jsonl", "per_item_eval.jsonl", "evaluation_summary.json", "table1_row.txt"],
}
PER_ITEM_FIELDS = (
    70  # "per_item_eval.jsonl with its 70 fields" (the official ones; rosetrain adds its own after)
)
TOOLS = {"rosetrain", "make", "pip", "pip3", "hf", "accelerate", "torchrun", "python", "lmms-eval", "bash"}
LOCAL_ROOTS = ("runs", "data", "models", "tasks", "parts")


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def commands(text: str) -> list[tuple[str, str]]:
    """("shell", line) per command line and ("python", code) per Python block, in order."""
    found = []
    for language, body in blocks(text):
        if language == "python":
            found.append(("python", body))
        elif language in ("", "bash", "sh", "shell"):
            for line in body.splitlines():  # a layout tree is a block too: commands start with a tool
                if line.split(" ", 1)[0] in TOOLS:
                    found.append(("shell", line.strip()))
    return found


def option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def is_hub_id(value: str) -> bool:
    return value.count("/") == 1 and value.split("/")[0] not in LOCAL_ROOTS and not Path(value).exists()


def names_standin_model(value: str, work: Path) -> bool:
    """A Hub model id, or a checkpoint path that no command before it made."""
    if is_hub_id(value):
        return True
    return Path(value).name.startswith("checkpoint") and not (work / value).exists()


def stand_in(argv: list[str], work: Path) -> bool:
    """Replace each model the README names that this machine cannot have
    (``--model``, ``--model=``, ``--set model=``) by the stand-in; True if any was."""
    replaced = False
    for i, arg in enumerate(argv):
        if i and argv[i - 1] == "--model" and names_standin_model(arg, work):
            argv[i] = STAND_IN
        elif arg.startswith("--model=") and names_standin_model(arg.split("=", 1)[1], work):
            argv[i] = f"--model={STAND_IN}"
        elif i and argv[i - 1] == "--set" and arg.startswith("model="):
            if names_standin_model(arg.split("=", 1)[1], work):
                argv[i] = f"model={STAND_IN}"
            else:
                continue
        else:
            continue
        replaced = True
    return replaced


def hub_suite(argv: list[str]) -> str | None:
    """The Hub dataset a ``--suite`` reads (the real ROSE release), if it names one."""
    suite = option(argv, "--suite")
    if not suite:
        return None
    root = README.parent
    for path in (root / suite, root / "eval" / f"{suite}.yaml"):
        if path.is_file():
            found = re.search(r"^hub_dataset:\s*(\S+)", path.read_text(encoding="utf-8"), re.M)
            return found.group(1) if found else None
    return None


def inputs(argv: list[str]) -> list[str]:
    """The local paths a rosetrain command reads: every argument under runs/, data/,
    models/... (or ~) but the one after --out."""
    found = []
    for i, arg in enumerate(argv[2:], start=2):
        value = arg.split("=", 1)[1] if "=" in arg and not arg.startswith("-") else arg
        if argv[i - 1] == "--out" or arg.startswith("output_dir="):
            continue
        if value.split("/")[0] in LOCAL_ROOTS or value.startswith("~"):
            found.append(value)
    return found


def why_skipped(argv: list[str], line: str, unavailable: set[str], work: Path) -> str | None:
    tool = argv[0]
    if tool in ("make", "pip", "pip3"):
        return "installs (tests/test_install_wheel.py builds and installs the wheel)"
    if tool == "hf" or "hf://" in line:
        return "the Hugging Face Hub"
    if tool == "accelerate":
        return "GPUs (accelerate launch)"
    if tool != "rosetrain":
        return f"not a rosetrain command ({tool})"
    runner = option(argv, "--runner")
    if runner in ("vllm", "openai"):
        if runner == "vllm":
            return "--runner vllm: a GPU"
        # a stand-in server exists, but it fails some requests on purpose (retries,
        # timeouts): tests/test_evaluate.py runs this runner against it, resumes included
        return "--runner openai: an OpenAI-compatible endpoint (tests/test_evaluate.py runs it on a stand-in server)"
    dataset = hub_suite(argv)
    if dataset:
        return f"the Hub dataset {dataset} (tests/test_hub_release.py runs this offline)"
    recipe = option(argv, "--recipe")
    if len(argv) > 1 and argv[1] == "train" and recipe and not recipe.startswith(("tiny-", "demo-")):
        return f"{REAL_RECIPE} {recipe}"
    if len(argv) > 1 and argv[1] == "demo":
        return "minutes of training (make demo; tests/test_demo.py runs it small)"
    for path in inputs(argv):
        if path == STAND_IN:
            continue
        if any(path == u or path.startswith(u.rstrip("/") + "/") for u in unavailable):
            return f"reads {path}, which a skipped command writes"
        if path.startswith("~") or not (work / path).exists():
            if argv[1] == "score" and path == option(argv, "--predictions"):
                continue  # the stand-in predictions are made below
            return f"reads {path}, which no command before it makes"
    return None


def gold_predictions(work: Path, data: str, split: str, out: str) -> None:
    """The user's predictions file, standing in: the gold answers of the split."""
    rows = [json.loads(line) for line in (work / data / f"metadata_{split}.jsonl").read_text().splitlines()]
    with open(work / out, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(
                json.dumps({"item_id": row["item_id"], "raw_text": row["answer"], "model": "gold"}) + "\n"
            )


def official_fields(bin_dir: Path) -> list[str]:
    """The official evaluator's per-item fields, as the installed rosetrain lists them."""
    code = (
        "import json; from rosetrain.scoring.fields import OFFICIAL_FIELDS as F; print(json.dumps(list(F)))"
    )
    return json.loads(
        subprocess.run(
            [str(bin_dir / "python"), "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def check_claims(argv: list[str], work: Path, bin_dir: Path) -> None:
    sub, out = argv[1], option(argv, "--out")
    split = option(argv, "--split") or "test"
    for name in WRITES.get(sub, []):
        path = work / (out or "") / name.format(split=split)
        if not path.exists():
            raise AssertionError(
                f"the README says `rosetrain {sub}` writes {path.relative_to(work)}; it does not"
            )
    if sub == "score" and out:
        rows = (work / out / "per_item_eval.jsonl").read_text().splitlines()
        fields = list(json.loads(rows[0]))
        if (
            fields[:PER_ITEM_FIELDS] != official_fields(bin_dir)
            or len(official_fields(bin_dir)) != PER_ITEM_FIELDS
        ):
            raise AssertionError(
                f"per_item_eval.jsonl should start with the official evaluator's {PER_ITEM_FIELDS} fields, "
                f"as the README says; its first fields are {fields[:5]}..."
            )
        summary = json.loads((work / out / "evaluation_summary.json").read_text())
        if summary.get("avg_pass") not in (1, 1.0, 100, 100.0):
            raise AssertionError(f"the gold answers scored avg_pass {summary.get('avg_pass')}, not all PASS")
    if sub == "curriculum" and out:
        # "writes a report of the cells and weights beside the spec"
        report = work / out.removesuffix(".yaml")
        for path in (work / out, report.with_name(report.name + "-report") / "report.md"):
            if not path.is_file():
                raise AssertionError(f"`rosetrain curriculum` did not write {path.relative_to(work)}")
    if sub == "preview":
        target = option(argv, "--out")
        if target and not (work / target).is_file():
            raise AssertionError(f"`rosetrain preview` did not write {target}")


def check_recipe(argv: list[str], work: Path, bin_dir: Path, env: dict[str, str]) -> str:
    """A real recipe is not trained here, but ``--check`` runs every check its run
    makes (data, TRL config, LoRA targets) without training: with the stand-in model,
    so that a spec an earlier command wrote (``--set data.spec=runs/next.yaml``)
    is proven to feed the recipe."""
    make_stand_in(work, bin_dir, env)
    command = [str(bin_dir / "rosetrain"), *argv[1:], "--check"]
    if not any(a.startswith("model=") for a in argv):
        command += ["--set", f"model={STAND_IN}"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(
            f"`{shlex.join(argv)} --check` with the stand-in model failed (exit {done.returncode}):\n"
            f"{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    return "its --check passed with the stand-in model"


def make_stand_in(work: Path, bin_dir: Path, env: dict[str, str]) -> None:
    """The tiny model every replaced ``--model`` names, built once."""
    if (work / STAND_IN).exists():
        return
    command = [str(bin_dir / "rosetrain"), "tiny-model", "--out", STAND_IN, "--family", "qwen2.5-vl"]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(
            f"building the stand-in model failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )


def run(readme: Path, bin_dir: Path, work: Path, full: bool) -> tuple[list[str], list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1")
    ran, skipped, unavailable = [], [], set()
    for kind, text in commands(readme.read_text(encoding="utf-8")):
        if kind == "python":
            argv = [str(bin_dir / "python"), "-c", text]
            line = f"python block: {text.strip().splitlines()[0]} ..."
        else:
            line = text
            argv = shlex.split(text, comments=True)
            original = list(argv)
            # the stand-in decides before the skip rules: a Hub model no longer skips,
            # while a skipped training recipe stays skipped whatever its model
            replaced = argv[0] == "rosetrain" and stand_in(argv, work)
            reason = why_skipped(argv, text, unavailable, work)
            if reason:
                if argv[:2] == ["rosetrain", "train"] and reason.startswith(REAL_RECIPE):
                    reason += "; " + check_recipe(argv, work, bin_dir, env)
                argv = original
                skipped.append(f"{line}  [{reason}]")
                if option(argv, "--out"):
                    unavailable.add(option(argv, "--out"))
                for override in (a for a in argv if a.startswith("output_dir=")):
                    unavailable.add(override.split("=", 1)[1])
                if len(argv) > 1 and argv[:2] == ["rosetrain", "train"]:
                    recipe = Path(option(argv, "--recipe") or "").name.removesuffix(".yaml")
                    unavailable.add(f"runs/{recipe}")  # the shipped recipes' output_dir
                continue
            if not full and option(argv, "--scenes"):
                argv[argv.index("--scenes") + 1] = FAST_SCENES
            if argv[1] == "generate":
                argv += ["--num-proc", "1", "--quiet"]
            if replaced:
                make_stand_in(work, bin_dir, env)
                line += f"  [stand-in model: {STAND_IN}]"
            if argv[1] == "eval":
                argv += ["--no-progress"] + ([] if full else FAST_EVAL)
            if argv[1] == "score":
                predictions = option(argv, "--predictions")
                if predictions and not (work / predictions).exists():
                    gold_predictions(
                        work, option(argv, "--data"), option(argv, "--split") or "test", predictions
                    )
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(
                f"`{line}` failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
            )
        if kind == "shell":
            check_claims(argv, work, bin_dir)
        ran.append(line)
    return ran, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bin", type=Path, default=Path(sys.executable).parent, help="folder of rosetrain and python"
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="an empty folder to run in (default: a new temporary one)"
    )
    parser.add_argument("--readme", type=Path, default=README, help="the README to check")
    parser.add_argument(
        "--full", action="store_true", help="the README's numbers of scenes (default: 3 each)"
    )
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="rosetrain-readme-"))
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        parser.error(f"--work {work} is not empty")
    try:
        ran, skipped = run(args.readme, args.bin.resolve(), work, args.full)
    except AssertionError as err:
        print(f"README claim not true: {err}", file=sys.stderr)
        return 1
    print(f"ran {len(ran)} commands of {args.readme} in {work}:")
    print("\n".join(f"  {line}" for line in ran))
    print(f"skipped {len(skipped)}:")
    print("\n".join(f"  {line}" for line in skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
