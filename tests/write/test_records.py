"""A score's value checked against its data type, once for every writer (tracejudge.write._records)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracejudge.write import ScoreRecord, annotation_for, score_body
from tracejudge.write._records import checked_value

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def score(value: float | bool | str, data_type: str) -> ScoreRecord:
    return ScoreRecord.model_validate(
        {"trace_id": "a" * 32, "name": "s", "value": value, "data_type": data_type}
    )


@pytest.mark.parametrize(
    ("value", "data_type", "expected"),
    [
        (7, "NUMERIC", 7.0),
        (2.5, "NUMERIC", 2.5),
        (True, "BOOLEAN", True),
        (0, "BOOLEAN", False),
        (1.0, "BOOLEAN", True),
        ("pass", "CATEGORICAL", "pass"),
    ],
)
def test_a_value_that_fits_its_type_comes_back_as_the_type_carries_it(value, data_type, expected):
    got = checked_value(score(value, data_type))
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "data_type", "needs"),
    [
        (True, "NUMERIC", "needs a number"),
        ("high", "NUMERIC", "needs a number"),
        (2, "BOOLEAN", "needs True/False"),
        ("true", "BOOLEAN", "needs True/False"),
        ("", "CATEGORICAL", "needs a non-empty label"),
        (3.0, "CATEGORICAL", "needs a non-empty label"),
    ],
)
def test_a_value_that_does_not_fit_is_refused_in_the_same_words_by_every_writer(value, data_type, needs):
    record = score(value, data_type)
    message = f"{data_type} score 's' {needs}, got {record.value!r}"
    for write in (checked_value, lambda s: score_body(s, timestamp=T0), annotation_for):
        with pytest.raises(ValueError) as raised:
            write(record)
        assert str(raised.value) == message


def test_each_writer_sends_a_boolean_its_own_way():
    yes = score(True, "BOOLEAN")
    assert score_body(yes, timestamp=T0)["value"] == 1
    assert type(score_body(yes, timestamp=T0)["value"]) is int
    assert annotation_for(yes)[1]["result"] == {"score": 1.0, "label": "true"}
