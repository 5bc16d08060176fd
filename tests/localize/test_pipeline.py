"""The pipeline is a table: one stage per StageName, in DESIGN 5.5 order, each from its own module."""

from __future__ import annotations

from typing import get_args

from tracejudge.localize import PIPELINE, STAGES
from tracejudge.schema import StageName


def test_one_stage_per_name_in_design_order() -> None:
    assert [s.name for s in PIPELINE] == ["indexed", "retrieved", "in_context", "used_by_model"]
    assert set(STAGES) == set(get_args(StageName))
    assert tuple(s.name for s in PIPELINE) == STAGES


def test_each_stage_checks_in_its_own_module() -> None:
    modules = [s.check.__module__ for s in PIPELINE]
    assert modules == [f"tracejudge.localize._{s.name}" for s in PIPELINE]
    assert [s.fault.__module__ for s in PIPELINE] == modules
