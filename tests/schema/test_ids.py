"""Ids and versions are text however YAML reads them: one ``IdText`` type on every such field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from tracejudge.schema import FixedDocument, ManifestEntry, Material, SampleMaterial, SampleSource, Ticket

CASES: list[tuple[type[BaseModel], dict[str, Any], tuple[str, ...]]] = [
    (Material, {"doc_id": 17, "version": 2}, ("doc_id", "version")),
    (Ticket, {"ticket": 311, "trace_id": 12, "required": [{"doc_id": "C-17"}]}, ("ticket", "trace_id")),
    (ManifestEntry, {"doc_id": 17, "version": 2.5}, ("doc_id", "version")),
    (SampleSource, {"trace_id": 12, "ticket": 311}, ("trace_id", "ticket")),
    (SampleMaterial, {"doc_id": 17, "version": 2, "content": "x"}, ("doc_id", "version")),
    (FixedDocument, {"doc_id": 17, "version": 2}, ("doc_id", "version")),
]


@pytest.mark.parametrize(("model", "data", "fields"), CASES, ids=[c[0].__name__ for c in CASES])
def test_numbers_become_the_text_written(
    model: type[BaseModel], data: dict[str, Any], fields: tuple[str, ...]
) -> None:
    record = model.model_validate(data)
    assert [getattr(record, f) for f in fields] == [str(data[f]) for f in fields]


def test_a_boolean_is_not_an_id() -> None:
    with pytest.raises(ValueError, match="doc_id"):
        Material.model_validate({"doc_id": True})
