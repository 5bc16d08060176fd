"""``probe``: counterfactual sanity checks of checks and judge on one case. A sound scorer fails the
case when a key amount changes (5,000 -> 50,000), when another object's citation is swapped in, and
when the text says "paused" while the tool call shows it submitted; it does not change its verdict
when only the wording changes."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tracejudge._errors import InputError
from tracejudge._inputfile import read_input
from tracejudge._yamlfile import node_line, parse_yaml
from tracejudge.audit._labels import task_from
from tracejudge.judge import Judge, JudgeClient, OpenAIJudgeClient
from tracejudge.runs import score_task
from tracejudge.schema import (
    ItemResult,
    ProbeReport,
    ProbeResult,
    Rubric,
    StoredReport,
    TaskRecord,
    ToolCheck,
)
from tracejudge.store import Store

_AMOUNT = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d{4,}(?:\.\d+)?(?![\w,])")
_REWORDS = (
    ("do not", "don't"),
    ("does not", "doesn't"),
    ("is not", "isn't"),
    ("cannot", "can't"),
    ("it is", "it's"),
    ("I have", "I've"),
    ("you are", "you're"),
    ("will not", "won't"),
    ("There is", "There's"),
)
_HINT = (
    "a case is YAML: id, input, output, optional context, tool_calls and probes (see examples/calibration)"
)
Verdict = Literal["pass", "fail", "indeterminate"]


@dataclass(frozen=True)
class ProbeCase:
    """One case to probe, as read from YAML."""

    id: str
    """Case id."""
    input: str | None
    """What was asked."""
    output: str
    """The answer."""
    context: Any = None
    """Documents the agent had."""
    tool_calls: tuple[dict[str, Any], ...] = ()
    """Tool calls the agent made."""
    probes: dict[str, Any] = field(default_factory=dict)
    """Overrides: ``amount: {from, to}``, ``citation: {from, to}``, ``paused: {text, tool, arguments}``,
    ``reword: TEXT``."""

    def task(
        self, suffix: str, *, output: str | None = None, tool_calls: tuple[dict[str, Any], ...] | None = None
    ) -> TaskRecord:
        return task_from(
            f"{self.id}::{suffix}",
            input=self.input,
            output=self.output if output is None else output,
            context=self.context,
            tool_calls=self.tool_calls if tool_calls is None else tool_calls,
        )


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_optional_mapping(value: Any) -> bool:
    return not value or isinstance(value, dict)


def _is_optional_mapping_list(value: Any) -> bool:
    return not value or (isinstance(value, list) and all(isinstance(t, dict) for t in value))


# What each field of a case must be, in the order they are checked, and the message when it is not.
_CASE_SHAPE: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("output", _is_text, "a case needs at least `output` (text)"),
    ("probes", _is_optional_mapping, "`probes` must be a mapping"),
    ("tool_calls", _is_optional_mapping_list, "`tool_calls` must be a list of mappings"),
)


def load_case(path: str | Path) -> ProbeCase:
    """Read a probe case YAML file."""
    p = Path(path)
    text = read_input(p, "case", "--case")
    data, root = parse_yaml(text, source=str(p), hint=_HINT)
    if not isinstance(data, dict):
        raise InputError(f"{p}:1: {_CASE_SHAPE[0][2]}", hint=_HINT)
    for key, fits, what in _CASE_SHAPE:
        if not fits(data.get(key)):
            raise InputError(f"{p}:{node_line(root, (key,), at_key=True)}: {what}", hint=_HINT)
    return ProbeCase(
        id=str(data.get("id") or p.stem),
        input=data.get("input"),
        output=data["output"],
        context=data.get("context"),
        tool_calls=tuple(data.get("tool_calls") or []),
        probes=data.get("probes") or {},
    )


def _times_ten(text: str) -> str:
    plain = text.replace(",", "")
    whole, _, frac = plain.partition(".")
    bigger = str(int(whole) * 10)
    if "," in text:
        bigger = f"{int(bigger):,}"
    return bigger + (f".{frac}" if frac else "")


def _given_change(case: ProbeCase, probe: str, verb: str) -> tuple[str, str] | str | None:
    """The case's own ``probes.<probe>: {from, to}`` applied to the output (or why it cannot be);
    None when the case gives none."""
    spec = case.probes.get(probe)
    if not (isinstance(spec, dict) and "from" in spec and "to" in spec):
        return None
    old, new = str(spec["from"]), str(spec["to"])
    if old not in case.output:
        return f"the output does not {verb} {old!r}"
    return case.output.replace(old, new), f"{old} -> {new}"


def amount_change(case: ProbeCase) -> tuple[str, str] | str:
    """(new output, what changed), or why the probe cannot run."""
    given = _given_change(case, "amount", "contain")
    if given is not None:
        return given
    found = [m.group(0) for m in _AMOUNT.finditer(case.output)]
    if not found:
        return "no amount of four or more digits in the output; give probes.amount {from, to}"
    # The key amount is the one the question is about, when the question names one.
    asked = [a for a in found if a in (case.input or "")]
    old = (asked or found)[0]
    new = _times_ten(old)
    pattern = re.compile(rf"(?<![\w.,]){re.escape(old)}(?![\w]|,\d)")
    return pattern.sub(new, case.output), f"{old} -> {new}"


def _doc_refs(context: Any) -> list[tuple[str, str | None]]:
    refs = []
    for e in context if isinstance(context, list) else []:
        if isinstance(e, dict) and (e.get("doc_id") or e.get("id")):
            v = e.get("version")
            refs.append((str(e.get("doc_id") or e.get("id")), str(v) if v is not None else None))
    return refs


def _cited_form(output: str, doc: str, ver: str | None) -> str | None:
    """How the output cites a document, most specific form first (``doc@ver``, ``doc ver``, ``doc``)."""
    forms = ([f"{doc}@{ver}", f"{doc} {ver}"] if ver else []) + [doc]
    return next((f for f in forms if f in output), None)


def _citation_of(other: tuple[str, str | None], cited: str, doc: str) -> str:
    """The other document cited in the same form as ``doc`` was."""
    other_doc, other_ver = other
    if other_ver and " " in cited.removeprefix(doc):
        return f"{other_doc} {other_ver}"
    return f"{other_doc}@{other_ver}" if other_ver and "@" in cited else other_doc


def citation_swap(case: ProbeCase) -> tuple[str, str] | str:
    """The output citing another object from the context instead of the one it cites."""
    given = _given_change(case, "citation", "cite")
    if given is not None:
        return given
    refs = _doc_refs(case.context)
    cited_refs = (
        (doc, cited) for doc, ver in refs if (cited := _cited_form(case.output, doc, ver)) is not None
    )
    first = next(cited_refs, None)
    if first is None:
        return "the output cites no document of the context; give probes.citation {from, to}"
    doc, cited = first
    other = next(((d, v) for d, v in refs if d != doc), None)
    if other is None:
        return "the case's context has no second document to swap in; give probes.citation {from, to}"
    repl = _citation_of(other, cited, doc)
    return case.output.replace(cited, repl), f"{cited} -> {repl}"


def _submit_checks(rubric: Rubric) -> list[ToolCheck]:
    """The rubric's ``tool_not_called`` checks that name a tool: the submissions it forbids."""
    return [c for c in rubric.checks if c.type == "tool_not_called" and c.tool]


def _submit_arguments(forbidden: list[ToolCheck], tool: str) -> dict[str, Any] | None:
    """The arguments the first forbidding check of ``tool`` that names any asks about."""
    return next((c.arguments for c in forbidden if c.tool == tool and c.arguments), None)


def paused_but_submitted(
    case: ProbeCase, rubric: Rubric
) -> tuple[str, tuple[dict[str, Any], ...], str] | str:
    """The text says paused while the recorded tool call shows the submission."""
    spec = case.probes.get("paused")
    spec = spec if isinstance(spec, dict) else {}
    forbidden = _submit_checks(rubric)
    tool = spec.get("tool") or next((c.tool for c in forbidden), None)
    if not tool:
        return "no submit tool known: give probes.paused {tool} or add a tool_not_called check to the rubric"
    args = spec.get("arguments") or _submit_arguments(forbidden, tool)
    text = str(spec.get("text") or "The request is paused for approval; nothing has been submitted.")
    call = {"name": tool, "arguments": args or {}, "result": {"status": "submitted"}}
    return f"{case.output} {text}", (*case.tool_calls, call), f"text says paused; tool call {tool} submitted"


def reword(case: ProbeCase) -> tuple[str, str] | str:
    """The same facts in other words: the case's own rewording, else contractions swapped."""
    given = case.probes.get("reword")
    if isinstance(given, str) and given.strip():
        return given, "rewording given in the case"
    out = case.output
    done = []
    for a, b in _REWORDS:
        for x, y in ((a, b), (b, a)):
            if re.search(rf"\b{re.escape(x)}\b", out):
                out = re.sub(rf"\b{re.escape(x)}\b", y, out)
                done.append(f"{x} -> {y}")
                break
    if not done:
        return "no mechanical rewording applies; give probes.reword (the same facts in other words)"
    return out, "; ".join(done)


_Expectation = Literal["flip", "fail", "unchanged"]


def _plan(
    case: ProbeCase,
    name: str,
    expectation: _Expectation,
    made: tuple[str, str] | tuple[str, tuple[dict[str, Any], ...], str] | str,
    suffix: str,
) -> tuple[str, _Expectation, TaskRecord | str, str]:
    """(name, expectation, the changed task or why the probe does not apply, what changed) from
    what a counterfactual made: (output[, tool calls], change) or the reason it does not apply."""
    if isinstance(made, str):
        return name, expectation, made, ""
    tool_calls = made[1] if len(made) == 3 else None
    return name, expectation, case.task(suffix, output=made[0], tool_calls=tool_calls), made[-1]


def _outcome(
    expectation: str, base: str, verdict: str
) -> tuple[Literal["expected", "unexpected", "skipped"], str]:
    """Whether a probe's verdict is what its expectation asks of the base case's, and if not, why."""
    if expectation == "unchanged":
        if verdict == base:
            return "expected", ""
        return "unexpected", f"the verdict moved from {base} to {verdict} on wording alone"
    if base != "pass":
        return "skipped", f"the case is {base} as written; a probe that must make it fail shows nothing"
    if verdict == "fail":
        return "expected", ""
    return "unexpected", f"still {verdict} after the change: neither a check nor the judge caught it"


def _probe_report(
    case: ProbeCase, rubric: Rubric, base: ItemResult, probes: list[ProbeResult]
) -> ProbeReport:
    """The report of one probe run: the base verdict, each probe's result, and the tally."""
    return ProbeReport(
        report_id=f"probe-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
        created_at=datetime.now(UTC),
        case_id=case.id,
        rubric_name=rubric.name,
        rubric_version=str(rubric.version),
        judge_model=rubric.judge.model if rubric.judge else None,
        base_verdict=base.verdict,
        base_reason=base.reason,
        probes=tuple(probes),
        expected=sum(1 for x in probes if x.status == "expected"),
        unexpected=sum(1 for x in probes if x.status == "unexpected"),
    )


def _probe_result(
    plan: tuple[str, _Expectation, TaskRecord | str, str], base: ItemResult, scored: Iterator[ItemResult]
) -> ProbeResult:
    """A planned probe's result: skipped with its reason, or its verdict (the next scored result)
    against its expectation of the base verdict."""
    name, expectation, target, change = plan
    if isinstance(target, str):
        return ProbeResult(name=name, expectation=expectation, status="skipped", detail=target)
    res = next(scored)
    status, detail = _outcome(expectation, base.verdict, res.verdict)
    return ProbeResult(
        name=name,
        expectation=expectation,
        status=status,
        change=change,
        verdict=res.verdict,
        reason=res.reason,
        detail=detail,
    )


def _stored(report: ProbeReport) -> StoredReport:
    return StoredReport(
        report_id=report.report_id,
        kind="probe",
        created_at=report.created_at,
        rubric_name=report.rubric_name,
        rubric_version=report.rubric_version,
        judge_model=report.judge_model,
        payload=report.model_dump(mode="json"),
    )


@contextlib.asynccontextmanager
async def _probe_judge(
    rubric: Rubric, client: JudgeClient | None, client_for: Callable[[Rubric], JudgeClient] | None
) -> AsyncIterator[Judge | None]:
    """The judge every probe is scored by (None for a checks-only rubric): over the given client, or
    over one made here and closed when the probes are scored."""
    if rubric.judge is None:
        yield None
        return
    if client is not None:
        yield Judge(rubric, client)
        return
    own = client_for(rubric) if client_for else OpenAIJudgeClient(rubric.judge)
    try:
        yield Judge(rubric, own)
    finally:
        await own.aclose()


async def probe_case_async(
    rubric: Rubric,
    case: ProbeCase,
    store: Store,
    *,
    client: JudgeClient | None = None,
    client_for: Callable[[Rubric], JudgeClient] | None = None,
) -> ProbeReport:
    """Score the case and each counterfactual; report each probe as expected or not; keep the report."""
    plans = [
        _plan(case, "amount_change", "flip", amount_change(case), "amount"),
        _plan(case, "citation_swap", "fail", citation_swap(case), "citation"),
        _plan(case, "paused_vs_submitted", "fail", paused_but_submitted(case, rubric), "paused"),
        _plan(case, "reword", "unchanged", reword(case), "reword"),
    ]
    async with _probe_judge(rubric, client, client_for) as judge:
        tasks = [case.task("base")] + [t for _, _, t, _ in plans if isinstance(t, TaskRecord)]
        results = await asyncio.gather(*(score_task(t, rubric, run_id="probe", judge=judge) for t in tasks))
    base = results[0]
    scored = iter(results[1:])
    report = _probe_report(case, rubric, base, [_probe_result(plan, base, scored) for plan in plans])
    store.put_report(_stored(report))
    return report


def probe_case(rubric: Rubric, case: ProbeCase, store: Store, **kwargs: Any) -> ProbeReport:
    """Synchronous :func:`probe_case_async`."""
    return asyncio.run(probe_case_async(rubric, case, store, **kwargs))
