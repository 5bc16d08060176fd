"""``print_json`` writes with orjson what ``json.dumps(indent=2, default=str)`` wrote: the same text
for every value the two spell alike (non-ASCII escaped for plain data, as it is for records), and
the same data read back for the rest; strings redacted first (a key-shaped one among them)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracejudge import redact_data
from tracejudge.cli import print_json
from tracejudge.schema import JudgeReply

# Text with what each side escapes: quotes, backslashes, control characters, DEL, non-ASCII and
# characters outside the BMP (a surrogate pair when escaped).
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['"q"', "a\\b", "\x00\x1f\x7f", "é", "\u2028", "\U0001f600", "key sk-lf-0a1b2c3d4e5f"]
)
# Floats both spell alike (Python writes 1e-05 where orjson writes 0.00001).
_FLOAT = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f == 0 or 1e-4 <= abs(f) < 1e16)
_SCALAR = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _FLOAT | _TEXT
_DATA = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


def printed(data: Any) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_json(data)
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(_DATA)
def test_plain_data_is_printed_as_json_dumps_printed_it(data: Any) -> None:
    assert printed(data) == json.dumps(redact_data(data), indent=2, default=str) + "\n"


def test_what_orjson_spells_otherwise_reads_back_the_same() -> None:
    data = {"small": 6.6e-05, "big": 2**70, "when": datetime(2026, 3, 1, 9, 30, tzinfo=UTC), "keys": {1: "a"}}
    out = printed(data)
    assert json.loads(out) == json.loads(json.dumps(data, default=str))
    assert json.loads(printed({"nan": math.nan})) == {"nan": None}


def test_a_record_is_printed_with_its_text_as_it_is() -> None:
    reply = JudgeReply(prompt_hash="abc", raw="é \U0001f600", input_tokens=3)
    out = printed(reply)
    assert out == json.dumps(reply.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    assert "é \U0001f600" in out


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_TEXT, _DATA, max_size=3), st.lists(_DATA, max_size=4))
def test_items_rendered_ahead_print_as_the_whole_prints(rest: dict[str, Any], items: list[Any]) -> None:
    # score --json renders each item while the run's calls are out; the text is the same.
    from tracejudge.cli._app import json_element, print_json_elements

    data = {**rest, "items": items}
    elements = [json_element(i, depth=2) for i in items]
    assert all(e is not None for e in elements)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert print_json_elements({**data, "items": []}, "items", [e for e in elements if e is not None])
    assert buf.getvalue() == printed(data)


def test_what_only_the_whole_fallback_writes_is_not_rendered_ahead() -> None:
    from tracejudge.cli._app import json_element, print_json_elements

    assert json_element({"big": 2**70}, depth=2) is None
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert not print_json_elements({"big": 2**70, "items": []}, "items", [])
    assert buf.getvalue() == ""
