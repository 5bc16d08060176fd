"""Replaying recorded retrieval filters against manifest metadata, in three-valued logic."""

from __future__ import annotations

from typing import Any

import pytest

from tracejudge.localize import evaluate_filter, filter_keys

META = {"region": "CN", "year": 2026, "valid_from": "2026-03-01T00:00:00Z", "tags": ["contract", "finance"]}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({}, True),
        ({"region": "CN"}, True),
        ({"region": "EU"}, False),
        ({"region": "CN", "year": 2025}, False),
        ({"region": {"$eq": "CN"}}, True),
        ({"region": {"$ne": "CN"}}, False),
        ({"region": {"$in": ["EU", "CN"]}}, True),
        ({"region": {"$nin": ["EU", "CN"]}}, False),
        ({"year": {"$gte": 2026}}, True),
        ({"year": {"$gt": 2026}}, False),
        ({"year": {"$lt": "2027"}}, True),  # numeric string compared as a number
        ({"year": {"$gte": 2020, "$lte": 2025}}, False),
        ({"valid_from": {"$lte": "2026-11-18"}}, True),
        ({"valid_from": {"$gt": "2026-03-01T08:00:00+08:00"}}, False),  # the same instant
        ({"valid_from": {"$gt": "2026-03-01T07:00:00+08:00"}}, True),  # ISO instants, offsets honoured
        ({"$and": [{"region": "CN"}, {"year": 2026}]}, True),
        ({"$or": [{"region": "EU"}, {"year": 2026}]}, True),
        ({"$or": [{"region": "EU"}, {"year": 2025}]}, False),
        ({"$not": {"region": "EU"}}, True),
        ({"region": {"$not": {"$eq": "CN"}}}, False),
        ({"tags": "finance"}, True),
        ({"tags": {"$in": ["legal"]}}, False),
        ({"missing_key": "x"}, None),
        ({"$or": [{"missing_key": "x"}, {"region": "CN"}]}, True),
        ({"$and": [{"missing_key": "x"}, {"region": "EU"}]}, False),
        ({"$and": [{"missing_key": "x"}, {"region": "CN"}]}, None),
        ({"region": {"$regex": "C.*"}}, None),
        ({"region": ["CN"]}, None),
        ("region == 'CN'", None),
    ],
)
def test_evaluate(flt: Any, expected: bool | None) -> None:
    assert evaluate_filter(flt, META) is expected


def test_filter_keys() -> None:
    flt = {"$and": [{"region": "CN"}, {"$or": [{"year": {"$gt": 1}}, {"region": "EU"}]}]}
    assert filter_keys(flt) == ["region", "year"]
