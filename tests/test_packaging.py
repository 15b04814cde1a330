"""pyproject.toml declares ranges; requirements/lock.txt pins the tested set the
Makefile and CI install. The two must agree, or CI tests a set users never get."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version and " " not in line, f"lock.txt: not a name==version pin: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_installed_requirement_is_pinned_within_its_declared_range():
    pins = locked()
    for text in [*project()["dependencies"], *project()["optional-dependencies"]["test"]]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is in pyproject.toml but not in requirements/lock.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"lock.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement}"
        )


def test_core_dependencies_are_ranges_not_pins():
    """An exact pin of a library users already have (torch, transformers, ...) makes
    rosetrain uninstallable beside anything that needs another release of it."""
    pinned = [text for text in project()["dependencies"] if "==" in text]
    assert pinned == []


def test_the_lock_does_not_pin_rosetrain_itself():
    assert "rosetrain" not in locked()


# ----------------------------------------------------------------- shipped configs


def cli(*argv: str) -> int:
    from rosetrain.cli import main

    return main(list(argv))


def test_the_shipped_configs_are_the_checkout_folders_not_copies():
    """One copy of each file: the package's resources/ links to the top-level folders."""
    for name in ("generators", "recipes", "eval"):
        link = ROOT / "rosetrain" / "resources" / name
        assert link.is_symlink(), f"rosetrain/resources/{name} should link to {name}/"
        assert link.resolve() == (ROOT / name).resolve()


def test_a_name_finds_the_shipped_config_of_the_options_kind(tmp_path, monkeypatch):
    from rosetrain.core import resources

    monkeypatch.chdir(tmp_path)  # an empty folder: nothing to find by path
    assert resources.find("spec", "heldout").resolve() == (ROOT / "generators" / "heldout.yaml").resolve()
    assert resources.find("suite", "heldout").resolve() == (ROOT / "eval" / "heldout.yaml").resolve()
    assert (
        resources.find("spec", "demo/heldout").resolve()
        == (ROOT / "generators" / "demo" / "heldout.yaml").resolve()
    )
    assert resources.find("recipe", "sft-lora-qwen2.5-vl-3b").name == "sft-lora-qwen2.5-vl-3b.yaml"
    # a path written as in the checkout finds the shipped file from any folder
    assert (
        resources.find("spec", "generators/rose-protocol.yaml").resolve()
        == (ROOT / "generators" / "rose-protocol.yaml").resolve()
    )


def test_a_path_wins_over_a_name(tmp_path, monkeypatch):
    from rosetrain.core import resources

    monkeypatch.chdir(tmp_path)
    (tmp_path / "generators").mkdir()
    mine = tmp_path / "generators" / "heldout.yaml"
    mine.write_text("name: mine\n")
    assert resources.find("spec", "generators/heldout.yaml") == Path("generators/heldout.yaml")
    (tmp_path / "heldout").write_text("name: mine\n")
    assert resources.find("suite", "heldout") == Path("heldout")


def test_an_unknown_name_lists_the_known_ones_each_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli("generate", "--spec", "no-such-spec", "--out", "d", "--scenes", "1") == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "rosetrain generate: error: --spec: no-such-spec is neither a file nor a known spec"
    )
    known = err.split("known specs: ")[1].split(" (")[0].split(", ")
    assert "heldout" in known and "demo/heldout" in known and "rose-official" not in known
    assert len(known) == len(set(known))
    assert cli("eval", "--suite", "curriculum", "--model", "m", "--out", "r") == 2
    assert "known suites: heldout, rose-official" in capsys.readouterr().err


def test_configs_list_shows_each_name_once(capsys):
    assert cli("configs", "list") == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert "demo/train" in names and "tiny-sft" in names and "zero3" in names and "rose-official" in names
    # each name once within its kind (heldout is a spec and a suite, not two specs)
    assert names.count("heldout") == 2 and names.count("demo/heldout") == 1


def test_configs_copy_writes_a_new_file_and_never_replaces_one(tmp_path, capsys):
    assert cli("configs", "copy", "spec", "demo/train", str(tmp_path / "mine")) == 0
    copied = sorted(p.name for p in (tmp_path / "mine").iterdir())
    assert copied == ["heldout.yaml", "train.yaml"]  # with the held-out spec it names
    assert (tmp_path / "mine" / "train.yaml").read_bytes() == (
        ROOT / "generators/demo/train.yaml"
    ).read_bytes()
    (tmp_path / "mine" / "train.yaml").write_text("edited\n")
    assert cli("configs", "copy", "spec", "demo/train", str(tmp_path / "mine")) == 2
    assert "exists" in capsys.readouterr().err
    assert (tmp_path / "mine" / "train.yaml").read_text() == "edited\n"
    assert cli("configs", "copy", "recipe", "tiny-sft", str(tmp_path / "r")) == 0
    assert (tmp_path / "r" / "tiny-sft.yaml").is_file()


def test_version(capsys):
    assert cli("--version") == 0
    assert capsys.readouterr().out.strip() == f"rosetrain {project()['version']}"


def test_the_heldout_suite_prepare_line_agrees_with_the_readme_and_recipes():
    import yaml

    prepare = yaml.safe_load((ROOT / "eval" / "heldout.yaml").read_text())["prepare"]
    command = prepare.split("`")[1]
    assert command in (ROOT / "README.md").read_text()
    for path in [*sorted((ROOT / "recipes").glob("*.yaml")), ROOT / "recipes" / "README.md"]:
        for line in path.read_text().splitlines():
            if "rosetrain generate" in line and "data/heldout " in line:
                assert command in line, f"{path.name}: {line.strip()} differs from the suite's {command}"


def test_stream_dataset_takes_a_shipped_spec_from_any_folder(tmp_path, monkeypatch):
    """The README's Python example names generators/curriculum.yaml: it must run where
    rosetrain is installed, not only in a clone."""
    from rosetrain.data.hf import stream_dataset

    monkeypatch.chdir(tmp_path)
    for spec in ("curriculum", "generators/curriculum.yaml"):
        row = next(iter(stream_dataset(spec, split="train", seed=0)))
        assert row["task_template"]


def test_a_folder_named_like_a_config_is_not_taken_for_one(tmp_path, monkeypatch):
    from rosetrain.core import resources
    from rosetrain.core.errors import RosetrainError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "heldout").mkdir()  # e.g. a split generated with --out heldout
    assert resources.find("suite", "heldout").name == "heldout.yaml"
    (tmp_path / "mine").mkdir()
    with pytest.raises(RosetrainError, match="--spec: mine is a folder, not a spec file"):
        resources.find("spec", "mine")
