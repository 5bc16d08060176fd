"""``audit``: what to distrust in a scoring run. Reasoning that contradicts its score (cue words,
shown so a person can check the heuristic), test-retest stability, position consistency of
pairwise judging, and pass-rate drift separated from judge or rubric changes by provenance."""

from __future__ import annotations

import math
import re
import statistics
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracejudge._errors import InputError
from tracejudge._inputfile import json_lines, read_input
from tracejudge.runs import is_still_arriving, left_waiting
from tracejudge.schema import (
    AuditReport,
    CriterionResult,
    Drift,
    ItemResult,
    JudgeReply,
    Mismatch,
    PositionConsistency,
    RunRecord,
    Stability,
    StabilityItem,
    StoredReport,
    TaskRecord,
)
from tracejudge.store import Store

NEGATIVE_CUES = (
    "incorrect",
    "wrong",
    "inaccurate",
    "fails",
    "failed",
    "missing",
    "misses",
    "omits",
    "lacks",
    "irrelevant",
    "unsupported",
    "contradicts",
    "contradictory",
    "hallucinated",
    "fabricated",
    "misleading",
    "unclear",
    "incomplete",
    "poor",
    "error",
    "errors",
    "mistake",
    "not",
    "no",
    "never",
    "doesn't",
    "does not",
    "isn't",
    "is not",
    "cannot",
    "unhelpful",
    "ignores",
    "vague",
)
POSITIVE_CUES = (
    "correct",
    "correctly",
    "accurate",
    "accurately",
    "fully",
    "complete",
    "addresses",
    "relevant",
    "supported",
    "matches",
    "consistent",
    "clear",
    "clearly",
    "helpful",
    "good",
    "great",
    "excellent",
    "perfect",
    "well",
    "precise",
    "faithful",
    "cites",
)
_NEGATORS = {"not", "no", "never", "isn't", "doesn't", "hardly", "lacks", "without", "cannot"}
_SINGLE_NEGATIVE = frozenset(c for c in NEGATIVE_CUES if " " not in c)
# A negator on its own is a cue only when it is also a negative cue word ("no", "not"; not "without").
_JUDGING_NEGATIVE = _SINGLE_NEGATIVE - _NEGATORS
_NEGATIVE_NEGATORS = _SINGLE_NEGATIVE & _NEGATORS
_NEGATION_REACH = 3
_MIN_TONE = 0.3
_PAIRS_HINT = 'each line: {"id", "input", "a", "b"}'
_PAIR_ID = re.compile(r"^(?P<pair>.+)::(?P<order>ab|ba)$")


def _rate(part: float, whole: int) -> float | None:
    """``part / whole``, or None when there is nothing to divide by."""
    return part / whole if whole else None


def _open_negator(words: Sequence[str], i: int, used: set[int]) -> int | None:
    """The nearest negator within reach before word ``i`` that has not already flipped a cue."""
    for j in range(i - 1, max(0, i - _NEGATION_REACH) - 1, -1):
        if words[j] in _NEGATORS and j not in used:
            return j
    return None


def cues(text: str) -> tuple[list[str], list[str]]:
    """(negative, positive) cue words found, in order. A cue within three words after a negator flips:
    ``not correct`` is negative, ``no errors`` positive, and that negator is not counted again."""
    # Hyphenated, underscored or digit-bearing tokens are names ("handoff-missing", "wrong_change_2"),
    # not judgements: they stay whole so their parts are not read as cues.
    words = re.findall(r"[a-z0-9]+(?:['_-][a-z0-9]+)*", text.lower())
    neg: list[str] = []
    pos: list[str] = []
    used: set[int] = set()
    for i, w in enumerate(words):
        is_pos = w in POSITIVE_CUES
        if not is_pos and w not in _JUDGING_NEGATIVE:
            continue
        j = _open_negator(words, i, used)
        if j is None:
            (pos if is_pos else neg).append(w)
        else:
            used.add(j)
            (neg if is_pos else pos).append(f"{words[j]} {w}")
    neg.extend(w for i, w in enumerate(words) if i not in used and w in _NEGATIVE_NEGATORS)
    return neg, pos


def tone(text: str) -> tuple[float, list[str], list[str]]:
    """Tone of a reasoning on -1..1: (positive - negative) / (positive + negative) cue counts."""
    neg, pos = cues(text)
    total = len(neg) + len(pos)
    return ((len(pos) - len(neg)) / total if total else 0.0), neg, pos


def _reasonings(reply: JudgeReply) -> Iterator[tuple[str, float, str]]:
    """(criterion, score, text) of each scored, non-empty reasoning in a reply; the overall reasoning
    is read against the mean score."""
    texts = [(name, reply.scores.get(name), text) for name, text in reply.criterion_reasoning.items()]
    if reply.reasoning and reply.scores:
        texts.append(("overall", sum(reply.scores.values()) / len(reply.scores), reply.reasoning))
    for name, score, text in texts:
        if score is not None and text.strip():
            yield name, score, text


def _mismatch(item: ItemResult, reply: JudgeReply, name: str, score: float, text: str) -> Mismatch | None:
    """The reasoning as a mismatch when its tone is clear and points against its score."""
    sentiment, neg, pos = tone(text)
    direction = (score - 5.0) / 5.0
    if abs(sentiment) < _MIN_TONE or direction == 0 or (sentiment > 0) == (direction > 0):
        return None
    return Mismatch(
        trace_id=item.trace_id,
        criterion=name,
        repeat=reply.repeat,
        score=score,
        score_direction=round(direction, 4),
        sentiment=round(sentiment, 4),
        disagreement=round(abs(sentiment - direction), 4),
        negative_cues=tuple(neg),
        positive_cues=tuple(pos),
        reasoning=text,
    )


def find_mismatches(items: Iterable[ItemResult], *, limit: int | None = None) -> tuple[list[Mismatch], int]:
    """Reasonings whose tone points against their score, worst first, and how many were read."""
    read = [
        (item, reply, *reasoning)
        for item in items
        for reply in item.replies
        if reply.error is None
        for reasoning in _reasonings(reply)
    ]
    out = [m for m in (_mismatch(*r) for r in read) if m is not None]
    out.sort(key=lambda m: (-m.disagreement, m.trace_id, m.criterion, m.repeat))
    return (out[:limit] if limit is not None else out), len(read)


def _stability_item(trace_id: str, name: str, c: CriterionResult) -> StabilityItem:
    """One criterion's repeated scores; a flip is two different decided verdicts."""
    decided = {v for v in c.verdicts if v != "indeterminate"}
    return StabilityItem(
        trace_id=trace_id,
        criterion=name,
        scores=c.scores,
        spread=max(c.scores) - min(c.scores),
        stdev=statistics.pstdev(c.scores),
        flipped=len(decided) > 1,
    )


def _judge_repeated(items: Iterable[ItemResult]) -> Iterator[tuple[str, str, CriterionResult]]:
    """(trace id, criterion, result) of each criterion the judge scored more than once."""
    for item in items:
        for name, c in item.criteria.items():
            if c.decided_by == "judge" and len(c.scores) >= 2:
                yield item.trace_id, name, c


def stability(items: Iterable[ItemResult]) -> Stability | None:
    """Per item and criterion: score spread and pass/fail flips across repeats (None without repeats)."""
    items = list(items)
    repeats = max([1, *(r.repeat + 1 for item in items for r in item.replies)])
    if repeats < 2:
        return None
    rows = [_stability_item(*repeated) for repeated in _judge_repeated(items)]
    rows.sort(key=lambda r: (-r.spread, r.trace_id, r.criterion))
    spreads = [r.spread for r in rows]
    flipped_items = {r.trace_id for r in rows if r.flipped}
    return Stability(
        repeats=repeats,
        measured=len(rows),
        mean_spread=_rate(sum(spreads), len(spreads)),
        max_spread=max(spreads) if spreads else None,
        flip_rate=_rate(len(flipped_items), len({r.trace_id for r in rows})),
        straddling=tuple(sorted(flipped_items)),
        items=tuple(rows),
    )


def _same_winner(orders: dict[str, str]) -> bool:
    """Whether both orders of a pair picked the same answer (``pass`` means the first shown won)."""
    winner_ab = "a" if orders["ab"] == "pass" else "b"
    winner_ba = "b" if orders["ba"] == "pass" else "a"
    return winner_ab == winner_ba


def _decided_by_pair(decisions: Iterable[tuple[str, str, str]]) -> dict[str, dict[str, str]]:
    """pair id -> order -> verdict, decided (pass/fail) verdicts only."""
    by_pair: dict[str, dict[str, str]] = {}
    for pair, order, verdict in decisions:
        if verdict in ("pass", "fail"):
            by_pair.setdefault(pair, {})[order] = verdict
    return by_pair


def position_consistency(decisions: Iterable[tuple[str, str, str]]) -> PositionConsistency | None:
    """From ``(pair_id, order, verdict)`` with order ``ab`` / ``ba`` and verdict ``pass`` meaning the
    answer shown first won: the share of pairs with the same winner both ways and the share of
    decisions that picked the first-shown answer. Indeterminate decisions are left out."""
    by_pair = _decided_by_pair(decisions)
    if not by_pair:
        return None
    firsts = [v == "pass" for orders in by_pair.values() for v in orders.values()]
    both = {p: o for p, o in by_pair.items() if "ab" in o and "ba" in o}
    inconsistent = [p for p, o in both.items() if not _same_winner(o)]
    n = len(both)
    return PositionConsistency(
        pairs=n,
        consistent=n - len(inconsistent),
        consistency_rate=_rate(n - len(inconsistent), n),
        first_position_rate=_rate(sum(firsts), len(firsts)),
        inconsistent=tuple(sorted(inconsistent)),
    )


def pair_decisions(items: Iterable[ItemResult]) -> list[tuple[str, str, str]]:
    """Pairwise items of a run, recognised by trace ids ``<pair>::ab`` / ``<pair>::ba``."""
    out: list[tuple[str, str, str]] = []
    for item in items:
        m = _PAIR_ID.match(item.trace_id)
        if m:
            out.append((m["pair"], m["order"], item.verdict))
    return out


def _diff_ci(p1: float, n1: int, p2: float, n2: int) -> tuple[float, float] | None:
    if n1 == 0 or n2 == 0:
        return None
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    d = p1 - p2
    return (d - 1.96 * se, d + 1.96 * se)


_FINISHED = ("complete", "stopped_budget")
_PROVENANCE_FIELDS = (
    "rubric_version",
    "rubric_hash",
    "prompt_hash",
    "judge_model",
    "judge_base_url",
    "temperature",
    "repeat",
)


def _previous_finished(store: Store, run: RunRecord) -> RunRecord | None:
    """The newest finished run of the same rubric name created before ``run`` — or one at rest with items
    waiting for their trace to arrive: scored but for those, which the drift reading names."""
    return next(
        (
            r
            for r in store.list_runs()
            if r.provenance.rubric_name == run.provenance.rubric_name
            and r.run_id != run.run_id
            and (r.status in _FINISHED or left_waiting(r))
            and (r.created_at, r.run_id) < (run.created_at, run.run_id)
        ),
        None,
    )


def _drift_reading(
    changes: dict[str, tuple[Any, Any]],
    change: float | None,
    ci: tuple[float, float] | None,
    same_traces: bool,
    arriving: tuple[int, int] = (0, 0),
) -> str:
    """What a pass-rate change can be read as, given what changed between the two runs."""
    if changes:
        return (
            "the judge or rubric changed (" + ", ".join(changes) + "): this drift cannot be read as an agent"
            " change; score both with one judge and rubric to compare the agent"
        )
    if any(arriving):
        return (
            f"{arriving[0]} item(s) of this run and {arriving[1]} of the previous were not scored, their"
            " trace still arriving (counted as not passing): the change may be theirs; score them again once"
            " their traces have arrived, then audit again"
        )
    if change is None:
        return "no pass rate to compare"
    if ci is not None and ci[0] <= 0 <= ci[1]:
        return "same judge and rubric; the change is within sampling noise"
    if same_traces:
        return "same judge, rubric and traces: the change is the judge's own instability"
    return "same judge and rubric: the change is in the agent or its traffic"


def drift(store: Store, run: RunRecord) -> Drift | None:
    """Pass rate against the previous finished run of the same rubric name; provenance says whether a
    change may be the agent's. A run that never finished (killed, interrupted, still running) has no
    pass rate of its selection and is passed over."""
    before = _previous_finished(store, run)
    if before is None:
        return None
    now_o, then_o = run.summary.overall, before.summary.overall
    changes = {
        f: (getattr(before.provenance, f), getattr(run.provenance, f))
        for f in _PROVENANCE_FIELDS
        if getattr(before.provenance, f) != getattr(run.provenance, f)
    }
    now_ids, now_late = _scored(store, run.run_id)
    then_ids, then_late = _scored(store, before.run_id)
    change = ci = None
    if now_o.pass_rate is not None and then_o.pass_rate is not None:
        change = now_o.pass_rate - then_o.pass_rate
        ci = _diff_ci(now_o.pass_rate, now_o.n, then_o.pass_rate, then_o.n)
    return Drift(
        previous_run_id=before.run_id,
        pass_rate=now_o.pass_rate,
        previous_pass_rate=then_o.pass_rate,
        change=change,
        change_ci=ci,
        provenance_changes=changes,
        shared_traces=len(now_ids & then_ids),
        still_arriving=(now_late, then_late),
        reading=_drift_reading(changes, change, ci, now_ids == then_ids, (now_late, then_late)),
    )


def _scored(store: Store, run_id: str) -> tuple[set[str], int]:
    """A run's traces, and how many of its items were left unscored, their trace still arriving."""
    ids: set[str] = set()
    late = 0
    for item in store.iter_score_items(run_id):
        ids.add(item.trace_id)
        late += is_still_arriving(item)
    return ids, late


def audit_run(store: Store, run_id: str | None = None, *, mismatch_limit: int | None = 50) -> AuditReport:
    """Audit a scoring run (default: the newest) and keep the report with it."""
    if run_id is None:
        runs = store.list_runs(limit=1)
        if not runs:
            raise InputError("no scoring runs in the store", hint="run `tracejudge score --rubric R` first")
        run = runs[0]
    else:
        found = store.get_run(run_id)
        if found is None:
            raise InputError(
                f"no run {run_id} in the store", hint="see the run ids printed by `tracejudge score`"
            )
        run = found
    items: Sequence[ItemResult] = list(store.iter_score_items(run.run_id))
    mismatches, read = find_mismatches(items, limit=mismatch_limit)
    report = AuditReport(
        report_id=f"audit-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
        run_id=run.run_id,
        created_at=datetime.now(UTC),
        rubric_name=run.provenance.rubric_name,
        rubric_version=run.provenance.rubric_version,
        judge_model=run.provenance.judge_model,
        items=len(items),
        replies_read=read,
        mismatches=tuple(mismatches),
        stability=stability(items),
        position=position_consistency(pair_decisions(items)),
        drift=drift(store, run),
        still_arriving=tuple(i.trace_id for i in items if is_still_arriving(i)),
    )
    store.put_report(
        StoredReport(
            report_id=report.report_id,
            kind="audit",
            created_at=report.created_at,
            run_id=run.run_id,
            rubric_name=report.rubric_name,
            rubric_version=report.rubric_version,
            judge_model=report.judge_model,
            payload=report.model_dump(mode="json"),
        )
    )
    return report


def load_pairs(path: str | Path) -> list[dict[str, Any]]:
    """Pairs JSONL: ``{"id", "input", "a", "b"}`` (optional ``context``)."""
    p = Path(path)
    text = read_input(p, "pairs", "--pairs")
    out = []
    for n, data in json_lines(text, source=str(p), hint=_PAIRS_HINT):
        if not isinstance(data, dict) or not all(k in data for k in ("id", "a", "b")):
            raise InputError(
                f"{p}:{n}: a pair needs id, a and b", hint='each line: {"id", "input", "a", "b"}'
            )
        out.append(data)
    return out


def pair_tasks(pairs: Iterable[dict[str, Any]]) -> list[TaskRecord]:
    """Each pair twice, in both orders (trace ids ``<id>::ab`` and ``<id>::ba``): the answer shown first
    is "Answer 1". A rubric whose criteria ask whether Answer 1 is the better one scores them."""
    from tracejudge.audit._labels import task_from

    out = []
    for pair in pairs:
        for order, first, second in (("ab", pair["a"], pair["b"]), ("ba", pair["b"], pair["a"])):
            out.append(
                task_from(
                    f"{pair['id']}::{order}",
                    input=pair.get("input"),
                    output=f"Answer 1:\n{first}\n\nAnswer 2:\n{second}",
                    context=pair.get("context"),
                )
            )
    return out
