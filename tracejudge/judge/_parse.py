"""Reading a judge reply. Anything unusable is a named problem, never a score."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_REFUSAL = re.compile(
    r"^\s*(i'?m sorry|i am sorry|sorry,|i can(?:no|')t|i cannot|i won'?t|i am unable|i'm unable|as an ai)",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """True when a reply opens the way a model declines ("I'm sorry", "I cannot", "As an AI")."""
    return _REFUSAL.search(text) is not None


@dataclass(frozen=True)
class ParsedReply:
    """What a reply said, criterion by criterion."""

    scores: dict[str, float] = field(default_factory=dict)
    reasoning: dict[str, str] = field(default_factory=dict)
    overall: str | None = None
    problems: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    error_detail: str = ""


def extract_json(text: str) -> Any:
    """The JSON a judge reply carries: the whole text, a fenced block, or the outermost ``{...}``
    inside prose. Raises ``ValueError`` when there is none (the caller decides what that means)."""
    s = text.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", s, re.DOTALL | re.IGNORECASE)
    if fence:
        s = fence.group(1)
    try:
        return json.loads(s)
    except ValueError:
        pass
    # Some models wrap the object in prose; take the outermost braces and try once more.
    start, end = s.find("{"), s.rfind("}")
    if 0 <= start < end:
        return json.loads(s[start : end + 1])
    raise ValueError("no JSON object in the reply")


def _score(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def parse_reply(text: str | None, criteria: Sequence[str]) -> ParsedReply:
    """Read scores for ``criteria`` from reply text. Malformed JSON, a refusal, a missing criterion,
    a score that is not a number or is outside 0-10 are each reported, and no score is invented."""
    if text is None or not text.strip():
        return ParsedReply(error="empty_reply", error_detail="the judge replied with no text")
    try:
        data = extract_json(text)
    except ValueError as exc:
        if is_refusal(text):
            return ParsedReply(error="refusal", error_detail=text.strip()[:200])
        return ParsedReply(error="malformed_json", error_detail=f"{exc}: {text.strip()[:120]!r}")
    if not isinstance(data, dict):
        return ParsedReply(error="malformed_json", error_detail="the reply is JSON but not an object")
    block = data.get("criteria")
    if not isinstance(block, dict):
        return ParsedReply(error="malformed_json", error_detail="the reply has no `criteria` object")
    scores: dict[str, float] = {}
    reasons: dict[str, str] = {}
    problems: dict[str, str] = {}
    for name in criteria:
        entry = block.get(name)
        if entry is None:
            problems[name] = "missing_criterion"
            continue
        raw = entry.get("score") if isinstance(entry, dict) else entry
        score = _score(raw)
        if isinstance(entry, dict) and isinstance(entry.get("reasoning"), str):
            reasons[name] = entry["reasoning"]
        if score is None or math.isnan(score):
            problems[name] = "not_a_number"
        elif not 0.0 <= score <= 10.0:
            problems[name] = "out_of_range"
        else:
            scores[name] = score
    overall = data.get("reasoning")
    return ParsedReply(
        scores=scores,
        reasoning=reasons,
        overall=overall if isinstance(overall, str) else None,
        problems=problems,
    )
