"""Check that `pip install rosetrain` and `pip install 'rosetrain[EXTRA]'` resolve,
for every extra in pyproject.toml, as they would in a fresh environment.

    python requirements/check_extras.py             # every extra together, then apart if that fails
    python requirements/check_extras.py ray vllm    # these extras, each apart

By default every extra is resolved together, in one resolution: if their union
resolves, so do the core and each extra alone (each asks a subset of it). pip's
resolver is CPU-bound (about 30 s of one core a resolution), so one resolution
of the union took 93 s on this project's two-core machine where the core and
seven extras side by side took 253 s. Only when the union fails are the core
and each extra resolved apart, to say which fails.

Only pip's resolver runs (`pip install --dry-run --ignore-installed --report`):
it reads the packages' metadata, which PyPI serves apart from the wheels, so no
torch or CUDA wheel is downloaded and nothing is installed. It sees what a user
of this machine's pip sees (its indexes and caps). One line per extra names the
versions chosen for the packages that decide compatibility; the exit status is
1 if any extra fails to resolve, with pip's explanation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the packages users' environments most often already pin
SHOWN = ("torch", "torchvision", "transformers", "trl", "peft", "datasets", "accelerate")


def extras() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return sorted(project.get("optional-dependencies", {}))


def resolve(extra: str | None) -> tuple[dict[str, str] | None, str]:
    """Versions pip would install for rosetrain[extra] (``extra`` may list several,
    comma-separated), or None and pip's error."""
    target = f"{ROOT}[{extra}]" if extra else str(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--disable-pip-version-check",
                "--report",
                str(report),
                target,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            # pip also warns about every local index folder a name is missing from
            lines = [line for line in done.stderr.splitlines() if "is ignored: it is neither" not in line]
            return None, "\n".join(lines[-25:])
        chosen = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in chosen}, ""


def own_packages(extra: str | None) -> list[str]:
    """The names the extras add (``vllm``, ``deepspeed``, ...), to show their versions too."""
    if not extra:
        return []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = []
    for one in extra.split(","):
        for requirement in project["optional-dependencies"][one]:
            name = requirement.split(";")[0]
            for stop in "<>=!~[ ":
                name = name.split(stop)[0]
            names.append(name.lower())
    return names


def timed_resolve(extra: str | None) -> tuple[dict[str, str] | None, str, float]:
    start = time.monotonic()
    versions, error = resolve(extra)
    return versions, error, time.monotonic() - start


def report(extra: str | None, versions: dict[str, str] | None, error: str, seconds: float) -> bool:
    """Print one line for ``extra`` (and pip's error when it fails); True if it resolves."""
    label = f"rosetrain[{extra}]" if extra else "rosetrain"
    if versions is None:
        print(f"{label}: DOES NOT RESOLVE ({seconds:.0f} s)\n{error}", flush=True)
        return False
    names = [n for n in (*own_packages(extra), *SHOWN) if n in versions]
    shown = " ".join(f"{n}=={versions[n]}" for n in dict.fromkeys(names))
    print(f"{label}: resolves, {len(versions)} packages ({seconds:.0f} s): {shown}", flush=True)
    return True


def main(argv: list[str]) -> int:
    if not argv:
        union = ",".join(extras())
        if report(union, *timed_resolve(union)):
            print("so the core and each extra resolve on their own: each asks a subset of this", flush=True)
            return 0
        print("the extras together do not resolve; each apart:", flush=True)
    wanted = argv or [None, *extras()]
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        results = list(pool.map(timed_resolve, wanted))
    resolved = [report(extra, *result) for extra, result in zip(wanted, results)]
    return 0 if all(resolved) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
