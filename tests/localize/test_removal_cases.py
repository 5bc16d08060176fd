"""Losses the removal property (test_removal_property.py) found to make a verdict more definite, each
on the recorded trace it was found on: what the trace lost is taken away here directly, and the verdict
must stay as it was or become ``unconfirmed`` (DESIGN 5.5)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from tracejudge.schema import RawSpan


def _changed(spans: list[RawSpan], key: str, change: Any) -> list[RawSpan]:
    """The spans with attribute ``key`` replaced by ``change(value)`` (removed when it returns None)."""
    out = []
    for span in spans:
        if key not in span.attributes:
            out.append(span)
            continue
        attrs = dict(span.attributes)
        value = change(attrs.pop(key))
        if value is not None:
            attrs[key] = value
        out.append(span.model_copy(update={"attributes": attrs}))
    return out


def _verdict(mk: ModuleType, spans: list[RawSpan], manifest: Any) -> str:
    loc = mk.localize(mk.normalize(spans), mk.ticket(), manifest)
    return loc.verdict + (f" ({loc.cause})" if loc.cause else "")


def test_a_message_whose_role_was_lost_may_still_be_the_request(mk: ModuleType) -> None:
    # LiteLLM under OpenInference sends the contract excerpts in the user message, so the answer's 30,000
    # RMB echoes the request and settles nothing. Without the message's role no message was the request,
    # the echo went unseen, and the answer read as agreeing: no_fault.
    spans = mk.recorded_spans("litellm_openinference_rag.pb")
    manifest = mk.policy_manifest("EU", ids="chunk")
    assert _verdict(mk, spans, manifest) == "unconfirmed"
    fewer = _changed(spans, "llm.input_messages.1.message.role", lambda _: None)
    assert mk.normalize(fewer).input is not None
    assert _verdict(mk, fewer, manifest) == "unconfirmed"
