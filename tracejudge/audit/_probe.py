"""``probe``: counterfactual sanity checks of checks and judge on one case. A sound scorer fails the
case when a key amount changes (5,000 -> 50,000), when another object's citation is swapped in, and
when the text says "paused" while the tool call shows it submitted; it does not change its verdict
when only the wording changes."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
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
from tracejudge.schema import ItemResult, ProbeReport, ProbeResult, Rubric, StoredReport, TaskRecord
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


def load_case(path: str | Path) -> ProbeCase:
    """Read a probe case YAML file."""
    p = Path(path)
    text = read_input(p, "case", "--case")
    data, root = parse_yaml(text, source=str(p), hint=_HINT)
    if not isinstance(data, dict) or not isinstance(data.get("output"), str):
        line = node_line(root, ("output",), at_key=True) if isinstance(data, dict) else 1
        raise InputError(f"{p}:{line}: a case needs at least `output` (text)", hint=_HINT)
    probes = data.get("probes") or {}
    if not isinstance(probes, dict):
        line = node_line(root, ("probes",), at_key=True)
        raise InputError(f"{p}:{line}: `probes` must be a mapping", hint=_HINT)
    tools = data.get("tool_calls") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        line = node_line(root, ("tool_calls",), at_key=True)
        raise InputError(f"{p}:{line}: `tool_calls` must be a list of mappings", hint=_HINT)
    return ProbeCase(
        id=str(data.get("id") or p.stem),
        input=data.get("input"),
        output=data["output"],
        context=data.get("context"),
        tool_calls=tuple(tools),
        probes=probes,
    )


def _times_ten(text: str) -> str:
    plain = text.replace(",", "")
    whole, _, frac = plain.partition(".")
    bigger = str(int(whole) * 10)
    if "," in text:
        bigger = f"{int(bigger):,}"
    return bigger + (f".{frac}" if frac else "")


def amount_change(case: ProbeCase) -> tuple[str, str] | str:
    """(new output, what changed), or why the probe cannot run."""
    spec = case.probes.get("amount")
    if isinstance(spec, dict) and "from" in spec and "to" in spec:
        old, new = str(spec["from"]), str(spec["to"])
        if old not in case.output:
            return f"the output does not contain {old!r}"
        return case.output.replace(old, new), f"{old} -> {new}"
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


def citation_swap(case: ProbeCase) -> tuple[str, str] | str:
    """The output citing another object from the context instead of the one it cites."""
    spec = case.probes.get("citation")
    if isinstance(spec, dict) and "from" in spec and "to" in spec:
        old, new = str(spec["from"]), str(spec["to"])
        if old not in case.output:
            return f"the output does not cite {old!r}"
        return case.output.replace(old, new), f"{old} -> {new}"
    refs = _doc_refs(case.context)
    for doc, ver in refs:
        forms = ([f"{doc}@{ver}", f"{doc} {ver}"] if ver else []) + [doc]
        cited = next((f for f in forms if f in case.output), None)
        if cited is None:
            continue
        other = next(((d, v) for d, v in refs if d != doc), None)
        if other is None:
            return "the case's context has no second document to swap in; give probes.citation {from, to}"
        repl = f"{other[0]}@{other[1]}" if other[1] and "@" in cited else other[0]
        if other[1] and " " in cited.removeprefix(doc):
            repl = f"{other[0]} {other[1]}"
        return case.output.replace(cited, repl), f"{cited} -> {repl}"
    return "the output cites no document of the context; give probes.citation {from, to}"


def paused_but_submitted(
    case: ProbeCase, rubric: Rubric
) -> tuple[str, tuple[dict[str, Any], ...], str] | str:
    """The text says paused while the recorded tool call shows the submission."""
    spec = case.probes.get("paused")
    spec = spec if isinstance(spec, dict) else {}
    tool = spec.get("tool") or next(
        (c.tool for c in rubric.checks if c.type == "tool_not_called" and c.tool), None
    )
    if not tool:
        return "no submit tool known: give probes.paused {tool} or add a tool_not_called check to the rubric"
    args = spec.get("arguments") or next(
        (
            c.arguments
            for c in rubric.checks
            if c.type == "tool_not_called" and c.tool == tool and c.arguments
        ),
        None,
    )
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


async def probe_case_async(
    rubric: Rubric,
    case: ProbeCase,
    store: Store,
    *,
    client: JudgeClient | None = None,
    client_for: Callable[[Rubric], JudgeClient] | None = None,
) -> ProbeReport:
    """Score the case and each counterfactual; report each probe as expected or not; keep the report."""
    own = client is None and rubric.judge is not None
    if own and rubric.judge is not None:
        client = client_for(rubric) if client_for else OpenAIJudgeClient(rubric.judge)
    judge = Judge(rubric, client) if client is not None and rubric.judge is not None else None

    async def score(task: TaskRecord) -> ItemResult:
        return await score_task(task, rubric, run_id="probe", judge=judge)

    plans = [
        _plan(case, "amount_change", "flip", amount_change(case), "amount"),
        _plan(case, "citation_swap", "fail", citation_swap(case), "citation"),
        _plan(case, "paused_vs_submitted", "fail", paused_but_submitted(case, rubric), "paused"),
        _plan(case, "reword", "unchanged", reword(case), "reword"),
    ]
    try:
        tasks = [case.task("base")] + [t for _, _, t, _ in plans if isinstance(t, TaskRecord)]
        results = await asyncio.gather(*(score(t) for t in tasks))
    finally:
        if own and client is not None:
            await client.aclose()
    base = results[0]
    scored = iter(results[1:])
    probes: list[ProbeResult] = []
    for name, expectation, target, change in plans:
        if isinstance(target, str):
            probes.append(ProbeResult(name=name, expectation=expectation, status="skipped", detail=target))
            continue
        res = next(scored)
        status, detail = _outcome(expectation, base.verdict, res.verdict)
        probes.append(
            ProbeResult(
                name=name,
                expectation=expectation,
                status=status,
                change=change,
                verdict=res.verdict,
                reason=res.reason,
                detail=detail,
            )
        )
    report = _probe_report(case, rubric, base, probes)
    store.put_report(
        StoredReport(
            report_id=report.report_id,
            kind="probe",
            created_at=report.created_at,
            rubric_name=report.rubric_name,
            rubric_version=report.rubric_version,
            judge_model=report.judge_model,
            payload=report.model_dump(mode="json"),
        )
    )
    return report


def probe_case(rubric: Rubric, case: ProbeCase, store: Store, **kwargs: Any) -> ProbeReport:
    """Synchronous :func:`probe_case_async`."""
    return asyncio.run(probe_case_async(rubric, case, store, **kwargs))
