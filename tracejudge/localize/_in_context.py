"""The ``in_context`` stage: did the required material reach the model's input?"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from tracejudge.localize._answering import Answering, answering, flat, replies
from tracejudge.localize._context import (
    CheckContext,
    Hits,
    doc_match,
    material_label,
    norm_version,
    rank,
    recording_switch,
    stage_result,
)
from tracejudge.localize._text import AmbiguousDate, ClauseMatch, find_clause, split_clause
from tracejudge.normalize import RECORD_ANSWER, tool_requests
from tracejudge.schema import Document, Evidence, Material, ModelCall, RetrievalCall, StageResult, Verdict


def _partial_note(match: ClauseMatch, size: int) -> str:
    if not match.matched:
        return "no part of the clause is in the input"
    where = ""
    if match.start is not None and size:
        where = f" at {100 * match.start // size}% of the input"
        if match.end is not None and size - match.end <= 2:
            where += " (its very end)"
    if match.differs is not None:
        text, wanted = match.differs
        run = (
            f"the clause's first {match.matched} tokens are there"
            if match.first == 0
            else f"clause tokens {match.first + 1}-{match.first + match.matched} are there"
        )
        head = f"{run}, then the input has {text!r} where the clause has {wanted!r}"
    elif match.first == 0:
        head = "the start of the clause is there and the rest is missing (cut off?)"
    else:
        head = f"clause tokens {match.first + 1}-{match.first + match.matched}"
    return f"best partial match {match.matched}/{match.total} tokens, {head}{where}: {match.excerpt!r}"


def _order(a: AmbiguousDate) -> str:
    return "day first (DD/MM/YYYY)" if a.day_first else "month first (MM/DD/YYYY)"


def _ambiguous_note(match: ClauseMatch, source: str) -> str:
    dates = "; ".join(
        f"{a.text!r} is {a.clause_text!r} ({a.date.isoformat()}) only if read {_order(a)}"
        for a in match.ambiguous
    )
    head = f"{source} is in this model input only under one reading of an ambiguous date"
    return f"{head}: {dates}: {match.excerpt!r}"


def _ambiguous_missing(call: ModelCall, match: ClauseMatch) -> str:
    shown = ", ".join(repr(a.text) for a in match.ambiguous)
    return (
        f"the date format (locale) of the model input of span {call.span_id}:"
        f" whether {shown} is written day first or month first"
    )


def _sought(m: Material, hits: Hits) -> tuple[str, str] | None:
    """What to look for in the model inputs and how notes call it: the ticket's clause, else the
    content of the material as the retriever returned it."""
    if m.clause:
        return m.clause, "the clause"
    doc = next((d for _, d in hits.exact if d.content), None)
    if doc is not None and doc.content:
        return doc.content, "the retrieved content"
    return None


@dataclass
class _Scan:
    """What each model input shows of the sought text."""

    clause: str
    """The text sought (the ticket's clause, else the retrieved content)."""
    source: str
    """How notes call it ("the clause", "the retrieved content")."""
    settled: bool
    """Some input holds it whole: best partial matches are not searched then."""
    recorded: int
    """How many inputs were recorded at all."""
    seen: list[Evidence] = field(default_factory=list)
    """Inputs holding it whole."""
    absent: list[Evidence] = field(default_factory=list)
    """Inputs without it (with the best partial match when none holds it)."""
    missing: list[str] = field(default_factory=list)
    """Inputs not recorded, or redacted, that might hold it."""
    unsure: list[tuple[ClauseMatch, ModelCall]] = field(default_factory=list)
    """Inputs holding it only if an ambiguous date ("01/03/2026") is read one way."""
    best: tuple[ClauseMatch, ModelCall] | None = None
    """The longest partial match, when no input holds it."""

    def add(self, ctx: CheckContext, index: int, call: ModelCall, match: ClauseMatch | None) -> None:
        """Note what one model input shows (``match``: the whole-clause search, None: not recorded)."""
        if match is None:
            self.missing.append(_unrecorded(ctx, call))
        elif match.found:
            note = f"{self.source} is in the model input: {match.excerpt!r}"
            self.seen.append(Evidence(span_id=call.span_id, note=note))
        elif self.settled:
            self.absent.append(Evidence(span_id=call.span_id, note="not in this model input"))
        elif match.ambiguous:
            self.unsure.append((match, call))
        else:
            self.add_partial(ctx, index, call)

    def add_partial(self, ctx: CheckContext, index: int, call: ModelCall) -> None:
        """Note how much of the clause an input holds, keeping the best match."""
        match = find_clause(ctx.hay(index, call), self.clause)
        if self.best is None or match.matched > self.best[0].matched:
            self.best = (match, call)
        note = _partial_note(match, len(ctx.hay(index, call).text))
        if call.input_redacted:
            self.missing.append(f"model input of span {call.span_id} (redacted)")
            self.absent.append(Evidence(span_id=call.span_id, note=f"input partly redacted; {note}"))
        elif call.input_partial:
            why = next(
                (
                    g.detail
                    for g in ctx.task.gaps
                    if g.span_id == call.span_id and g.kind == "model_input_truncated"
                ),
                "a message was recorded without its content",
            )
            missing = f"model input of span {call.span_id} ({why})"
            self.missing.append(missing)
            self.absent.append(Evidence(span_id=call.span_id, note=f"input partly recorded; {note}"))
        else:
            self.absent.append(Evidence(span_id=call.span_id, note=f"not in this model input; {note}"))


def _unrecorded(ctx: CheckContext, call: ModelCall) -> str:
    """What is missing when a model call's input was not recorded (or redacted), with the switch; or what
    the request sent when it was recorded holding no text (no switch records more)."""
    empty = next(
        (g for g in ctx.task.gaps if g.kind == "model_input_empty" and g.span_id == call.span_id), None
    )
    if empty is not None:
        return f"model input of span {call.span_id} ({empty.detail})"
    why = "redacted" if call.input_redacted else "content capture was off"
    kind = "model_input_redacted" if call.input_redacted else "model_input_not_recorded"
    switch = recording_switch(ctx.task, kind, call.span_id)
    return f"model input of span {call.span_id} ({why}{switch})"


def _scan(ctx: CheckContext, clause: str, source: str, skip: frozenset[str]) -> _Scan:
    """What the inputs of the model calls show of ``clause``, but those of the calls in ``skip``."""
    calls = [(i, call) for i, call in enumerate(ctx.task.model_calls) if call.span_id not in skip]
    exact = [
        find_clause(ctx.hay(i, call), clause, partial=False) if call.input_recorded else None
        for i, call in calls
    ]
    scan = _Scan(
        clause,
        source,
        settled=any(x is not None and x.found for x in exact),
        recorded=sum(x is not None for x in exact),
    )
    for (i, call), match in zip(calls, exact, strict=True):
        scan.add(ctx, i, call, match)
    return scan


def check(ctx: CheckContext, m: Material) -> StageResult:
    """Did the clause (or, without one, the retrieved content) of ``m`` reach a model input? Looks
    for it whole, then split across two retrieved chunks, then under one reading of an ambiguous
    date; a failure names the best partial match and what dropped the material."""
    hits = ctx.hits(m)
    label = material_label(m.doc_id, m.version)
    sought = _sought(m, hits)
    if sought is None:
        wanted = f"a clause for {label} in the ticket (or the retrieved document's content in the trace)"
        return stage_result(
            "in_context", "unconfirmed", "nothing to look for in the model input", missing=[wanted]
        )
    clause, source = sought
    calls = ctx.task.model_calls
    if not calls:
        wanted = "a model (LLM) span in the trace"
        return stage_result("in_context", "unconfirmed", "the trace records no model call", missing=[wanted])
    found, scan, after = _held(ctx, m, clause, source, label)
    if found is not None:
        return found
    if scan.unsure:
        return _unsure(scan, source, label)
    if scan.missing:
        return _not_all_recorded(scan, len(calls), label)
    unread = _retrieved_after_every_call(ctx, m) or _answering_call_recorded(ctx)
    if unread is not None:
        return stage_result("in_context", "unconfirmed", unread, evidence=scan.absent, missing=[unread])
    other_part = _returned_without_clause(ctx, m, hits, label)
    if other_part is not None:
        detail, missing = other_part
        return stage_result("in_context", "unconfirmed", detail, evidence=scan.absent, missing=[missing])
    return _absent(ctx, m, scan, source, label, after)


def _returned_without_clause(
    ctx: CheckContext, m: Material, hits: Hits, label: str
) -> tuple[str, str] | None:
    """When the manifest's text of the material shows the clause in a part of the version no returned text
    covers — every text of the material the retrievals returned recorded, each a passage of the manifest's
    text, none reaching into the clause — what says the clause's absence from the model inputs is no
    drop: the retriever returned other parts of the version (chunks of one document, each naming it), never
    the clause. None otherwise: a returned text may hold the clause, or be one cut short inside it (a budget
    cut), or the trace and manifest do not show which part of the version was returned."""
    if m.clause is None or not hits.exact or any(not doc.content for _, doc in hits.exact):
        return None
    texts = {_norm(doc.content or "") for _, doc in hits.exact}
    wholes = [_norm(e.content) for e in ctx.entries(m) if e.content]
    if not wholes or not all(_clause_apart(whole, m.clause, texts) for whole in wholes):
        return None
    ranks = ", ".join(str(rank(doc)) for _, doc in hits.exact)
    detail = (
        f"{label} was returned (rank {ranks}), but the manifest's text of it holds the clause in a part no"
        " returned text covers (a chunk not returned), so the model input's lacking it shows no drop"
    )
    return detail, f"a returned text of {label} holding the clause (those returned hold other parts of it)"


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _clause_apart(whole: str, clause: str, texts: set[str]) -> bool:
    """Whether ``whole`` (a version's text) holds ``clause`` and every one of ``texts`` (passages returned)
    lies in it, no occurrence of either overlapping an occurrence of the other."""
    covered: list[tuple[int, int]] = []
    for text in texts:
        at = whole.find(text)
        if at < 0:
            return False  # not a passage of this text as the manifest words it: which part it is, unknown
        while at >= 0:
            covered.append((at, at + len(text)))
            at = whole.find(text, at + 1)
    found = False
    offset = 0
    while (match := find_clause(whole[offset:], clause, partial=False)).found:
        if match.start is None or match.end is None:
            return False
        start, end = offset + match.start, offset + match.end
        if any(a < end and start < b for a, b in covered):
            return False
        found, offset = True, end
    return found


def _held(
    ctx: CheckContext, m: Material, clause: str, source: str, label: str
) -> tuple[StageResult | None, _Scan, list[Evidence]]:
    """The result when an input that counts holds the material (pass) or one that may not does (unconfirmed);
    else None, what the inputs that count show, and notes on the calls made after the answering call that
    hold it (they do not count)."""
    scan, split = _search(ctx, m, clause, source, frozenset())
    held = split or scan.seen
    if not held:
        return None, scan, []
    ans = _open(ctx, held)
    later = _made_after(ctx, ans, held) if ans is not None else {}
    after: list[Evidence] = []
    if later:
        # Only calls made after the answering call hold it: whether it reached the answer is in the others,
        # searched again without them (the clause may be there split across two chunks).
        after = [e.model_copy(update={"note": f"{e.note} — {later.get(e.span_id or '', '')}"}) for e in held]
        scan, split = _search(ctx, m, clause, source, frozenset(later))
        held = split or scan.seen
        if not held:
            return None, scan, after
        ans = _open(ctx, held)
    if ans is not None:
        return _not_reached(ctx, ans, held, source, label), scan, after
    calls = ctx.task.model_calls
    if split:
        detail = (
            f"{source} of {label}, split across two retrieved chunks, reached the model input"
            f" of {len(split)} of {len(calls)} model calls"
        )
        return stage_result("in_context", "pass", detail, evidence=split), scan, after
    detail = f"{source} of {label} reached the model input of {len(scan.seen)} of {len(calls)} model calls"
    return stage_result("in_context", "pass", detail, evidence=[*scan.seen, *scan.absent]), scan, after


def _search(
    ctx: CheckContext, m: Material, clause: str, source: str, skip: frozenset[str]
) -> tuple[_Scan, list[Evidence] | None]:
    """The inputs holding the clause whole, else split across two retrieved chunks (but those of ``skip``)."""
    scan = _scan(ctx, clause, source, skip)
    split = None if scan.seen or m.clause is None else _split_in_input(ctx, m.clause, ctx.hits(m), skip)
    return scan, split


def _ids(held: list[Evidence]) -> set[str]:
    return {e.span_id for e in held if e.span_id is not None}


def _open(ctx: CheckContext, held: list[Evidence]) -> Answering | None:
    """None when the calls whose input holds the material (``held``) show it reached the call that wrote the
    answer: the call the answer was read from holds it (most traces: no chain is worked out), or every call
    that may have written it does or a call it continues does; else the calls that may have written it."""
    ids = _ids(held)
    if ctx.task.final_answer_span_id in ids:
        return None
    ans = answering(ctx.task)
    holding = [call for call, chain in zip(ans.calls, ans.chains, strict=True) if chain & ids]
    return None if len(holding) == len(ans.calls) else ans


def _made_after(ctx: CheckContext, ans: Answering, held: list[Evidence]) -> dict[str, str]:
    """The calls made after the call that wrote the answer (span id: why they do not count) when only such
    calls hold the material and the trace says which call that was; else empty."""
    if not ans.known:
        return {}
    answer = ans.calls[0]
    made_after = {
        call.span_id: f"made after the call that wrote the answer ({answer.span_id}): not its input"
        for call in ctx.task.model_calls
        if _started_after(call, answer)
    }
    return made_after if _ids(held) <= made_after.keys() else {}


def _not_reached(
    ctx: CheckContext, ans: Answering, held: list[Evidence], source: str, label: str
) -> StageResult:
    """Unconfirmed: calls whose input holds the material (``held``) do not show it reached the call that wrote
    the answer — that call is open, or a call before it holds it that it does not continue (a sub-agent, a
    compression or rewrite step: its reply may or may not have carried the material on)."""
    ids = _ids(held)
    named = _named(call.span_id for call in ctx.task.model_calls if call.span_id in ids)
    if not ans.known:
        lacking = _named(
            call.span_id for call, chain in zip(ans.calls, ans.chains, strict=True) if not chain & ids
        )
        detail = (
            f"{source} of {label} reached the model input of {named}, and the trace does not say which call's"
            f" reply the user got: that of {lacking} (which no later call continues) may be the answer, and"
            " neither its input nor that of a call it continues (re-sends the messages of, adding only tool"
            " steps) holds it"
        )
        return stage_result("in_context", "unconfirmed", detail, missing=[RECORD_ANSWER])
    answer = ans.calls[0]
    detail = (
        f"{source} of {label} reached the model input of {named} but not that of the call that"
        f" wrote the answer ({answer.span_id}) nor of a call it continues: the trace does not show whether"
        " that call's reply carried it on (a sub-agent's, a compression or rewrite step's) or the material"
        " was dropped before the answer"
    )
    wanted = f"the model input of the call that wrote the answer ({answer.span_id}) holding {source} or not"
    return stage_result("in_context", "unconfirmed", detail, missing=[wanted])


def _named(span_ids: Iterable[str]) -> str:
    """``model call X`` or ``model calls X, Y``."""
    ids = list(span_ids)
    return f"model call{'s' if len(ids) > 1 else ''} {', '.join(ids)}"


def _started_after(call: ModelCall, answer: ModelCall) -> bool:
    """Whether ``call`` started after ``answer`` did (then nothing it returned was in ``answer``'s input)."""
    return (
        call.start_time is not None and answer.start_time is not None and call.start_time > answer.start_time
    )


def _not_all_recorded(scan: _Scan, calls: int, label: str) -> StageResult:
    """Unconfirmed: no recorded input holds the clause, and some inputs were not recorded."""
    if not scan.recorded:
        detail = f"the model input was not recorded ({calls} model call{'s' if calls > 1 else ''})"
    else:
        detail = (
            f"{scan.source} of {label} is not in any recorded model input, and not every input was recorded"
        )
    return stage_result("in_context", "unconfirmed", detail, evidence=scan.absent, missing=scan.missing)


def _unsure(scan: _Scan, source: str, label: str) -> StageResult:
    """Unconfirmed: the clause is in an input only under one reading of an ambiguous date."""
    ev = [Evidence(span_id=call.span_id, note=_ambiguous_note(mt, source)) for mt, call in scan.unsure]
    first = scan.unsure[0][0].ambiguous[0]
    detail = (
        f"{source} of {label} is in the model input only if {first.text!r} is read {_order(first)};"
        " the trace does not say which date format the input used"
    )
    settle = [_ambiguous_missing(call, mt) for mt, call in scan.unsure]
    return stage_result(
        "in_context", "unconfirmed", detail, evidence=[*ev, *scan.absent], missing=[*settle, *scan.missing]
    )


def _absent(
    ctx: CheckContext, m: Material, scan: _Scan, source: str, label: str, after: list[Evidence]
) -> StageResult:
    """Fail: every input was recorded and none holds the clause; what dropped it, and the best match.
    ``after``: the calls made after the answering call whose input holds it (they cannot have given it)."""
    hits = ctx.hits(m)
    best = scan.best
    absent = scan.absent
    drops = _drop_notes(ctx, m)
    detail = f"{source} of {label} is in none of the {scan.recorded} recorded model inputs"
    if after:
        held = ", ".join(e.span_id or "" for e in after)
        detail += f" up to the call that wrote the answer (model call {held}, made after it, was sent it)"
    if hits.exact:
        detail += " although the retriever returned it"
    if best is not None and best[0].matched:
        detail += f"; best partial match {best[0].matched}/{best[0].total} tokens in span {best[1].span_id}"
        if best[0].differs is not None:
            text, wanted = best[0].differs
            detail += f", where the input has {text!r} for the clause's {wanted!r}"
    return stage_result("in_context", "fail", detail, evidence=[*drops, *absent, *after])


_SPLIT_CHUNKS = 16


def _answering_call_recorded(ctx: CheckContext) -> str | None:
    """None when the model call that wrote the answer is among the recorded ones; else what is missing.

    "Not in the model input" is concluded only about the input of the call that answered: when the
    last recorded call asked for a tool (no text out, or beside text that is not the answer) or no recorded
    output is the answer, the call that read the tool's result and answered was not recorded, and its input
    may hold the clause.
    """
    task = ctx.task
    calls = task.model_calls
    if task.final_answer_span_id is not None and any(c.span_id == task.final_answer_span_id for c in calls):
        return None
    wanted = "the model call that wrote the answer (the LLM span after the last tool call)"
    if _asked_for_tool(calls[-1], task.final_answer):
        return f"{wanted}: the last recorded model call asked for a tool and no recorded call answered"
    if _output_of_none(task.final_answer, calls):
        return f"{wanted}: the answer is not the output of any recorded model call"
    return None


def _retrieved_after_every_call(ctx: CheckContext, m: Material) -> str | None:
    """What is missing when every search that returned the material started after the last recorded model
    call did: no recorded call can have read its result, so a call that did was not recorded, and "not in
    the model input" would be concluded about inputs that never could have held it."""
    last = ctx.task.model_calls[-1].start_time
    starts = [rc.start_time for rc, _ in ctx.hits(m).exact]
    if last is None or not starts or any(start is None or start <= last for start in starts):
        return None
    return (
        "the model call that read the search's result (an LLM span after the retrieval): every search that"
        " returned the material started after the last recorded model call"
    )


def _asked_for_tool(call: ModelCall, final_answer: str | None) -> bool:
    """The call's output is a tool request, not text — or, of a call that returned several choices, one
    choice is (the application may have followed it: then the call that read the tool's result answered) —
    or it asked for a tool beside its text, in one message or choice or another (``tool_requests``: the text
    may be what it said before the tool ran), and the answer is not known to be that text (smolagents' and
    BeeAI's final_answer tool is asked for beside the answer the root records)."""
    requests = [m for m in call.output_messages if m.tool_calls]
    if call.choices > 1 and any(not m.content for m in requests):
        return True
    if requests and call.output_text is None:
        return True
    return bool(tool_requests(call)) and not _wrote(final_answer, call)


def _wrote(final_answer: str | None, call: ModelCall) -> bool:
    """Whether the answer is known and is one of the call's replies."""
    return bool(final_answer) and flat(final_answer or "") in replies(call)


def _output_of_none(final_answer: str | None, calls: Sequence[ModelCall]) -> bool:
    """The final answer is known, outputs were recorded, and none of them is it (or holds it, or is
    held in it)."""
    answer = flat(final_answer or "")
    # Every choice of a call asked for several: the root's answer may be any of them.
    outputs = [text for call in calls for text in replies(call)]
    if not answer or not outputs:
        return False
    return not any(o and (o in answer or answer in o) for o in outputs)


def _split_in_input(
    ctx: CheckContext, clause: str, hits: Hits, skip: frozenset[str]
) -> list[Evidence] | None:
    """Evidence that the clause reached a model input in two parts: the end of one retrieved chunk
    of the material and the start of another (a splitter cut the clause), both in one input."""
    chunks = _distinct_chunks(hits)
    for (ca, a, a_text), (cb, b, b_text) in ((x, y) for x in chunks for y in chunks if x is not y):
        parts = split_clause(a_text, b_text, clause)
        if parts is None:
            continue
        where = f"chunks at rank {rank(a)} and {rank(b)}"
        if ca.span_id != cb.span_id:
            where += f" (spans {ca.span_id} and {cb.span_id})"
        found = _inputs_holding_both(ctx, parts, where, skip)
        if found:
            return found
    return None


def _distinct_chunks(hits: Hits) -> list[tuple[RetrievalCall, Document, str]]:
    """The material's retrieved chunks with content, each content once, at most ``_SPLIT_CHUNKS``."""
    chunks: list[tuple[RetrievalCall, Document, str]] = []
    for rc, doc in (*hits.exact, *hits.unknown):
        if doc.content and all(doc.content != text for _, _, text in chunks):
            chunks.append((rc, doc, doc.content))
    return chunks[:_SPLIT_CHUNKS]


def _inputs_holding_both(
    ctx: CheckContext, parts: tuple[str, str], where: str, skip: frozenset[str]
) -> list[Evidence]:
    """A note for each recorded model input holding both parts of a clause split between the chunks
    ``where`` names."""
    found: list[Evidence] = []
    for i, call in enumerate(ctx.task.model_calls):
        if not call.input_recorded or call.span_id in skip:
            continue
        hay = ctx.hay(i, call)
        first, second = (find_clause(hay, part, partial=False) for part in parts)
        if first.found and second.found:
            note = (
                f"the clause is split between retrieved {where}; both parts are in the model input:"
                f" {first.excerpt!r} … {second.excerpt!r}"
            )
            found.append(Evidence(span_id=call.span_id, note=note))
    return found


def _ident_matches(ident: str, m: Material) -> bool:
    doc, _, version = ident.partition("@")
    if doc != m.doc_id:
        return False
    return not (m.version and version) or norm_version(version) == norm_version(m.version)


def _drop_notes(ctx: CheckContext, m: Material) -> list[Evidence]:
    return [*_assembly_drops(ctx, m), *_reranker_drops(ctx, m)]


def _assembly_drops(ctx: CheckContext, m: Material) -> Iterator[Evidence]:
    """The context assemblies that dropped the material, with their reasons."""
    for ca in ctx.task.context_assemblies:
        for ident in ca.dropped:
            if not _ident_matches(ident, m):
                continue
            reason = ca.dropped_reasons.get(ident)
            why = f" ({reason})" if reason else ""
            yield Evidence(span_id=ca.span_id, note=f"context assembly dropped {ident}{why}")


def _reranker_drops(ctx: CheckContext, m: Material) -> Iterator[Evidence]:
    """The rerankings that received the material and kept other documents but not it."""
    for rr in ctx.task.rerankings:
        given = any(doc_match(d, m) == "exact" for d in rr.input_documents)
        kept = any(doc_match(d, m) == "exact" for d in rr.output_documents)
        if given and not kept and rr.output_documents:
            yield Evidence(span_id=rr.span_id, note=f"the reranker received {m.doc_id} and did not keep it")


def fault(_ctx: CheckContext, _m: Material, _result: StageResult) -> Verdict:
    """The verdict a failed ``in_context`` stage gives."""
    return "dropped_in_context"
