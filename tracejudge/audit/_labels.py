"""Labelled items: the labels JSONL (DESIGN 5.6), labels from Langfuse annotation scores, the
held-out split and the task records the judge sees."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tracejudge._errors import InputError, StoreDamageError
from tracejudge._inputfile import json_lines, read_input
from tracejudge.schema import Document, LabelItem, RawSpan, RetrievalCall, TaskRecord, ToolCall
from tracejudge.store import Store

_HOLDOUT_PREFIX = b"tracejudge:holdout:v1\0"
_LABEL_WORDS = {
    "pass": "pass",
    "fail": "fail",
    "borderline": "borderline",
    "true": "pass",
    "false": "fail",
    "1": "pass",
    "0": "fail",
    "correct": "pass",
    "incorrect": "fail",
    "good": "pass",
    "bad": "fail",
}
_HINT = 'each line: {"id", "input", "output", "label": "pass"|"fail"} (optional "context", "rater", "prompt")'


@dataclass(frozen=True)
class LabelSet:
    """Labelled items as read, with the labels' definition and where they came from."""

    items: tuple[LabelItem, ...]
    """Every line (an id labelled by two raters appears twice)."""
    definition: str = ""
    """What the labels' pass means."""
    source: str = ""
    """Path or ``langfuse:SCORE``."""
    sha256: str = ""
    """Hash of the labels as read."""
    warnings: tuple[str, ...] = field(default=())
    """Lines (or, for Langfuse scores, stored traces) skipped and why."""


def item_key(item: LabelItem) -> str:
    """Identity of a labelled item for tuning marks: an edited item is a new item."""
    canon = json.dumps([item.id, item.input, item.output], ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()[:32]


def in_holdout(item_id: str, fraction: float) -> bool:
    """Deterministic split by id hash; a larger fraction contains a smaller one."""
    digest = hashlib.sha256(_HOLDOUT_PREFIX + item_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def normalize_label(value: Any) -> str | None:
    """``pass``/``fail``/``borderline`` from the spellings people and Langfuse use (bools, 1/0)."""
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, int | float) and value in (0, 1):
        return "pass" if value == 1 else "fail"
    if isinstance(value, str):
        return _LABEL_WORDS.get(value.strip().lower())
    return None


def _line_item(data: dict[str, Any], *, source: str, n: int) -> LabelItem:
    """The labelled item of one labels line, or an error naming the line."""
    label = normalize_label(data.get("label"))
    if label is None:
        raise InputError(
            f"{source}:{n}: label {data.get('label')!r} is not pass, fail or borderline", hint=_HINT
        )
    data = {**data, "label": label, "id": str(data.get("id", ""))}
    if not data["id"]:
        raise InputError(f"{source}:{n}: the item has no id", hint=_HINT)
    known = set(LabelItem.model_fields)
    try:
        return LabelItem.model_validate({k: v for k, v in data.items() if k in known})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{source}:{n}: {where}: {first['msg']}", hint=_HINT) from exc


def parse_labels(text: str, *, source: str = "<labels>") -> LabelSet:
    """Read labels JSONL. A line ``{"definition": "..."}`` (no id) states what pass means."""
    items: list[LabelItem] = []
    definition: list[str] = []
    for n, data in json_lines(text, source=source, hint=_HINT):
        if not isinstance(data, dict):
            raise InputError(f"{source}:{n}: a line must be a JSON object", hint=_HINT)
        if "id" not in data and "definition" in data:
            definition.append(str(data["definition"]))
        else:
            items.append(_line_item(data, source=source, n=n))
    if not items:
        raise InputError(f"{source}: no labelled items", hint=_HINT)
    return LabelSet(
        items=tuple(items),
        definition="\n".join(definition),
        source=source,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


def load_labels(path: str | Path, *, definition: str | Path | None = None) -> LabelSet:
    """Read a labels file; ``definition`` is a side file stating what the labels' pass means."""
    p = Path(path)
    labels = parse_labels(read_input(p, "labels", "--labels"), source=str(p))
    if definition is not None:
        extra = read_input(Path(definition), "definition", "--definition").strip()
        joined = "\n".join(t for t in (labels.definition, extra) if t)
        labels = LabelSet(labels.items, joined, labels.source, labels.sha256, labels.warnings)
    return labels


def _docs(context: Any) -> list[Document]:
    if context is None:
        return []
    entries = context if isinstance(context, list) else [context]
    docs: list[Document] = []
    for i, e in enumerate(entries):
        if isinstance(e, dict):
            docs.append(
                Document(
                    doc_id=str(e.get("doc_id") or e.get("id") or f"context-{i}"),
                    version=str(e["version"]) if e.get("version") is not None else None,
                    content=str(e.get("content") or e.get("text") or ""),
                    position=i,
                )
            )
        else:
            docs.append(Document(doc_id=f"context-{i}", content=str(e), position=i))
    return docs


def to_task(item: LabelItem) -> TaskRecord:
    """The task record the judge and checks see for a labelled item."""
    return task_from(
        item.trace_id or item.id,
        input=item.input,
        output=item.output,
        context=item.context,
        tool_calls=item.tool_calls,
    )


def task_from(
    trace_id: str,
    *,
    input: str | None,
    output: str | None,
    context: Any = None,
    tool_calls: Sequence[dict[str, Any]] = (),
) -> TaskRecord:
    """A task record from plain parts: context as text or documents, tool calls as dicts."""
    docs = _docs(context)
    retrievals = (RetrievalCall(span_id="context", documents=tuple(docs)),) if docs else ()
    tools = tuple(
        ToolCall(
            span_id=f"tool-{i}",
            name=str(t.get("name", "")),
            arguments=t.get("arguments"),
            result=t.get("result"),
        )
        for i, t in enumerate(tool_calls)
    )
    return TaskRecord(
        trace_id=trace_id, input=input, final_answer=output, retrievals=retrievals, tool_calls=tools
    )


def group_by_id(items: Iterable[LabelItem]) -> tuple[list[str], dict[str, list[LabelItem]], list[str]]:
    """(ids in first-seen order, the items of each id, raters in first-seen order)."""
    order: list[str] = []
    groups: dict[str, list[LabelItem]] = {}
    raters: list[str] = []
    for it in items:
        if it.id not in groups:
            order.append(it.id)
            groups[it.id] = []
        groups[it.id].append(it)
        r = it.rater or "rater"
        if r not in raters:
            raters.append(r)
    return order, groups, raters


_LABEL_SOURCES = ("ANNOTATION", "API", "EXTERNAL")
_RATER_KEYS = ("author_user_id", "authorUserId", "source")


def _score_label(score: dict[str, Any], score_name: str, threshold: float | None) -> str | None:
    """The label a Langfuse score gives, when it is named ``score_name``, comes from a labelling
    source and reads as pass/fail/borderline (numbers against ``threshold``)."""
    if score.get("name") != score_name:
        return None
    if str(score.get("source") or "ANNOTATION").upper() not in _LABEL_SOURCES:
        return None
    value = score.get("value")
    if value is None:
        value = score.get("string_value") or score.get("stringValue")
    label = normalize_label(value)
    if label is None and isinstance(value, int | float) and threshold is not None:
        return "pass" if value >= threshold else "fail"
    return label


def _scored_item(task: TaskRecord, score: dict[str, Any], label: str) -> LabelItem:
    """The labelled item of a trace, its rater the score's author (or source)."""
    prompts = sorted({m.prompt for m in task.model_calls if m.prompt})
    docs = [
        {"doc_id": d.doc_id, "version": d.version, "content": d.content}
        for r in task.retrievals
        for d in r.documents
    ]
    return LabelItem(
        id=task.trace_id,
        trace_id=task.trace_id,
        input=task.input,
        output=task.final_answer,
        context=docs or None,
        label=label,
        rater=str(next((score[k] for k in _RATER_KEYS if score.get(k)), "annotator")),
        prompt=prompts[-1] if prompts else None,
        tool_calls=tuple(
            {"name": t.name, "arguments": t.arguments, "result": t.result} for t in task.tool_calls
        ),
    )


def labels_from_scores(
    traces: Sequence[tuple[TaskRecord, Sequence[dict[str, Any]]]],
    score_name: str,
    *,
    threshold: float | None = None,
) -> list[LabelItem]:
    """Label items from Langfuse human annotation scores kept on pulled traces.

    Each trace comes with its scores (``{"name", "value", "source", "comment", ...}``); a score named
    ``score_name`` from an ``ANNOTATION`` source (or any source when none is marked) becomes a label.
    Numeric values pass at or above ``threshold`` (default: 1 for 0/1 scores)."""
    labelled = ((task, s, _score_label(s, score_name, threshold)) for task, scores in traces for s in scores)
    return [_scored_item(task, s, label) for task, s, label in labelled if label is not None]


def _stored_scores(spans: Sequence[RawSpan]) -> list[dict[str, Any]]:
    """The Langfuse scores kept on a trace's spans (``langfuse.scores``, a list or its JSON text)."""
    scores: list[dict[str, Any]] = []
    for s in spans:
        value = s.attributes.get("langfuse.scores")
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if isinstance(value, list):
            scores.extend(v for v in value if isinstance(v, dict))
    return scores


def _task_or_none(spans: Sequence[RawSpan]) -> TaskRecord | None:
    """The trace's task record; None for a trace that does not normalize (it carries no label)."""
    from tracejudge.normalize import normalize

    try:
        return normalize(spans)
    except (ValueError, TypeError, KeyError):
        return None


def langfuse_labels(store: Store, score_name: str, *, threshold: float | None = None) -> LabelSet:
    """Labels from Langfuse human annotation scores on traces pulled with ``collect langfuse`` (kept as the
    ``langfuse.scores`` attribute of the trace's root span)."""
    pairs: list[tuple[TaskRecord, Sequence[dict[str, Any]]]] = []
    lost: list[str] = []
    for trace_id in store.iter_trace_ids():
        try:
            spans = store.get_spans(trace_id)
        except StoreDamageError as exc:
            # Reported beside the labels, as a skipped line is: the calibration rests on the rest.
            lost.append(f"trace {trace_id} skipped: {exc.reason}")
            continue
        scores = _stored_scores(spans)
        if not any(s.get("name") == score_name for s in scores):
            continue
        task = _task_or_none(spans)
        if task is not None:
            pairs.append((task, scores))
    items = labels_from_scores(pairs, score_name, threshold=threshold)
    source = f"langfuse:{score_name}"
    if not items:
        raise InputError(
            f"no stored trace carries a Langfuse score {score_name!r} that reads as pass/fail",
            hint="pull the annotated traces first (`tracejudge collect langfuse`), and check the score name",
        )
    canon = json.dumps([i.model_dump(mode="json") for i in items], sort_keys=True)
    return LabelSet(
        items=tuple(items),
        source=source,
        sha256=hashlib.sha256(canon.encode()).hexdigest(),
        warnings=tuple(lost),
    )
