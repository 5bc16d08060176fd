"""Where the bundled examples are: inside the installed package, or in the source checkout.

The tree keeps one copy, ``examples/`` at the repository root; the wheel carries it as
``tracejudge/_examples/`` (hatch ``force-include``). Nothing here writes into either folder.
"""

from __future__ import annotations

from pathlib import Path

import tracejudge
from tracejudge._errors import InputError

__all__ = ["EXAMPLES", "bundled_roots", "example_module", "find_example", "is_bundled"]

EXAMPLES = {
    "procurement": "scenarios.yaml",
    "restaurant": "rubric.yaml",
    "calibration": "labels.jsonl",
}
"""Each bundled example and a file that marks its folder."""


def _package_dir() -> Path:
    return Path(tracejudge.__file__).resolve().parent


def bundled_roots() -> list[Path]:
    """Folders holding the bundled examples: the installed copy first, then the checkout's.

    A folder counts only when it holds the procurement example, so an unrelated ``examples/`` beside
    the package (in site-packages, say) is never taken for ours."""
    here = _package_dir()
    out = []
    for root in (here / "_examples", here.parent / "examples"):
        if (root / "procurement" / EXAMPLES["procurement"]).is_file():
            out.append(root)
    return out


def find_example(name: str, explicit: Path | None = None) -> Path:
    """The folder of the bundled example ``name``.

    ``explicit`` (``--examples``) may be the example folder itself or a folder holding it (a
    checkout's ``examples/``). Without it: the installed copy, the checkout's, then
    ``./examples/NAME``."""
    marker = EXAMPLES[name]
    if explicit is not None:
        for folder in (explicit, explicit / name, explicit / "examples" / name):
            if (folder / marker).is_file():
                return folder.resolve()
        raise InputError(
            f"{explicit} is not the {name} example folder (no {marker} in it or in {name}/)",
            hint=f"pass --examples pointing at examples/{name} (or examples/) of a tracejudge checkout",
        )
    candidates = [root / name for root in bundled_roots()] + [Path.cwd() / "examples" / name]
    for folder in candidates:
        if (folder / marker).is_file():
            return folder.resolve()
    raise InputError(
        f"cannot find the bundled {name} example",
        hint="reinstall tracejudge (the wheel ships it), or pass --examples PATH to a checkout's examples/",
    )


def is_bundled(path: Path) -> bool:
    """Whether ``path`` lies inside the bundled examples (installed, the checkout's, or ./examples of a
    checkout): folders tracejudge commands read but never write into."""
    resolved = path.resolve()
    roots = [*bundled_roots(), Path.cwd() / "examples"]
    return any(
        (root / "procurement" / EXAMPLES["procurement"]).is_file() and resolved.is_relative_to(root.resolve())
        for root in roots
    )


def example_module(folder: Path) -> str | None:
    """The importable module name of an example folder (for ``regress run --target``): the installed
    copy is ``tracejudge._examples.NAME``, a checkout's is ``examples.NAME`` from the checkout root
    (the current directory); None when neither applies."""
    resolved = folder.resolve()
    installed = _package_dir() / "_examples"
    if resolved.parent == installed.resolve():
        return f"tracejudge._examples.{resolved.name}"
    if resolved.parent == (Path.cwd() / "examples").resolve():
        return f"examples.{resolved.name}"
    return None
