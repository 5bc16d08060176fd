"""A package's exports imported on first use (PEP 562), so that a command pays only for what it uses.

A package lists where each export lives in one table and imports the same names under
``TYPE_CHECKING`` for the type checker; ``tests/test_packages.py`` holds the two to each other.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names are exported by the modules
    ``where`` maps to them (``{"tracejudge.write._langfuse": ("LangfuseWriter", ...)}``). A name is
    imported when first asked for and kept in the package, so later lookups are ordinary ones."""
    module_of = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | module_of.keys())

    return __getattr__, __dir__
