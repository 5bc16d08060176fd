"""Checks by registry: every check type has its function and its model; a check type nobody wired up
is an error, not a silent permissions check."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from tracejudge.checks import CHECKS, run_check
from tracejudge.checks import _checks as checks_module
from tracejudge.judge import load_rubric, rubric_hash
from tracejudge.schema import CHECK_SPEC, LEGACY_CHECK_DEFAULTS, CheckSpec, CheckType, TaskRecord, check_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_check_type_has_a_function() -> None:
    types = set(get_args(CheckType))
    unwired = sorted(types - set(CHECKS))
    assert not unwired, (
        f"check types without a function: {unwired}; add one to CHECKS in tracejudge/checks/_checks.py"
    )
    unknown = sorted(set(CHECKS) - types)
    assert not unknown, (
        f"CHECKS has functions for {unknown}, which CheckType (tracejudge/schema/_score.py) lacks"
    )


def test_every_check_type_has_a_model_whose_tag_is_its_type() -> None:
    models = get_args(get_args(CheckSpec)[0])
    tags = [t for m in models for t in get_args(m.model_fields["type"].annotation)]
    unmodelled = sorted(set(get_args(CheckType)) - set(tags))
    assert not unmodelled, (
        f"check types without a model: {unmodelled}; add a <Name>Check(_CheckBase) with"
        " type: Literal[...] to the CheckSpec union in tracejudge/schema/_score.py"
    )
    assert sorted(tags) == sorted(get_args(CheckType)), (
        "a check type has two models, or a model a type CheckType lacks"
    )


def test_a_type_without_a_function_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = check_spec(name="len", type="length", max=5)
    monkeypatch.setattr(checks_module, "CHECKS", {k: v for k, v in CHECKS.items() if k != "length"})
    with pytest.raises(NotImplementedError, match="no function decides 'length' checks"):
        run_check(spec, TaskRecord(trace_id="a" * 32, final_answer="short"))


def test_the_type_picks_the_model_and_refuses_another_types_field() -> None:
    spec = check_spec(name="r", type="regex", pattern="x")
    assert type(spec).__name__ == "RegexCheck"
    with pytest.raises(ValidationError, match="value"):
        check_spec(name="r", type="regex", pattern="x", value="also")
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        CHECK_SPEC.validate_python({"name": "n", "type": "no_such_check"})


def test_a_check_written_with_every_field_still_reads() -> None:
    # Regression samples written before the union carry every check field at its default.
    old = {**LEGACY_CHECK_DEFAULTS, "name": "n", "type": "number", "expected": 30000.0, "target": "output"}
    spec = CHECK_SPEC.validate_python(old)
    assert type(spec).__name__ == "NumberCheck"
    assert spec.model_dump(by_alias=True).keys() < old.keys() | {"criterion", "categories"}


def test_a_rubric_keeps_its_hash() -> None:
    # Calibrations are stored under the rubric's hash: the check models must not change it.
    rubric = load_rubric(EXAMPLES / "restaurant" / "rubric.yaml")
    assert rubric.checks
    assert rubric_hash(rubric) == "3f810dc4439b91cbf932e605cca2f6b84999347f1172ba220608866af5f282ac"
