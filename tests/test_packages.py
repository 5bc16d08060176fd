"""Package boundaries (as httpx guards its own): every package's ``__all__`` is explicit and true,
implementation modules are private, and no module reaches into another package's private module.

These guard the structure the whole team builds on; each failure says what to change.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {
    "tracejudge": ROOT / "tracejudge",
    "tracejudge_collectors": ROOT / "collectors" / "tracejudge_collectors",
}
# Public modules by design: the local stand-in servers are imported by module (``tracejudge.testing``'s
# docstring names them), not re-exported.
PUBLIC_MODULES = {
    "tracejudge.testing.langfuse_server",
    "tracejudge.testing.openai_server",
    "tracejudge.testing.phoenix_server",
}


def _modules() -> Iterator[tuple[str, Path, bool]]:
    """(dotted name, file, is a package) for every module of tracejudge and tracejudge_collectors."""
    for top, base in SOURCES.items():
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            parts = [top, *rel.parts]
            if parts[-1] == "__init__":
                yield ".".join(parts[:-1]), path, True
            else:
                yield ".".join(parts), path, False


PACKAGES = sorted(name for name, _, is_package in _modules() if is_package)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_explicit_and_true(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{package}/__init__.py: add __all__ listing what the package exports"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, (
        f"{package}.__all__ names {missing}, which the package does not define: import or drop them"
    )
    assert len(set(exported)) == len(exported), f"{package}.__all__ lists a name twice"
    submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in submodules
        and name != "annotations"  # from __future__ import annotations
        and not (isinstance(value, type(module)))
    }
    unlisted = sorted(public - set(exported))
    assert not unlisted, (
        f"{package} has public names not in __all__: {unlisted}; add them to __all__ in"
        f" {package.replace('.', '/')}/__init__.py, or import them under a private name"
    )


def test_implementation_modules_are_private() -> None:
    # A module is private when its own name, or a package it is in, starts with an underscore.
    public = [
        name
        for name, _, is_package in _modules()
        if not is_package
        and not any(part.startswith("_") for part in name.split(".")[1:])
        and name not in PUBLIC_MODULES
    ]
    assert not public, (
        f"implementation modules must be private (_name.py) and their API exported by the package's"
        f" __init__: rename {public}"
    )


def _private_imports(name: str, path: Path, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, imported) for each import of a private module (or private name) of a package that does
    not enclose this module."""
    package = name if is_package else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue  # relative imports stay inside their package
        for target in targets:
            owner = _private_owner(target)
            if owner is not None and package != owner and not package.startswith(owner + "."):
                yield node.lineno, target
                break  # one report per import statement


def _private_owner(target: str) -> str | None:
    """The package owning the first private part of ``target`` (``tracejudge.checks`` for
    ``tracejudge.checks._parts.part_data``), or None when it names nothing private of ours."""
    parts = target.split(".")
    if parts[0] not in SOURCES:
        return None
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_no_module_imports_another_packages_private_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for name, path, is_package in _modules()
        for line, target in _private_imports(name, path, is_package)
    ]
    assert not found, (
        "a module imports a private module (or name) of another package:\n  "
        + "\n  ".join(found)
        + "\nimport it from the package instead (add it to that package's __init__ and __all__ if it"
        " is not exported yet), or move the code into the package that owns it"
    )


def test_the_import_guard_tells_enclosing_from_foreign(tmp_path: Path) -> None:
    source = tmp_path / "_x.py"
    source.write_text(
        "from tracejudge._errors import InputError\n"  # the root package encloses tracejudge.judge
        "from tracejudge.judge._prompt import build\n"  # its own package
        "from tracejudge.checks._parts import part_data\n"  # another package's private module
        "import tracejudge.store._sqlite\n"
        "from tracejudge.checks import _numbers\n"
        "from tracejudge.checks import part_text\n",
        encoding="utf-8",
    )
    found = list(_private_imports("tracejudge.judge._x", source, is_package=False))
    assert found == [
        (3, "tracejudge.checks._parts"),
        (4, "tracejudge.store._sqlite"),
        (5, "tracejudge.checks._numbers"),
    ]
    # Outside the tracejudge package (the collectors distribution) the root's private modules are foreign.
    outside = [t for _, t in _private_imports("tracejudge_collectors.otel._x", source, is_package=False)]
    assert outside[0] == "tracejudge._errors"


def _typed_imports(path: Path) -> dict[str, str]:
    """{name: module} of the imports under ``if TYPE_CHECKING:`` at the top of a module (how a package
    exporting names imported on first use shows them to the type checker)."""
    typed: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    typed.update({alias.asname or alias.name: stmt.module for alias in stmt.names})
    return typed


LAZY_PACKAGES = sorted(name for name, path, is_package in _modules() if is_package and _typed_imports(path))

# Run in a fresh interpreter, so that no other test has imported (and so set) a lazy name yet.
_LAZY_PROBE = """
import importlib, json, sys
package = importlib.import_module(sys.argv[1])
eager = set(vars(package))
listed = sorted(set(dir(package)) - eager)
exported = list(package.__all__)
typed = json.loads(sys.argv[2])
resolved = {
    name: getattr(package, name) is getattr(importlib.import_module(module), name)
    for name, module in typed.items()
}
print(json.dumps({"eager": sorted(eager), "listed": listed, "all": exported, "resolved": resolved}))
"""


def test_lazy_packages_are_found() -> None:
    # The packages that import their exports on first use; a fifth is fine, none would be a broken probe.
    assert {"tracejudge.schema", "tracejudge.write", "tracejudge.report", "tracejudge.cli"} <= set(
        LAZY_PACKAGES
    )


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_exports_agree(package: str) -> None:
    """A package's names imported on first use stand in three lists (``__all__``, which mypy needs
    literal; the names under ``TYPE_CHECKING``; the table its ``__getattr__`` reads): they agree, and
    each name resolves to what the type checker was told."""
    path = next(p for name, p, is_package in _modules() if name == package and is_package)
    typed = _typed_imports(path)
    probe = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE, package, json.dumps(typed)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert probe.returncode == 0, f"{package}: a name imported on first use does not resolve:\n{probe.stderr}"
    found = json.loads(probe.stdout)
    where = f"{package.replace('.', '/')}/__init__.py"
    exported, eager = set(found["all"]), set(found["eager"])
    wrong = sorted(name for name, same in found["resolved"].items() if not same)
    assert not wrong, f"{where}: {wrong} resolve to other objects than the TYPE_CHECKING imports name"
    unlisted = sorted(set(typed) - exported)
    assert not unlisted, f"{where}: {unlisted} are imported under TYPE_CHECKING but not in __all__"
    untyped = sorted(exported - eager - set(typed))
    assert not untyped, f"{where}: __all__ names {untyped}, imported on first use but not under TYPE_CHECKING"
    eagerly = sorted(set(typed) & eager)
    assert not eagerly, f"{where}: {eagerly} are imported under TYPE_CHECKING but already on import"
    # A package using tracejudge._lazy lists its table in dir(): the table names exactly these.
    if found["listed"]:
        assert set(found["listed"]) == set(typed), (
            f"{where}: the lazy table and the TYPE_CHECKING imports differ:"
            f" only in the table {sorted(set(found['listed']) - set(typed))},"
            f" only under TYPE_CHECKING {sorted(set(typed) - set(found['listed']))}"
        )


def _imports_from(module: str) -> Iterator[tuple[str, int, str]]:
    """(importing file, line, name) for each name a module of ours imports from ``module`` by name."""
    for _, path, _ in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == module:
                for alias in node.names:
                    yield str(path.relative_to(ROOT)), node.lineno, alias.name


# Private modules whose ``__all__`` is their interface to the rest of their package: the names the package
# re-exports and the names its other modules import. (Most private modules still have none: each added
# here is held to it.)
INTERFACES = ["tracejudge.runs._run", "tracejudge.runs._shared", "tracejudge.runs._command"]


@pytest.mark.parametrize("module", INTERFACES)
def test_a_private_modules_all_is_what_its_package_imports_from_it(module: str) -> None:
    imported = importlib.import_module(module)
    exported = getattr(imported, "__all__", None)
    path = module.replace(".", "/") + ".py"
    assert exported is not None, f"{path}: add __all__ listing what its package imports from it"
    missing = [name for name in exported if not hasattr(imported, name)]
    assert not missing, f"{path}: __all__ names {missing}, which it does not define"
    unlisted = sorted(
        f"{where}:{line} imports {name}"
        for where, line, name in _imports_from(module)
        if name not in exported
    )
    assert not unlisted, (
        f"{path}: names imported from it are not in its __all__:\n  "
        + "\n  ".join(unlisted)
        + "\nadd them to __all__, or keep them private (a leading underscore) and do not import them"
    )
