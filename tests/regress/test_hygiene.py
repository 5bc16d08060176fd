"""Each hygiene rule, with a suite crafted to break it; a clean suite and the example's suite pass."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tracejudge.regress import RUNS_DIR, check_suite_path, load_suite
from tracejudge.schema import SampleRunResult, SuiteRun

from .conftest import balanced, sample, success, write_suite

EXAMPLE_SUITE = Path(__file__).resolve().parents[2] / "examples" / "procurement" / "suite"


def _rules(folder: Path) -> list[str]:
    return [v.rule for v in check_suite_path(folder).violations]


def test_a_clean_suite_has_no_violations(tmp_path: Path) -> None:
    report = check_suite_path(balanced(tmp_path / "s"))
    assert report.ok, report.violations
    assert report.kinds == {"failure": 2, "success": 2}
    assert report.groups == {"basis-C-17": ["rs-0001", "rs-0002"], "basis-POL-4": ["rs-0003", "rs-0004"]}


def test_the_example_suite_is_clean() -> None:
    report = check_suite_path(EXAMPLE_SUITE)
    assert report.ok, report.violations
    assert report.samples == 11
    assert set(report.kinds) == {"failure", "success", "reasonable_rejection", "boundary"}


def test_balance_failures_only_or_too_many_failures(tmp_path: Path) -> None:
    only = write_suite(tmp_path / "a", [sample("rs-0001"), sample("rs-0002")])
    assert _rules(only).count("balance") == 2  # no success, and 100% failures
    many = write_suite(tmp_path / "b", [sample(f"rs-000{i}") for i in range(1, 5)] + [success("rs-0009")])
    report = check_suite_path(many)
    assert [v.rule for v in report.violations] == ["balance"]
    assert "4 of 5 samples are failures" in report.violations[0].message


def test_a_group_straddling_the_splits(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    write_suite(folder, [sample("rs-0002", split="debug")])
    report = check_suite_path(folder)
    assert [v.rule for v in report.violations] == ["split_straddle"]
    assert set(report.violations[0].samples) == {"rs-0001", "rs-0002"}


def test_near_duplicates_in_different_groups(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    variant = sample("rs-0005", group="contract-17-variant")
    variant["input"]["messages"][0]["content"] = (
        "What is the prepayment cap for Huadong Steel today? (rs-0001)"
    )
    write_suite(folder, [variant])
    report = check_suite_path(folder)
    assert [v.rule for v in report.violations] == ["near_duplicate"]
    assert set(report.violations[0].samples) == {"rs-0001", "rs-0005"}


def test_leakage_of_the_expected_value_or_clause_into_the_input(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    leaky = sample("rs-0002")
    leaky["input"]["messages"][0]["content"] = (
        "The cap is 30,000 RMB, right? What is the cap for Huadong Steel?"
    )
    clause = sample("rs-0001")
    clause["input"]["messages"].append(
        {"role": "user", "content": "Hint: prepayment shall not exceed 30,000 rmb. So what is the cap?"}
    )
    write_suite(folder, [leaky, clause])
    report = check_suite_path(folder)
    leaks = {v.samples[0]: v.message for v in report.violations if v.rule == "leakage"}
    assert set(leaks) == {"rs-0001", "rs-0002"}
    assert "prepayment_cap_rmb=30000" in leaks["rs-0002"]
    assert "the clause of C-17/attachment" in leaks["rs-0001"]


def _debug_run(folder: Path, sample_id: str) -> None:
    run = SuiteRun(
        run_id="rr-debug",
        suite=folder.name,
        suite_hash="x",
        created_at=datetime.now(UTC),
        target="agent:fn",
        retrieval="include",
        purpose="debug",
        samples=(
            SampleRunResult(
                sample_id=sample_id, sample_hash="h", kind="failure", split="acceptance", outcome="fail"
            ),
        ),
    )
    (folder / RUNS_DIR).mkdir(exist_ok=True)
    (folder / RUNS_DIR / "rr-debug.json").write_text(run.model_dump_json(), encoding="utf-8")


def test_acceptance_samples_used_while_debugging_must_be_retired_and_replaced(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    _debug_run(folder, "rs-0001")
    report = check_suite_path(folder)
    assert [v.rule for v in report.violations] == ["debug_used"]
    assert "retired" in report.violations[0].message
    # Retired but not replaced is still a violation.
    write_suite(folder, [sample("rs-0001", status="retired")])
    report = check_suite_path(folder)
    assert [v.rule for v in report.violations] == ["debug_used"]
    assert "nothing replaces it" in report.violations[0].message
    # Replaced: clean.
    fresh = sample("rs-0007", replaces="rs-0001")
    fresh["input"]["messages"][0]["content"] = "Can Huadong Steel be prepaid more than the cap on order 12?"
    write_suite(folder, [fresh])
    assert check_suite_path(folder).ok
    assert "rs-0001" not in load_suite(folder).active[0].sample.id


def test_samples_whose_materials_are_missing(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    bare = sample("rs-0002")
    bare["environment"]["materials"] = bare["environment"]["materials"][:1]  # v2 gone
    write_suite(folder, [bare])
    report = check_suite_path(folder)
    assert [v.rule for v in report.violations] == ["missing_material"]
    assert "C-17/attachment@v2" in report.violations[0].message
    assert "(fixed retrieval)" in report.violations[0].message


def test_exact_duplicates(tmp_path: Path) -> None:
    folder = balanced(tmp_path / "s")
    twin = sample("rs-0008")
    twin["input"] = sample("rs-0001")["input"]
    write_suite(folder, [twin])
    rules = _rules(folder)
    assert "duplicate" in rules
    assert "near_duplicate" not in rules  # same group: a duplicate, not a misplaced variant
