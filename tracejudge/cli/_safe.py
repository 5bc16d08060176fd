"""The safe terminal writer: every value that comes from a trace (span names, attributes, documents,
answers, backend messages) goes to the terminal through here.

Such a value is data, never instructions to the terminal: rich markup in it (``[/x]`` would crash
rendering, ``[link=…]`` would become a live hyperlink) is escaped, and control characters (``ESC]0;…``
retitles the window, ``ESC[2J`` clears it, ``\\r`` overwrites a line) and bidi overrides (U+202E
reverses what follows) are shown as ``\\x1b`` / ``\\u202e`` instead of being emitted.

Secrets in it are removed here too, before rendering: the consoles redact what they write, but a
table cell wrapped across lines hands them a secret in pieces no pattern recognizes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tracejudge._redact import redact

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["clean", "escape", "safe_text"]

# C0 controls but tab and newline, DEL, C1 controls, and the bidi marks, embeddings, overrides and
# isolates (a value may still carry right-to-left text; it only may not reorder what follows it).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    """``value`` as text with secrets redacted and control characters and bidi controls shown escaped."""
    return _UNSAFE.sub(_shown, redact(str(value)))


def escape(value: object) -> str:
    """``value`` ready to sit inside rich markup: controls shown escaped (:func:`clean`), markup escaped."""
    from rich.markup import escape as escape_markup  # rich on first use: score --json never needs it

    return escape_markup(clean(value))


def safe_text(value: object, style: str = "") -> Text:
    """``value`` as a rich :class:`Text`, which is never read as markup, with controls shown escaped."""
    from rich.text import Text

    return Text(clean(value), style=style)
