"""Rubric files: validated on load, errors naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge import InputError
from tracejudge.judge import load_rubric, parse_rubric, rubric_hash

GOOD = """\
name: answer-correctness
version: 3
judge:
  model: gpt-4.1-mini
  temperature: 0
judged: [input, context, output]
criteria:
  - name: correctness
    description: "The answer is factually right given the context."
    threshold: 7
  - name: relevance
    description: "The answer addresses what was asked."
    threshold: 7
checks:
  - {name: states_cap, type: contains, target: output, value: "350"}
  - {name: no_submit, type: tool_not_called, tool: submit_payment}
repeat: 1
"""


def test_design_example_loads(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(GOOD)
    rubric = load_rubric(p)
    assert rubric.name == "answer-correctness"
    assert rubric.version == 3
    assert [c.name for c in rubric.criteria] == ["correctness", "relevance"]
    assert rubric.judge is not None
    assert rubric.judge.model == "gpt-4.1-mini"
    assert rubric.checks[1].tool == "submit_payment"


def test_threshold_out_of_scale_names_its_line() -> None:
    bad = GOOD.replace("    threshold: 7\n  - name: relevance", "    threshold: 70\n  - name: relevance")
    with pytest.raises(InputError) as exc:
        parse_rubric(bad, source="r.yaml")
    assert "r.yaml:10:" in str(exc.value)
    assert "criteria.0.threshold" in str(exc.value)


def test_unknown_key_and_check_field_name_lines() -> None:
    bad = GOOD.replace(
        "  - {name: no_submit, type: tool_not_called, tool: submit_payment}", "  - {name: x, type: regex}"
    )
    with pytest.raises(InputError) as exc:
        parse_rubric(bad + "surprise: 1\n", source="r.yaml")
    text = str(exc.value)
    assert "r.yaml:16:" in text
    assert "needs `pattern`" in text
    assert "r.yaml:18:" in text
    assert "surprise" in text


def test_broken_yaml_names_line() -> None:
    with pytest.raises(InputError) as exc:
        parse_rubric("name: x\nversion: 1\ncriteria: [\n  {name: a,\n", source="b.yaml")
    assert "b.yaml:" in str(exc.value)
    assert "broken YAML" in str(exc.value)


def test_judge_needed_for_undecided_criteria() -> None:
    text = "name: x\nversion: 1\ncriteria:\n  - {name: a, description: d}\n"
    with pytest.raises(InputError, match="judge"):
        parse_rubric(text)


def test_check_may_decide_a_criterion_without_judge() -> None:
    text = (
        "name: x\nversion: 1\ncriteria:\n  - {name: accuracy, description: d}\n"
        "checks:\n  - {name: total, type: number, expected: 3, criterion: accuracy}\n"
    )
    rubric = parse_rubric(text)
    assert rubric.judge is None
    with pytest.raises(InputError, match="unknown criterion"):
        parse_rubric(text.replace("criterion: accuracy", "criterion: nope"))


def test_invalid_json_schema_in_check_is_an_input_error() -> None:
    text = "name: x\nversion: 1\nchecks:\n  - name: shape\n    type: json_schema\n    schema: {type: 12}\n"
    with pytest.raises(InputError, match=r"r\.yaml:6"):
        parse_rubric(text, source="r.yaml")


def test_hash_changes_with_content() -> None:
    a = parse_rubric(GOOD)
    b = parse_rubric(GOOD.replace("version: 3", "version: 4"))
    assert rubric_hash(a) != rubric_hash(b)
    assert rubric_hash(a) == rubric_hash(parse_rubric(GOOD))


@pytest.mark.parametrize(
    ("tail", "where"),
    [
        (
            "criteria:\n  - {name: a, description: d}\n  - {name: a, description: e}\n",
            "r.yaml:6: criteria.1.name",
        ),
        ("criteria:\n  - {name: a, description: d}\nrepeat: 0\n", "r.yaml:6: repeat"),
        ("overall_threshold: 11\ncriteria:\n  - {name: a, description: d}\n", "r.yaml:4: overall_threshold"),
        (
            "criteria:\n  - {name: a, description: d}\nchecks:\n  - {name: c, type: contains, value: x}\n"
            "  - {name: d, type: contains, value: x, criterion: zz}\n",
            "r.yaml:8: checks.1.criterion",
        ),
        (
            "criteria:\n  - {name: a, description: d}\nchecks:\n  - {name: c, type: contains, value: x}\n"
            "  - {name: c, type: contains, value: y}\n",
            "r.yaml:8: checks.1.name",
        ),
    ],
)
def test_rules_about_the_whole_rubric_name_the_offending_line(tail: str, where: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_rubric("name: x\nversion: 1\njudge: {model: m}\n" + tail, source="r.yaml")
    assert where in str(exc.value)
