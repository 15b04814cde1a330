"""pyproject.toml declares ranges; requirements/lock.txt pins the tested set the
Makefile and CI install. The two must agree, or CI tests a set users never get."""

from __future__ import annotations

import tomllib
from pathlib import Path

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
