"""Reading judge replies: problems are named, scores are never invented."""

from __future__ import annotations

from tracejudge.judge import parse_reply


def test_valid_reply() -> None:
    r = parse_reply('{"criteria": {"a": {"score": 8, "reasoning": "ok"}}, "reasoning": "fine"}', ["a"])
    assert r.error is None
    assert r.scores == {"a": 8.0}
    assert r.reasoning == {"a": "ok"}
    assert r.overall == "fine"


def test_fenced_and_wrapped_json() -> None:
    fenced = '```json\n{"criteria": {"a": {"score": 3, "reasoning": "x"}}}\n```'
    assert parse_reply(fenced, ["a"]).scores == {"a": 3.0}
    wrapped = 'Here you go: {"criteria": {"a": {"score": "6", "reasoning": "x"}}} thanks'
    assert parse_reply(wrapped, ["a"]).scores == {"a": 6.0}


def test_malformed_and_empty() -> None:
    assert parse_reply("the answer is good, 9/10", ["a"]).error == "malformed_json"
    assert parse_reply("", ["a"]).error == "empty_reply"
    assert parse_reply("[1, 2]", ["a"]).error == "malformed_json"
    assert parse_reply('{"scores": {"a": 5}}', ["a"]).error == "malformed_json"


def test_refusal_text() -> None:
    assert parse_reply("I'm sorry, but I can't help with that.", ["a"]).error == "refusal"


def test_out_of_range_missing_and_not_a_number() -> None:
    text = '{"criteria": {"a": {"score": 11}, "b": {"score": true}, "d": {"score": -1}}}'
    r = parse_reply(text, ["a", "b", "c", "d"])
    assert r.scores == {}
    assert r.problems == {
        "a": "out_of_range",
        "b": "not_a_number",
        "c": "missing_criterion",
        "d": "out_of_range",
    }


def test_nan_is_not_a_score() -> None:
    r = parse_reply('{"criteria": {"a": {"score": NaN}}}', ["a"])
    assert r.scores == {}
    assert r.problems == {"a": "not_a_number"}
