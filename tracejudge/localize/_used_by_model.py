"""The ``used_by_model`` stage: does the final answer rest on the required material?"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tracejudge._errors import TracejudgeError
from tracejudge.localize._context import CheckContext, material_label, norm_version, stage_result
from tracejudge.localize._facts import FactValue, cites_version, extract_values, fact_value, mentions
from tracejudge.localize._text import find_clause, tokenize
from tracejudge.normalize import cut_short
from tracejudge.schema import Evidence, Gap, Material, StageResult, TaskRecord, UsageQuestion, Verdict


def _facts(items: dict[str, Any]) -> list[tuple[str, FactValue]]:
    out = []
    for key, value in items.items():
        fv = fact_value(key, value)
        if fv is not None:
            out.append((key, fv))
    return out


def _answer_missing(ctx: CheckContext) -> list[str]:
    task = ctx.task
    if not task.model_calls and task.final_answer_span_id is None:
        return ["the final answer (no model span and no root span output recorded)"]
    last = task.model_calls[-1] if task.model_calls else None
    for gap in task.gaps:
        if gap.kind == "model_output_redacted":
            return [f"output of span {gap.span_id} (redacted)"]
    if last is not None and not last.output_recorded:
        return [f"output of model span {last.span_id} (content capture was off)"]
    return ["the final answer (root span output or the last model call's output)"]


def _empty_answer(task: TaskRecord) -> Gap | None:
    """The ``model_output_empty`` gap of the last model call when the trace has no answer: the model's
    output, the answer the user got, was recorded and is empty (not missing); None otherwise."""
    last = task.model_calls[-1].span_id if task.model_calls else None
    return next((g for g in task.gaps if g.kind == "model_output_empty" and g.span_id == last), None)


def _incomplete(task: TaskRecord, answer: str) -> tuple[str, str] | None:
    """Why the final answer may not be all it said, and what would record it whole: a value an exporter
    cut short, or a model span whose SDK dropped records at its limits (an output message, content part
    or choice event among them; normalize's ``model_output_truncated`` gap on the answer's span). None
    when it reads as whole."""
    cut = cut_short(answer, frozenset(task.cut_lengths))
    if cut is not None:
        detail = f"the answer may have been cut short ({cut}): what it states past the cut is unknown"
        return detail, "the whole answer (raise the exporter's OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT)"
    span = task.final_answer_span_id
    for gap in task.gaps:
        if gap.kind == "model_output_truncated" and span is not None and gap.span_id == span:
            detail = (
                f"the answer may be incomplete (span {span}: {gap.note}): what it stated in them is unknown"
            )
            return detail, f"the whole answer ({gap.switch})" if gap.switch else "the whole answer"
    return None


def _relevant_superseded(ctx: CheckContext, m: Material) -> list[Material]:
    required_ids = {r.doc_id for r in ctx.ticket.required}
    return [s for s in ctx.ticket.superseded if s.doc_id == m.doc_id or s.doc_id not in required_ids]


def _bare(fv: FactValue) -> bool:
    """A number fact with no currency or percent from its key or value."""
    return fv.kind == "number" and not fv.units


def _names(text: str, key: str, fv: FactValue, clause: str | None) -> bool:
    """Whether ``text`` names what the fact ``key`` is: a word of the key (3+ letters) inside a word of
    the text, its last two letters free ("retries" in "retried", "d_model" in "dmodel", "cap" in
    "capped"), or a word (4+ letters) the material's clause writes beside the value ("BLEU score of
    28.4": a drafted ticket names its facts after the sentence's first word)."""
    words = tokenize(text)
    names = [p for p in re.split(r"[^a-z]+", key.lower()) if len(p) >= 3]
    if clause:
        for a, b in mentions(clause, extract_values(clause), fv):
            names += re.findall(r"[^\W\d_]{4,}", clause[max(0, a - 30) : b + 30].lower())
    return any(stem in w for part in names for stem in [part[: max(3, len(part) - 2)]] for w in words)


@dataclass
class _Reading:
    """The final answer read for fact values, telling a value it states from one it only echoes
    from the request."""

    answer: str
    """The final answer."""
    span: str | None
    """The span it was recorded on."""
    values: list[FactValue]
    """The values the answer states."""
    question: str
    """The user's request."""
    question_values: list[FactValue]
    """The values the request states."""
    cut_lengths: tuple[int, ...]
    """The lengths the trace shows its values were cut at (``TaskRecord.cut_lengths``)."""
    echoed: list[Evidence] = field(default_factory=list)
    """Values the answer states only as the request did (shown, never counted)."""
    sourced: list[Evidence] = field(default_factory=list)
    """The cited passages the answer's values were read from (``cited``)."""
    question_cut: str | None = field(init=False)
    """Why the request may have been cut short (an exporter's length limit): what it stated past the
    cut is unknown, so any value the answer states may only echo it."""

    question_partial: str | None = None
    """Why the request may hold more than its recorded text: the user message carrying it had parts whose
    text is not on the trace (a document block, a lost text part), which may state any value."""
    cited: tuple[str, ...] = ()
    """The passages of its input the answer's reply cites (``Message.cited``) that the call's recorded input
    holds: where the model says it took what it states from."""
    _passage_values: dict[str, list[FactValue]] = field(default_factory=dict, init=False, repr=False)
    """The values each cited passage states (``extract_values``), read once per passage: every fact of the
    material and of each superseded one asks for them (:meth:`passage_stating`)."""

    def __post_init__(self) -> None:
        self.question_cut = cut_short(self.question, frozenset(self.cut_lengths)) or self.question_partial

    def stated(
        self, key: str, fv: FactValue, echo: str, unnamed: list[Evidence], clause: str | None = None
    ) -> str | None:
        """The answer's words stating ``fv`` (the fact ``key`` of a material with ``clause``); None when
        it does not, or only echoes the request (then noted in ``echoed`` as ``echo``), or only holds
        the number without saying what it counts (then noted in ``unnamed``)."""
        spans = mentions(self.answer, self.values, fv)
        if spans and _bare(fv) and not _names(self.answer, key, fv, clause):
            # A number with no unit on either side ("prompt 0", "step 3") is a value of the fact only
            # when the answer says what it counts. Unsure, it still keeps the opposite reading from
            # being definite: the answer may state it.
            bare = spans
            spans = [(v.start, v.end) for v in self.values if v.units and (v.start, v.end) in spans]
            if not spans and not (self.question and mentions(self.question, self.question_values, fv)):
                a, b = bare[0]
                what = f"{key} = {fv.show()}"
                unnamed.append(
                    self.note(f"{self.answer[a:b]!r} may state {what}: the answer says not what it counts")
                )
        if not spans:
            return None
        passage = self.passage_stating(fv)
        if passage is not None:
            # The reply cites a passage of its input stating the value (a document's text, not the user's
            # words): the model took it from there, whatever the request also says.
            source = self.note(f"cites the passage {passage[:200]!r}")
            self.sourced += [source] if source not in self.sourced else []
            a, b = spans[0]
            return self.answer[a:b]
        if self.question and mentions(self.question, self.question_values, fv):
            self.echoed.append(Evidence(span_id=self.span, note=echo))
            return None
        if self.question_cut is not None:
            said = echo.split(", but")[0]
            note = f"{said}, which the request may state past where it was cut ({self.question_cut})"
            self.echoed.append(Evidence(span_id=self.span, note=note))
            return None
        a, b = spans[0]
        return self.answer[a:b]

    def passage_stating(self, fv: FactValue) -> str | None:
        """The first cited passage stating ``fv``; None when none does."""
        return next((p for p in self.cited if mentions(p, self._values_of(p), fv)), None)

    def _values_of(self, passage: str) -> list[FactValue]:
        """The values ``passage`` states, extracted on the first ask."""
        values = self._passage_values.get(passage)
        if values is None:
            values = self._passage_values[passage] = extract_values(passage)
        return values

    def passage_of(self, m: Material, required: list[tuple[str, FactValue]]) -> str | None:
        """The first cited passage of ``m``: one holding its clause or held in it, or stating one of its
        facts; None when none is."""
        for passage in self.cited:
            if m.clause and (
                find_clause(passage, m.clause, partial=False).found
                or find_clause(m.clause, passage, partial=False).found
            ):
                return passage
            if any(self.passage_stating(fv) == passage for _, fv in required):
                return passage
        return None

    def cites(self, m: Material, label: str) -> list[Evidence]:
        """A note that the answer cites ``m``'s version (``label``); none when it does not or ``m``
        has no version."""
        if m.version and cites_version(self.answer, m.doc_id, m.version):
            return [self.note(f"cites {label}")]
        return []

    def note(self, text: str) -> Evidence:
        """Evidence on the answer's span."""
        return Evidence(span_id=self.span, note=text)


def _agreeing(
    reading: _Reading,
    required: list[tuple[str, FactValue]],
    label: str,
    clause: str | None,
    unnamed: list[Evidence],
) -> tuple[list[Evidence], list[str]]:
    """Evidence for each of the material's facts the answer states, and their keys (``unnamed``: the
    bare numbers it may state them with)."""
    agree: list[Evidence] = []
    agreed: list[str] = []
    for key, fv in required:
        what = f"{key} = {fv.show()}"
        quote = reading.stated(
            key, fv, f"states {what}, but the request states it too (an echo)", unnamed, clause
        )
        if quote is not None:
            agreed.append(key)
            agree.append(reading.note(f"states {what} as {label} says: {quote!r}"))
    return agree, agreed


def _stale(
    ctx: CheckContext,
    m: Material,
    reading: _Reading,
    required: list[tuple[str, FactValue]],
    unnamed: list[Evidence],
) -> list[Evidence]:
    """Evidence that the answer rests on superseded material: its facts stated, or it cited
    (``unnamed``: the bare numbers it may state them with)."""
    stale: list[Evidence] = []
    for s in _relevant_superseded(ctx, m):
        slabel = material_label(s.doc_id, s.version)
        for key, fv in _facts(s.facts):
            if any(_same_value(fv, r) for _, r in required):
                continue  # the superseded value equals a required one: stating it shows nothing
            what = f"{key} = {fv.show()}"
            quote = reading.stated(
                key, fv, f"states {slabel}'s {what}, but the request states it too", unnamed, s.clause
            )
            if quote is not None:
                stale.append(reading.note(f"states {slabel}'s superseded {what}: {quote!r}"))
        same = s.doc_id == m.doc_id and norm_version(s.version) == norm_version(m.version)
        if not same and cites_version(reading.answer, s.doc_id, s.version):
            stale.append(reading.note(f"cites the superseded {slabel}"))
    return stale


def check(ctx: CheckContext, m: Material) -> StageResult:
    """Does the final answer rest on ``m``? The ticket's facts stated (not echoed from the request)
    pass it, superseded facts fail it; when they do not settle it, the usage judge (if any) reads it."""
    label = material_label(m.doc_id, m.version)
    answer = ctx.task.final_answer
    if answer is None:
        uncertain = next((g for g in ctx.task.gaps if g.kind == "answer_uncertain"), None)
        if uncertain is not None:
            # Which call's reply the user got is open: the last call's may be a title or a grader's, and
            # read as the answer it would fail or pass the material on text the user never saw.
            detail = f"which reply is the answer is not recorded: {uncertain.note}"
            wanted = uncertain.switch or "the reply the user got, as the root span's output"
            return stage_result("used_by_model", "unconfirmed", detail, missing=[wanted])
        empty = _empty_answer(ctx.task)
        if empty is not None:
            # An empty answer states nothing: whether the material was used cannot be read from it, and no
            # judge is asked to read nothing as "ignored".
            detail = (
                f"the answer was recorded empty (span {empty.span_id}: {empty.detail}): it states nothing"
            )
            missing = [f"an answer with text (model span {empty.span_id} returned none)"]
            return stage_result("used_by_model", "unconfirmed", detail, missing=missing)
        return stage_result(
            "used_by_model", "unconfirmed", "no final answer recorded", missing=_answer_missing(ctx)
        )
    reading = _Reading(
        answer=answer,
        span=ctx.task.final_answer_span_id,
        values=ctx.answer_values(),
        question=ctx.task.input or "",
        question_values=ctx.question_values(),
        cut_lengths=ctx.task.cut_lengths,
        question_partial=_request_partial(ctx.task),
        cited=_cited(ctx.task),
    )
    required = _facts(m.facts)
    may_agree: list[Evidence] = []
    may_be_stale: list[Evidence] = []
    agree, agreed = _agreeing(reading, required, label, m.clause, may_agree)
    stale = _stale(ctx, m, reading, required, may_be_stale)
    echoed = reading.echoed
    cited = reading.cites(m, label)
    incomplete = _incomplete(ctx.task, answer)
    if incomplete is not None and (stale or agree or ctx.judge is not None):
        # What the answer states past the cut, or in a record the SDK dropped, is unknown: it may take
        # back a superseded value it stated, or state one beside the required value; nor is a judge
        # asked to read part of an answer as all of it ("it does not state the cap" may be the cut).
        detail, wanted = incomplete
        return stage_result(
            "used_by_model", "unconfirmed", detail, evidence=[*stale, *agree, *echoed], missing=[wanted]
        )
    # Only superseded facts stated: the answer rests on them unless it cites a passage of this material.
    only_stale = bool(stale) and not agree and not may_agree
    read = reading.passage_of(m, required) if only_stale else None
    if only_stale and read is None:
        detail = f"the answer rests on superseded material instead of {label}"
        return stage_result("used_by_model", "fail", detail, evidence=[*stale, *reading.sourced, *echoed])
    if agree and not stale and not may_be_stale:
        detail = f"the answer agrees with {label} ({', '.join(agreed)})"
        evidence = [*agree, *cited, *reading.sourced, *echoed]
        return stage_result("used_by_model", "pass", detail, evidence=evidence)
    refused = _refusal(ctx.task, answer)
    if refused is not None and not agree and not stale:
        return _refused(reading, label, refused, [*may_agree, *may_be_stale, *echoed])
    mixed = bool((stale and may_agree) or (agree and may_be_stale))
    detail = _unsettled(ctx, m, label, required, both=bool(stale and agree), mixed=mixed, read=read)
    cited += [reading.note(f"cites the passage {p[:200]!r}") for p in (read,) if p is not None]
    cited += [e for e in reading.sourced if e not in cited]
    evidence = [*agree, *stale, *may_agree, *may_be_stale, *echoed, *cited]
    if ctx.judge is not None:
        return _ask_judge(ctx, m, answer, detail, evidence)
    wanted = (
        f"facts for {label} in the ticket that the answer states, or a usage judge to read the answer"
        if not required
        else "a usage judge to read the answer (its facts do not settle it)"
    )
    return stage_result("used_by_model", "unconfirmed", detail, evidence=evidence, missing=[wanted])


def _cited(task: TaskRecord) -> tuple[str, ...]:
    """The passages the final answer's reply cites (``Message.cited``) that its call's recorded input holds:
    one not found there (its document lost, cut short, hidden) is no evidence of what the model read."""
    found: list[str] = []
    for call in task.model_calls:
        if call.span_id != task.final_answer_span_id:
            continue
        for message in call.output_messages:
            found += [p for p in message.cited if find_clause(call.input_text, p, partial=False).found]
    return tuple(found)


def _request_partial(task: TaskRecord) -> str | None:
    """Why the user message carrying the request holds more than the trace's text of it: it had parts the
    trace holds no text of (``Message.unread``); None when every such message reads whole."""
    if not task.input:
        # No request read, yet a model call's input was recorded in part (cut past its JSON's end, a
        # message without its content): the request may be in the part not read, stating any value.
        if any(call.input_recorded and call.input_partial for call in task.model_calls):
            return "the request is not on the trace: a model input that may carry it was recorded in part"
        return None
    for call in task.model_calls:
        for message in call.input_messages:
            if message.role != "user" or task.input not in (message.content or ""):
                continue
            if message.unread:
                return f"its message had {', '.join(message.unread)} parts with no text on the trace"
            if message.redacted:
                return "its message had parts recorded redacted"
    return None


def _refusal(task: TaskRecord, answer: str) -> str | None:
    """The refusal the final answer is (a model call's output message the model marked a refusal, recorded
    as such: OpenAI's ``refusal``), None when the answer is no refusal."""
    for call in reversed(task.model_calls):
        for message in call.output_messages:
            refusal = message.refusal
            if refusal and (call.span_id == task.final_answer_span_id or refusal.strip() == answer.strip()):
                return refusal
    return None


def _refused(reading: _Reading, label: str, refusal: str, evidence: list[Evidence]) -> StageResult:
    """Fail: the model was given the material (in_context passed before this stage ran) and refused to
    answer, stating none of its facts. The refusal is the model's own record (the API's ``refusal``), not
    a reading of the answer's words; the ticket says the material should have been used."""
    detail = (
        f"the model refused to answer, though {label} was in its input: the refusal states none of its"
        " facts (the fix is the prompt or the model's refusal behaviour)"
    )
    note = reading.note(f"refused: {refusal[:300]!r}")
    return stage_result("used_by_model", "fail", detail, evidence=[note, *evidence])


def _unsettled(
    ctx: CheckContext,
    m: Material,
    label: str,
    required: list[tuple[str, FactValue]],
    *,
    both: bool,
    mixed: bool,
    read: str | None,
) -> str:
    """Why the answer's facts do not settle it: it states superseded values yet its reply cites the
    material's passage it ``read``, values of one and a bare number that may state the other's
    (``mixed``), ``both`` required and superseded values, the ticket gives none to compare, or the answer
    states neither."""
    if read is not None:
        # The model read the material (its citation) and answered otherwise: misread, or weighed the
        # superseded text above it — not "ignored"; a usage judge reads it.
        return (
            f"the answer states superseded values, yet its reply cites {label}'s passage {read[:200]!r}:"
            f" the model read {label}"
        )
    if mixed:
        return (
            f"the answer states values of {label} or superseded material, and a bare number that may"
            " state the other's"
        )
    if both:
        return f"the answer states values of both {label} and superseded material"
    if not required and not any(_facts(s.facts) for s in _relevant_superseded(ctx, m)):
        return f"the ticket gives no facts for {label} to compare the answer with"
    return f"the answer states neither {label}'s facts nor superseded ones"


def _same_value(a: FactValue, b: FactValue) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "date":
        return bool(a.readings() & b.readings())
    if a.kind == "number":
        return bool(a.numbers & b.numbers)
    return " ".join(a.text.split()).casefold() == " ".join(b.text.split()).casefold()


def _ask_judge(
    ctx: CheckContext, m: Material, answer: str, why: str, evidence: list[Evidence]
) -> StageResult:
    assert ctx.judge is not None
    question = UsageQuestion(
        answer=answer,
        answer_span_id=ctx.task.final_answer_span_id,
        question=ctx.task.input,
        material=m,
        superseded=tuple(_relevant_superseded(ctx, m)),
        context_excerpt=_context_excerpt(ctx, m.clause) if m.clause else None,
    )
    try:
        got = ctx.judge.judge_usage(question)
    except TracejudgeError as exc:
        detail = f"{why}; the usage judge failed: {exc.message}"
        return stage_result(
            "used_by_model", "unconfirmed", detail, evidence=evidence, missing=["a usable judge reply"]
        )
    return _judge_said(got, why, evidence)


def _context_excerpt(ctx: CheckContext, clause: str) -> str | None:
    """The clause as the first recorded model input holding it shows it (for the judge to read)."""
    for i, call in enumerate(ctx.task.model_calls):
        if call.input_recorded:
            found = find_clause(ctx.hay(i, call), clause)
            if found.found:
                return found.excerpt
    return None


def _judge_said(got: StageResult, why: str, evidence: list[Evidence]) -> StageResult:
    """The stage's result from the judge's: its pass or fail only with evidence, else unconfirmed."""
    if got.status in ("pass", "fail") and got.evidence:
        return stage_result(
            "used_by_model",
            got.status,
            f"judge: {got.detail}" if got.detail else "judge",
            evidence=[*got.evidence, *evidence],
        )
    if got.status in ("pass", "fail"):
        detail = f"{why}; the judge said {got.status} without citing evidence, which is not accepted"
        return stage_result(
            "used_by_model", "unconfirmed", detail, evidence=evidence, missing=["judge evidence"]
        )
    detail = f"{why}; judge: {got.detail or 'undecided'}"
    return stage_result(
        "used_by_model",
        "unconfirmed",
        detail,
        evidence=[*got.evidence, *evidence],
        missing=got.missing or ("a decisive judge reply",),
    )


def fault(_ctx: CheckContext, _m: Material, _result: StageResult) -> Verdict:
    """The verdict a failed ``used_by_model`` stage gives."""
    return "ignored_by_model"
