"""Importing a package whose ``__init__`` only re-exports its submodules' names without importing them
all: each name is imported from its submodule when first asked for.

``import openai`` runs ``openai.types``'s ``__init__``, which imports every one of its ~470 type
modules (and ``openai.lib`` pulls in all of ``openai.types.responses``): about half of the CPU that
importing openai costs, none of which a judge call uses (it posts a dict and reads the body as bytes).
That CPU came before the run's first judge call. :func:`reexports_on_use` imports such packages
lazily: a package under one of the given prefixes whose ``__init__.py`` holds nothing but
``from .submodule import name as name`` statements (a docstring and ``from __future__`` besides) gets
a module whose names resolve, on first use, to what the eager ``__init__`` would have bound; any other
package is imported as usual. Names, submodules and values are the ones the eager import gives.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["Reexports", "reexports", "reexports_on_use"]


class Reexports(NamedTuple):
    """What a re-exporting ``__init__`` binds."""

    names: dict[str, tuple[str, str]]
    """``{name: (submodule, its name there)}``."""
    future: tuple[tuple[str, str], ...] = ()
    """``(name, feature)`` of its ``from __future__`` imports (bound too, as any import binds them)."""


def reexports(source: bytes) -> Reexports | None:
    """What an ``__init__``'s source binds when it only re-exports names of its own submodules; None
    when it does anything else (a star, an import from outside the package, any other statement), or
    binds a name that is also one of those submodules (the eager import binds the name and the
    submodule to it in an order this does not keep)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found: dict[str, tuple[str, str]] = {}
    future: list[tuple[str, str]] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom) and node.module == "__future__" and not node.level:
            future += [(a.asname or a.name, a.name) for a in node.names]
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            found[alias.asname or alias.name] = (node.module, alias.name)
    if _submodules(found) & found.keys():
        return None
    return Reexports(found, tuple(future))


def _submodules(names: Mapping[str, tuple[str, str]]) -> set[str]:
    """The package's submodules that importing these names loads (so binds in the package)."""
    return {module.split(".")[0] for module, _ in names.values()}


class _OnUse(types.ModuleType):
    """A package whose re-exported names are imported when first looked up, then kept."""

    def __getattr__(self, name: str) -> Any:
        # Only called for a name the module does not hold yet.
        names: Mapping[str, tuple[str, str]] = self.__dict__.get("_reexports", {})
        where = names.get(name)
        if where is not None:
            value = getattr(importlib.import_module(f"{self.__name__}.{where[0]}"), where[1])
        elif not name.startswith("__") and (
            name in _submodules(names) or importlib.util.find_spec(f"{self.__name__}.{name}") is not None
        ):
            # A submodule: those the eager import loads (its own, and the ones they import) are bound.
            value = importlib.import_module(f"{self.__name__}.{name}")
        elif name == "__all__":
            # `from package import *`: every public name the eager import binds, not only those looked
            # up so far (without __all__ a star import takes what the module holds). Not kept.
            return [n for n in self.__dir__() if not n.startswith("_")]
        else:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        names = self.__dict__.get("_reexports", {})
        return sorted(set(self.__dict__) - {"_reexports"} | names.keys() | _submodules(names))


class _Loader(importlib.abc.Loader):
    """Makes an :class:`_OnUse` package instead of running its ``__init__``; anything else asked of
    the loader (resources, source) is the original loader's."""

    def __init__(self, original: importlib.abc.Loader, bound: Reexports) -> None:
        self._original = original
        self._bound = bound

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _OnUse(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["_reexports"] = self._bound.names
        for name, feature in self._bound.future:
            module.__dict__[name] = getattr(__future__, feature)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, prefixes: Sequence[str]) -> None:
        self._prefixes = tuple(prefixes)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,  # noqa: ARG002 (the finder protocol's signature)
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in self._prefixes):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = spec.origin if spec is not None else None
        if spec is None or spec.loader is None or not origin or not origin.endswith("__init__.py"):
            return spec  # a plain module (or none): imported as usual
        try:
            with open(origin, "rb") as f:
                names = reexports(f.read())
        except OSError:
            names = None
        if names is not None:
            spec.loader = _Loader(spec.loader, names)
        return spec


@contextlib.contextmanager
def reexports_on_use(*prefixes: str) -> Iterator[None]:
    """While inside, the packages under ``prefixes`` (``"openai.types"``: it and its subpackages) that
    only re-export their submodules' names are imported with those names imported on first use. Once
    imported that way a package stays so; what is imported after the block is imported as usual."""
    finder = _Finder(prefixes)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
