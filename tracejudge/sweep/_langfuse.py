"""Feedback for ``ticket draft --langfuse-score NAME``: the comment of that Langfuse score on the trace,
read through tracejudge's own Langfuse API client (``/v3/scores``, else ``/v2/scores``)."""

from __future__ import annotations

from typing import Any

from tracejudge._errors import InputError

__all__ = ["langfuse_feedback"]


def _text(score: dict[str, Any]) -> str:
    comment = score.get("comment")
    if isinstance(comment, str) and comment.strip():
        return comment.strip()
    # An annotation's free-text (TEXT) score carries the note as its value.
    value = score.get("stringValue") if score.get("stringValue") is not None else score.get("value")
    if score.get("dataType") == "TEXT" and isinstance(value, str):
        return value.strip()
    return ""


def _score_rows(trace_id: str, name: str, api: Any) -> list[dict[str, Any]]:
    """The scores named ``name`` on the trace (``/v3/scores``, else ``/v2/scores``), through ``api`` or
    a client of tracejudge's own (closed after)."""
    from tracejudge.write import LangfuseApi, LangfuseCredentials

    own = api is None
    client = LangfuseApi(LangfuseCredentials.from_env()) if api is None else api
    try:
        params = {"traceId": trace_id, "name": name, "limit": 100}
        page = client.get("/v3/scores", params, allow_404=True)
        if page is None:
            page = client.get("/v2/scores", params)
    finally:
        if own:
            client.close()
    return [r for r in (page.get("data") or []) if isinstance(r, dict)] if isinstance(page, dict) else []


def langfuse_feedback(trace_id: str, name: str, api: Any = None) -> str:
    """The newest comment of the score ``name`` on trace ``trace_id`` (Langfuse credentials from the
    environment unless ``api`` is given). Raises :class:`InputError` when there is none."""
    rows = _score_rows(trace_id, name, api)
    if not rows:
        raise InputError(
            f"trace {trace_id} has no Langfuse score named {name!r}",
            hint="check the score name in Langfuse (the feedback widget's or annotation's score), or give"
            " the feedback as --feedback TEXT",
        )
    rows.sort(key=lambda r: str(r.get("timestamp") or ""), reverse=True)
    text = next((t for t in map(_text, rows) if t), None)
    if text is None:
        raise InputError(
            f"the Langfuse score {name!r} on trace {trace_id} has no comment",
            hint="give the feedback as --feedback TEXT",
        )
    return text
