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


def _criterion_score(entry: Any) -> float | str:
    """A criterion's score from its entry (an object with ``score``, or the bare score), or the name
    of the problem that makes it unusable."""
    if entry is None:
        return "missing_criterion"
    score = _score(entry.get("score") if isinstance(entry, dict) else entry)
    if score is None or math.isnan(score):
        return "not_a_number"
    if not 0.0 <= score <= 10.0:
        return "out_of_range"
    return score


def _reply_object(text: str | None) -> dict[str, Any] | ParsedReply:
    """The reply's JSON object, which has a ``criteria`` object; else the error that says why not."""
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
    if not isinstance(data.get("criteria"), dict):
        return ParsedReply(error="malformed_json", error_detail="the reply has no `criteria` object")
    return data


def parse_reply(text: str | None, criteria: Sequence[str]) -> ParsedReply:
    """Read scores for ``criteria`` from reply text. Malformed JSON, a refusal, a missing criterion,
    a score that is not a number or is outside 0-10 are each reported, and no score is invented."""
    data = _reply_object(text)
    if isinstance(data, ParsedReply):
        return data
    block: dict[str, Any] = data["criteria"]
    scores: dict[str, float] = {}
    problems: dict[str, str] = {}
    for name in criteria:
        score = _criterion_score(block.get(name))
        if isinstance(score, str):
            problems[name] = score
        else:
            scores[name] = score
    reasons = {
        name: entry["reasoning"]
        for name in criteria
        if isinstance(entry := block.get(name), dict) and isinstance(entry.get("reasoning"), str)
    }
    overall = data.get("reasoning")
    return ParsedReply(
        scores=scores,
        reasoning=reasons,
        overall=overall if isinstance(overall, str) else None,
        problems=problems,
    )
