"""The package's layers point one way (docs/architecture.md, "Where things live").

Reads every module of ``rosetrain`` with ``ast`` (nothing is imported) and
checks its imports, those inside functions included: a lazy import is still a
dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rosetrain"

# Lowest first; a module may import its own layer and the ones before it.
LAYERS = (
    ("core",),
    ("generators",),
    ("data",),
    ("scoring",),
    ("models",),
    ("runners",),
    ("evaluation", "train", "integrations"),
    ("rewards",),  # the public reward API over train.rewards
    ("reports",),
    ("curriculum",),
    ("demo",),
    ("commands", "cli", "__main__"),
)
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in a module."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:  # `from rosetrain.x import module`
                    found.append((submodule, None, node.lineno))
                else:
                    found.append((base, alias.name, node.lineno))
    return [(target, what, line) for target, what, line in found if target.split(".")[0] == "rosetrain"]


def layer(name: str) -> str:
    return name.split(".")[1] if "." in name else "rosetrain"


def graph() -> dict[str, set[str]]:
    return {name: {target for target, _, _ in imports(name) if target in MODULES} for name in MODULES}


def test_every_rosetrain_import_names_a_module_of_the_package():
    missing = [
        f"{name}:{line} imports {target}"
        for name in MODULES
        for target, _, line in imports(name)
        if target not in MODULES
    ]
    assert missing == []


def test_every_subpackage_has_a_layer():
    assert {layer(name) for name in MODULES} - {"rosetrain", "assets"} <= set(RANK)


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{name}:{line} ({layer(name)}) imports {target} ({layer(target)})"
        for name in MODULES
        if layer(name) in RANK
        for target, _, line in imports(name)
        if layer(target) in RANK and RANK[layer(target)] > RANK[layer(name)]
    ]
    assert upward == []


def test_only_the_command_line_imports_commands_and_no_command_imports_another():
    wrong = [
        f"{name}:{line} imports {target}"
        for name in MODULES
        for target, _, line in imports(name)
        if target.startswith("rosetrain.commands.")
        and (
            not name.startswith(("rosetrain.commands", "rosetrain.cli"))
            or name.startswith("rosetrain.commands.")
        )
    ]
    assert wrong == []


def test_no_private_name_is_imported_from_another_module():
    private = [
        f"{name}:{line} imports {what} from {target}"
        for name in MODULES
        for target, what, line in imports(name)
        if what and what.startswith("_") and not what.startswith("__") and target != name
    ]
    assert private == []


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges[node]:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycles_finds_what_it_should(edges, expected):
    assert cycles(edges) == expected


# ----------------------------------------------------------- one way to do a job

# The one place that renames a finished temp file (or folder) into place:
# rosetrain.core.io.atomic_path, under atomic_write. A second temp-file-and-rename
# writer elsewhere would name its temps its own way, which the cleanup of a
# killed run (remove_atomic_temps, data.manifest.remove_stale_temps) would miss.
RENAMES_ALLOWED = {"rosetrain.core.io"}


def renames(source: str) -> list[int]:
    """Lines of the calls that move a file into place: ``os.replace``,
    ``os.rename``, ``shutil.move``, ``Path.rename`` and ``Path.replace`` (a
    ``.replace`` of one argument: ``str.replace`` takes two)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil"):
            if any(alias.name in ("replace", "rename", "renames", "move") for alias in node.names):
                found.append(node.lineno)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        attr = node.func.attr
        if (
            (owner == "os" and attr in ("replace", "rename", "renames"))
            or (owner == "shutil" and attr == "move")
            or attr == "rename"
            or (attr == "replace" and len(node.args) == 1 and not node.keywords)
        ):
            found.append(node.lineno)
    return found


def test_only_core_io_renames_files_into_place():
    found = [
        f"{name}:{line}"
        for name, path in MODULES.items()
        if name not in RENAMES_ALLOWED
        for line in renames(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "write through rosetrain.core.io.atomic_write / atomic_path"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import os\nos.replace(tmp, path)", [2]),
        ("os.rename(a, b)", [1]),
        ("tmp.rename(path)", [1]),
        ("tmp.replace(path)", [1]),
        ("from os import replace", [1]),
        ("shutil.move(a, b)", [1]),
        ("text.replace('a', 'b')\nrecord.replace(x=1)", []),
    ],
)
def test_renames_finds_what_it_should(source, expected):
    assert renames(source) == expected


# A library error names the argument or config key at fault, never a flag of the
# command line (a caller of the Python API passed none): the CLI adds the option
# (RosetrainError.argument, rosetrain.cli.error_line). Flags of other programs a
# message tells the user to run are allowed by name. FLAG_DEBT lists modules still to
# convert, with how many such raises each may hold: ceilings that only go down.
FLAG = re.compile(r"(?:^|[\s`(])--[a-z]")
OTHER_PROGRAMS_FLAGS = {
    "rosetrain.train.distributed": ("--cpu", "--config_file"),  # accelerate launch's
    "rosetrain.integrations.lmms_eval.export": ("--log_samples",),  # lmms-eval's
}
FLAG_DEBT: dict[str, int] = {}


def flag_raises(source: str, allowed: tuple[str, ...] = ()) -> list[int]:
    """Lines of the ``raise`` statements whose message has a string constant naming a
    ``--flag`` (other than the ``allowed`` ones)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            texts = [
                c.value
                for c in ast.walk(node.exc)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
            for text in texts:
                for flag in allowed:
                    text = text.replace(flag, "")
                if FLAG.search(text):
                    found.append(node.lineno)
                    break
    return found


def library_modules() -> dict[str, Path]:
    return {
        name: path for name, path in MODULES.items() if layer(name) not in ("commands", "cli", "__main__")
    }


def test_library_errors_name_no_command_line_flag():
    over = {}
    for name, path in library_modules().items():
        lines = flag_raises(path.read_text(encoding="utf-8"), OTHER_PROGRAMS_FLAGS.get(name, ()))
        if len(lines) > FLAG_DEBT.get(name, 0):
            over[name] = lines
    assert over == {}, "name the argument (RosetrainError(..., argument=...)); the CLI adds the flag"


def test_a_converted_module_leaves_the_flag_debt():
    """A module with no flag left in its raises comes off FLAG_DEBT (lower a
    number when a module gets better, too: the numbers are ceilings)."""
    done = [
        name
        for name in FLAG_DEBT
        if name in MODULES and not flag_raises(MODULES[name].read_text(encoding="utf-8"))
    ]
    assert done == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ('raise RosetrainError("--out: a file")', [1]),
        ('raise E(f"{x}; pass --overwrite or choose another")', [1]),
        ('raise E("run `rosetrain generate --formats hf`")', [1]),
        ('raise E(f"out_dir: {x} is a file", argument="out_dir")', []),
        ('raise E("a -- b, x--y, 3 -- 4")', []),
        ('message = "--out"', []),
    ],
)
def test_flag_raises_finds_what_it_should(source, expected):
    assert flag_raises(source) == expected


def test_no_test_file_imports_conftest():
    """Shared test helpers are fixtures (tests/conftest.py): pytest hands them to a
    test by name, whatever directory it runs from."""
    tests = PACKAGE.parent / "tests"
    importing = [
        path.name
        for path in sorted(tests.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.ImportFrom) and node.module == "conftest")
        or (isinstance(node, ast.Import) and any(alias.name == "conftest" for alias in node.names))
    ]
    assert importing == []


# One registry style: a name a user picks (a family, a runner, a reward, a training
# method, a config kind) is an entry of a rosetrain.core.registry.Registry, whose
# code entries are "module:attr" paths imported on first use. Only the registry
# imports by name; cli.py's command table is the one other (each command a module
# with add_arguments and run, imported only when it runs).
IMPORTS_BY_NAME_ALLOWED = {"rosetrain.core.registry", "rosetrain.cli"}
# Tables of a config's own schema, not names a user picks: a recipe's sections.
SCHEMA_TABLES = {"rosetrain.train.recipe": ("SECTIONS",)}
IMPORT_PATH = re.compile(r"^rosetrain(?:\.\w+)+(?::\w+)?$|^[a-z_]\w*(?:\.\w+)*:[A-Za-z_]\w*$")


def second_registries(source: str, allowed: tuple[str, ...] = ()) -> list[int]:
    """Lines of what registers things another way than Registry: an import by name
    (``importlib.import_module``, ``__import__``), or a module-level dict whose values
    are import paths or the module's own classes and functions."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__"):
                found.append(node.lineno)
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    defined |= {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict) or not value.values:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(target, ast.Name) and target.id in allowed for target in targets):
            continue

        def code(entry: ast.expr | None) -> bool:
            if isinstance(entry, ast.Constant) and isinstance(entry.value, str):
                return bool(IMPORT_PATH.match(entry.value))
            if isinstance(entry, ast.Tuple) and entry.elts:
                return code(entry.elts[0])
            return isinstance(entry, ast.Lambda) or (isinstance(entry, ast.Name) and entry.id in defined)

        if all(code(entry) for entry in value.values):
            found.append(node.lineno)
    return found


def test_names_are_registered_one_way():
    found = [
        f"{name}:{line}"
        for name, path in MODULES.items()
        if name not in IMPORTS_BY_NAME_ALLOWED
        for line in second_registries(path.read_text(encoding="utf-8"), SCHEMA_TABLES.get(name, ()))
    ]
    assert found == [], "register names through rosetrain.core.registry.Registry"


@pytest.mark.parametrize(
    "source, expected",
    [
        ('FAMILIES = {"glyph": "rosetrain.generators.families.glyph:GlyphFamily"}', [1]),
        ('import importlib\ndef m(x):\n    return importlib.import_module(f"rosetrain.train.{x}")', [3]),
        ("class A: ...\nclass B: ...\nKINDS = {'a': A, 'b': B}", [3]),
        ("def f(): ...\nTABLE: dict = {'f': f, 'g': lambda: 0}", [2]),
        ('COMMANDS = {"x": ("rosetrain.commands.x", "help")}', [1]),
        ('F = Registry("family", {"glyph": "rosetrain.generators.families.glyph:GlyphFamily"})', []),
        ('HINT = {"COUNT": "COUNT(n)", "CLICK": "CLICK(Rr,Cc); DONE"}', []),
        ("LIMITS = {'a': (1, 2), 'b': MAX}", []),
        ("def f():\n    plan = {'a': f}", []),
    ],
)
def test_second_registries_finds_what_it_should(source, expected):
    assert second_registries(source) == expected
