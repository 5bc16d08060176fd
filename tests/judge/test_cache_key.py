"""The reply cache's key and the prompt hash are the bytes they were: cached replies and series stay found.

cache_key writes its JSON field by field around the messages' canonical JSON (written once per item and
shared with messages_hash); the keys pinned here were computed by b97278c's cache_key, which dumped the
whole object."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracejudge.judge import cache_key, messages_hash, resolved_base_url
from tracejudge.judge._prompt import messages_canon
from tracejudge.schema import JudgeConfig

MESSAGES = [
    {"role": "system", "content": 'Judge the answer. «Prépaiement» ≤ 30 000 RMB\n"quoted" <x>'},
    {"content": "q ✓", "role": "user"},
]
CONFIG = JudgeConfig(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", temperature=0.2, max_tokens=900)


def _whole(config: JudgeConfig, messages: list[dict[str, str]], repeat: int) -> str:
    """cache_key as it was written before: one dump of the whole object."""
    canon = json.dumps(
        {
            "model": config.model,
            "base_url": resolved_base_url(config),
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "response_format": config.response_format,
            "messages": list(messages),
            "repeat": repeat,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canon.encode()).hexdigest()


def test_pinned_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert (
        cache_key(CONFIG, MESSAGES, 0) == "e2a58987636ed81d4f2a9042a07ae843591a4d620effc51e0c20a0b11ec081ec"
    )
    assert (
        cache_key(CONFIG, MESSAGES, 2) == "ceba36d6a7649eb3fa5e25975f26538234324ab1da42e61648f063c159855bc4"
    )
    assert messages_hash(MESSAGES) == "00089eef5dcfb4fe95a3a691c981439bab268d738c9619f37976a4283cff829c"
    canon = messages_canon(MESSAGES)
    assert cache_key(CONFIG, MESSAGES, 0, canon=canon) == cache_key(CONFIG, MESSAGES, 0)
    assert messages_hash(MESSAGES, canon=canon) == messages_hash(MESSAGES)


_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)


@given(
    st.lists(st.dictionaries(st.sampled_from(["role", "content", "name"]), _TEXT, min_size=1), max_size=3),
    st.fixed_dictionaries(
        {
            "model": _TEXT.filter(bool),
            "temperature": st.floats(0, 2),
            "base_url": st.none() | _TEXT,
            "max_tokens": st.none() | st.integers(1, 10**6),
            "response_format": st.sampled_from(["auto", "json_schema", "json_object", "none"]),
        }
    ),
    st.integers(0, 20),
)
def test_written_field_by_field_as_the_whole_dump(
    messages: list[dict[str, str]], fields: dict[str, Any], repeat: int
) -> None:
    config = JudgeConfig(**fields)
    assert cache_key(config, messages, repeat) == _whole(config, messages, repeat)
    assert cache_key(config, messages, repeat, canon=messages_canon(messages)) == _whole(
        config, messages, repeat
    )
