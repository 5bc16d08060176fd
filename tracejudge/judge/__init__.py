"""The LLM judge: rubric files, the delimited prompt, reply parsing, an OpenAI-compatible client
(with a fake beside it), the reply cache and verdict derivation (DESIGN 5.6)."""

from tracejudge.judge._client import (
    Completion,
    FakeJudgeClient,
    JudgeCallError,
    JudgeClient,
    OpenAIJudgeClient,
    Transport,
    judge_transport,
)
from tracejudge.judge._judge import Judge, ReplyCache, cache_key, resolved_base_url
from tracejudge.judge._parse import ParsedReply, extract_json, is_refusal, parse_reply
from tracejudge.judge._prompt import (
    build_messages,
    material_json,
    messages_hash,
    prompt_template_hash,
    reply_schema,
)
from tracejudge.judge._rubric import load_rubric, parse_rubric, rubric_hash
from tracejudge.judge._verdict import aggregate_criterion, criterion_from_check, item_verdict

__all__ = [
    "Completion",
    "FakeJudgeClient",
    "Judge",
    "JudgeCallError",
    "JudgeClient",
    "OpenAIJudgeClient",
    "ParsedReply",
    "ReplyCache",
    "Transport",
    "aggregate_criterion",
    "build_messages",
    "cache_key",
    "criterion_from_check",
    "extract_json",
    "is_refusal",
    "item_verdict",
    "judge_transport",
    "load_rubric",
    "material_json",
    "messages_hash",
    "parse_reply",
    "parse_rubric",
    "prompt_template_hash",
    "reply_schema",
    "resolved_base_url",
    "rubric_hash",
]
