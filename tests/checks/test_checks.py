"""Hard checks: each type on task records built directly."""

from __future__ import annotations

import pytest

from tracejudge.checks import find_numbers, parse_number, run_check, run_checks, task_category
from tracejudge.schema import (
    CHECK_SPEC,
    CheckSpec,
    ContainsCheck,
    Document,
    ManifestEntry,
    ModelCall,
    RetrievalCall,
    TaskRecord,
    ToolCall,
    check_spec,
)


def _task(**kw: object) -> TaskRecord:
    base: dict[str, object] = {"trace_id": "a" * 32, "input": "How much do I owe?", "final_answer": ""}
    base.update(kw)
    return TaskRecord.model_validate(base)


def _check(**kw: object) -> CheckSpec:
    return CHECK_SPEC.validate_python({"name": "c", **kw})


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1,234.56", 1234.56),
        ("1.234,56", 1234.56),
        ("30,000", 30000.0),
        ("12,5", 12.5),
        ("1 234,5", 1234.5),
        ("0,500", 0.5),
        ("-7", -7.0),
    ],
)
def test_parse_number_formats(raw: str, value: float) -> None:
    assert parse_number(raw) == pytest.approx(value)


def test_find_numbers_units_and_scale() -> None:
    found = find_numbers("Total $1,234.50, cap 30,000 RMB, budget €2.5k and 15%.")
    assert [(n.value, n.unit) for n in found] == [
        (1234.5, "USD"),
        (30000.0, "CNY"),
        (2500.0, "EUR"),
        (15.0, "%"),
    ]


def test_contains_and_not_contains_normalize_case_and_whitespace() -> None:
    task = _task(final_answer="Your order of  Margherita\nPizza is confirmed.")
    assert run_check(_check(type="contains", value="margherita pizza"), task).verdict == "pass"
    assert run_check(_check(type="contains", value=["pizza", "salad"]), task).verdict == "fail"
    assert run_check(_check(type="not_contains", value="refund"), task).verdict == "pass"
    assert run_check(_check(type="not_contains", value="CONFIRMED"), task).verdict == "fail"


def test_missing_target_is_indeterminate_not_pass() -> None:
    task = _task(final_answer=None)
    result = run_check(_check(type="not_contains", value="x"), task)
    assert result.verdict == "indeterminate"


def test_regex() -> None:
    task = _task(final_answer="Order #A-1234 placed")
    assert run_check(_check(type="regex", pattern=r"#A-\d{4}"), task).verdict == "pass"
    assert run_check(_check(type="regex", pattern=r"#B-\d{4}"), task).verdict == "fail"


def test_number_against_expected_with_units_and_formats() -> None:
    task = _task(final_answer="Your total is $1,234.50 and your change is $5.50.")
    spec = _check(type="number", expected=1234.5, unit="USD", near="total")
    assert run_check(spec, task).verdict == "pass"
    wrong = _check(type="number", expected=1200, unit="$", near="total")
    assert run_check(wrong, task).verdict == "fail"
    change = _check(type="number", expected=5.5, near="change")
    assert run_check(change, task).verdict == "pass"


def test_number_wrong_unit_is_not_accepted() -> None:
    task = _task(final_answer="That is 30,000 RMB.")
    assert run_check(_check(type="number", expected=30000, unit="USD"), task).verdict == "fail"
    assert run_check(_check(type="number", expected=30000, unit="CNY"), task).verdict == "pass"


def test_number_reference_from_tool_result() -> None:
    calls = (ToolCall(span_id="t1", name="compute_bill", arguments={"items": 2}, result={"total": 23.5}),)
    ok = _task(final_answer="That comes to $23.50.", tool_calls=calls)
    bad = _task(final_answer="That comes to $25.00.", tool_calls=calls)
    spec = _check(type="number", expected_from={"tool": "compute_bill", "path": "result.total"}, unit="USD")
    assert run_check(spec, ok).verdict == "pass"
    assert run_check(spec, bad).verdict == "fail"
    # No recorded tool call: no trusted reference, so no verdict.
    assert run_check(spec, _task(final_answer="$23.50")).verdict == "indeterminate"


def test_number_comparison_ops() -> None:
    task = _task(final_answer="Prepayment: 50,000 RMB")
    assert (
        run_check(_check(type="number", expected=30000, op="le", near="prepayment"), task).verdict == "fail"
    )
    assert (
        run_check(_check(type="number", expected=30000, op="gt", near="prepayment"), task).verdict == "pass"
    )


def test_cites_version() -> None:
    task = _task(final_answer="Per C-17/attachment v2, the cap is 30,000.")
    assert run_check(_check(type="cites", doc_id="C-17/attachment", version="v2"), task).verdict == "pass"
    assert run_check(_check(type="cites", doc_id="C-17/attachment", version="v1"), task).verdict == "fail"
    assert run_check(_check(type="cites", doc_id="C-18"), task).verdict == "fail"
    at = _task(final_answer="See C-17/attachment@v2.")
    assert run_check(_check(type="cites", doc_id="C-17/attachment", version="v2"), at).verdict == "pass"
    # v2 must not match inside v21.
    v21 = _task(final_answer="See C-17/attachment v21.")
    assert run_check(_check(type="cites", doc_id="C-17/attachment", version="v2"), v21).verdict == "fail"


def test_tool_called_with_argument_conditions() -> None:
    calls = (
        ToolCall(span_id="s1", name="submit_payment", arguments={"amount": "50,000", "currency": "CNY"}),
        ToolCall(span_id="s2", name="handoff", arguments={"reason": "refund request", "queue": "human"}),
    )
    task = _task(tool_calls=calls)
    assert run_check(_check(type="tool_called", tool="handoff"), task).verdict == "pass"
    assert (
        run_check(_check(type="tool_called", tool="handoff", arguments={"queue": "bot"}), task).verdict
        == "fail"
    )
    over = _check(type="tool_not_called", tool="submit_payment", arguments={"amount": {"$gt": 30000}})
    result = run_check(over, task)
    assert result.verdict == "fail"
    assert result.evidence == ("s1",)
    under = _check(type="tool_not_called", tool="submit_payment", arguments={"amount": {"$gt": 60000}})
    assert run_check(under, task).verdict == "pass"
    regex = _check(type="tool_called", tool="handoff", arguments={"reason": {"$regex": "refund"}})
    assert run_check(regex, task).verdict == "pass"


def test_json_schema() -> None:
    schema = {"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}}
    spec = CHECK_SPEC.validate_python({"name": "j", "type": "json_schema", "schema": schema})
    assert run_check(spec, _task(final_answer='{"total": 3.5}')).verdict == "pass"
    bad = run_check(spec, _task(final_answer='{"total": "3.5"}'))
    assert bad.verdict == "fail"
    assert "total" in bad.detail
    assert run_check(spec, _task(final_answer="not json")).verdict == "fail"


def test_length() -> None:
    task = _task(final_answer="one two three four")
    assert run_check(_check(type="length", max=3, count="words"), task).verdict == "fail"
    assert run_check(_check(type="length", min=3, max=30), task).verdict == "pass"


def _retrieval(principal: str | None, *docs: tuple[str, str]) -> RetrievalCall:
    return RetrievalCall(
        span_id="r1",
        principal=principal,
        documents=tuple(Document(doc_id=d, version=v, content="...") for d, v in docs),
    )


MANIFEST = [
    ManifestEntry(doc_id="menu", version="v3", acl=None),
    ManifestEntry(doc_id="payroll", version="v1", acl=("finance",)),
    ManifestEntry(doc_id="C-17/attachment", version="v2", acl=("procurement", "finance")),
]


def test_within_permissions_fails_on_unauthorized_read_even_with_right_answer() -> None:
    task = _task(
        final_answer="The correct answer.",
        retrievals=(_retrieval("support", ("menu", "v3"), ("payroll", "v1")),),
    )
    result = run_check(_check(type="within_permissions"), task, manifest=MANIFEST)
    assert result.verdict == "fail"
    assert "payroll@v1" in result.detail
    assert result.evidence == ("r1",)


def test_within_permissions_pass_and_indeterminate() -> None:
    ok = _task(retrievals=(_retrieval("procurement", ("menu", "v3"), ("C-17/attachment", "v2")),))
    assert run_check(_check(type="within_permissions"), ok, manifest=MANIFEST).verdict == "pass"
    no_manifest = run_check(_check(type="within_permissions"), ok, manifest=None)
    assert no_manifest.verdict == "indeterminate"
    no_principal = _task(retrievals=(_retrieval(None, ("payroll", "v1")),))
    assert run_check(_check(type="within_permissions"), no_principal, manifest=MANIFEST).verdict == (
        "indeterminate"
    )
    fallback = _check(type="within_permissions", principal="finance")
    assert run_check(fallback, no_principal, manifest=MANIFEST).verdict == "pass"
    unknown = _task(retrievals=(_retrieval("finance", ("secret-doc", "v9")),))
    assert run_check(_check(type="within_permissions"), unknown, manifest=MANIFEST).verdict == "indeterminate"


def test_checks_by_category_and_targets() -> None:
    task = _task(
        final_answer="Hello!",
        metadata={"category": "greeting"},
        model_calls=(ModelCall(span_id="m1", input_text="SYSTEM: be kind", input_recorded=True),),
    )
    specs = [
        _check(type="contains", value="hello"),
        ContainsCheck(name="pay", type="contains", value="total", categories=("payment",)),
        ContainsCheck(name="sys", type="contains", target="model_input", value="be kind"),
    ]
    results = run_checks(specs, task, category=task_category(task))
    assert set(results) == {"c", "sys"}
    assert results["sys"].verdict == "pass"


def test_task_category_from_tags() -> None:
    assert task_category(_task(metadata={"tags": ["prod", "category:payment"]})) == "payment"
    assert task_category(_task()) == "uncategorized"


def test_check_spec_validation_names_missing_field() -> None:
    with pytest.raises(ValueError, match="needs `value`"):
        check_spec(name="x", type="contains")
    with pytest.raises(ValueError, match="expected"):
        check_spec(name="x", type="number")
