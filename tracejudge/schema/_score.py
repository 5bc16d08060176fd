"""Scoring records: rubrics, hard checks, judge replies, item results and runs (DESIGN 5.6)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, field_validator, model_validator

from tracejudge.schema._spans import SCHEMA_VERSION, _Frozen

ScoreVerdict = Literal["pass", "fail", "indeterminate"]
JudgedPart = Literal["input", "context", "model_input", "output", "tool_calls"]
CheckType = Literal[
    "contains",
    "not_contains",
    "regex",
    "number",
    "cites",
    "tool_called",
    "tool_not_called",
    "json_schema",
    "length",
    "within_permissions",
]
CheckTarget = Literal["input", "context", "model_input", "output", "tool_calls"]
RunStatus = Literal["running", "complete", "stopped_budget", "interrupted"]
ResponseFormat = Literal["auto", "json_schema", "json_object", "none"]

JUDGED_PARTS: tuple[JudgedPart, ...] = ("input", "context", "model_input", "output", "tool_calls")


class JudgeConfig(_Frozen):
    """Which model judges, and how it is called. Part of every score's provenance."""

    model: str
    """Model name sent to the OpenAI-compatible endpoint."""
    temperature: float = 0.0
    """Sampling temperature."""
    base_url: str | None = None
    """Endpoint; None means ``OPENAI_BASE_URL`` (or the openai client's default)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the key (the key itself is never stored)."""
    max_tokens: int | None = 1024
    """Reply token cap."""
    timeout_s: float = 60.0
    """Per-request timeout; a timeout makes the criterion indeterminate."""
    max_retries: int = 2
    """Retries on 429/5xx/connection errors (Retry-After honoured); exhausted retries are indeterminate."""
    response_format: ResponseFormat = "auto"
    """``auto`` asks for structured output and falls back to plain JSON parsing when the server rejects it."""
    input_cost_per_mtok: float = 0.0
    """USD per million prompt tokens, for cost accounting and budgets."""
    output_cost_per_mtok: float = 0.0
    """USD per million completion tokens."""

    @field_validator("temperature")
    @classmethod
    def _temp(cls, v: float) -> float:
        if not 0.0 <= v <= 2.0:
            raise ValueError("temperature must be between 0 and 2")
        return v


class Criterion(_Frozen):
    """One thing the judge scores on a 0-10 scale."""

    name: str
    """Criterion name (a key in the judge's JSON reply)."""
    description: str
    """What the judge is told the criterion means."""
    threshold: float = 7.0
    """Scores at or above pass."""

    @field_validator("threshold")
    @classmethod
    def _range(cls, v: float) -> float:
        if not 0.0 <= v <= 10.0:
            raise ValueError("threshold must be on the 0-10 scale")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("criterion name must not be empty")
        return v


class _CheckBase(_Frozen):
    """What every deterministic check has; each check type adds its own fields (:data:`CheckSpec`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str
    """Check name, unique in the rubric."""
    type: CheckType
    """What kind of check (each model narrows it to its own types)."""
    target: CheckTarget = "output"
    """Which part of the task record the check reads."""
    criterion: str | None = None
    """When set, this check decides that criterion and the judge is not asked about it."""
    categories: tuple[str, ...] | None = None
    """Categories the check applies to (None: all)."""

    @model_validator(mode="before")
    @classmethod
    def _other_types_fields(cls, data: Any) -> Any:
        # Before the union every check carried every field, so files written then (regression
        # samples, dumped rubrics) hold the other types' fields at their defaults: those mean
        # nothing and are dropped. One set to something else is still refused (extra="forbid").
        if not isinstance(data, dict):
            return data
        own = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
        return {
            k: v
            for k, v in data.items()
            if k in own or k not in LEGACY_CHECK_DEFAULTS or v != LEGACY_CHECK_DEFAULTS[k]
        }

    @property
    def subject(self) -> str:
        """What the check looks for, in a word (text, pattern, tool or document), or ``""``."""
        return ""


LEGACY_CHECK_DEFAULTS: dict[str, Any] = {
    "value": None,
    "case_sensitive": False,
    "pattern": None,
    "expected": None,
    "expected_from": None,
    "op": "eq",
    "tolerance": 0.005,
    "unit": None,
    "near": None,
    "doc_id": None,
    "version": None,
    "tool": None,
    "arguments": None,
    "schema": None,
    "min": None,
    "max": None,
    "count": "chars",
    "principal": None,
}
"""Every type-specific check field at its default, as one flat check model had them (by alias): what
:func:`~tracejudge.judge.rubric_hash` adds back so that a rubric's hash is the one it always had."""


def _needs(spec: _CheckBase, *fields: str) -> None:
    for f in fields:
        if getattr(spec, f) is None:
            key = "schema" if f == "json_schema" else f
            raise ValueError(f"a {spec.type} check needs `{key}`")


def _valid_pattern(pattern: str | None) -> None:
    if pattern is not None:
        import re

        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"`pattern` is not a valid regular expression: {exc}") from exc


class ContainsCheck(_CheckBase):
    """The target contains every text of ``value`` (``contains``) or none of them (``not_contains``)."""

    type: Literal["contains", "not_contains"]
    """What kind of check."""
    value: str | list[str] | None = None
    """Text (or texts, all required / none allowed)."""
    case_sensitive: bool = False
    """Match case exactly."""

    @model_validator(mode="after")
    def _fields(self) -> ContainsCheck:
        _needs(self, "value")
        return self

    @property
    def subject(self) -> str:
        """The text(s) looked for."""
        return str(self.value) if self.value else ""


class RegexCheck(_CheckBase):
    """The target matches ``pattern``."""

    type: Literal["regex"]
    """What kind of check."""
    pattern: str | None = None
    """The pattern that must match."""
    case_sensitive: bool = False
    """Match case exactly."""

    @model_validator(mode="after")
    def _fields(self) -> RegexCheck:
        _needs(self, "pattern")
        _valid_pattern(self.pattern)
        return self

    @property
    def subject(self) -> str:
        """The pattern."""
        return self.pattern or ""


class NumberCheck(_CheckBase):
    """A number in the target compares with a reference (from the rubric or the trace)."""

    type: Literal["number"]
    """What kind of check."""
    pattern: str | None = None
    """A pattern whose first group is the number."""
    case_sensitive: bool = False
    """Match ``pattern`` case exactly."""
    expected: float | None = None
    """The reference value."""
    expected_from: dict[str, str] | None = None
    """Read the reference from the trace, ``{"tool": NAME, "path": "result.total"}`` or
    ``{"metadata": KEY}``."""
    op: Literal["eq", "ne", "lt", "le", "gt", "ge"] = "eq"
    """Comparison of the found number against the reference."""
    tolerance: float = 0.005
    """Absolute tolerance for ``eq``/``ne``."""
    unit: str | None = None
    """The unit the number must carry (``USD``, ``$``, ``EUR``, ``%``); None accepts any."""
    near: str | None = None
    """Take the number that follows this phrase (case-insensitive)."""

    @model_validator(mode="after")
    def _fields(self) -> NumberCheck:
        if self.expected is None and self.expected_from is None:
            raise ValueError("a number check needs `expected` or `expected_from`")
        _valid_pattern(self.pattern)
        return self

    @property
    def subject(self) -> str:
        """The pattern the number is read with, if any."""
        return self.pattern or ""


class CitesCheck(_CheckBase):
    """The target cites document ``doc_id`` (at ``version``)."""

    type: Literal["cites"]
    """What kind of check."""
    doc_id: str | None = None
    """The document the answer must cite."""
    version: str | None = None
    """The version it must cite."""

    @model_validator(mode="after")
    def _fields(self) -> CitesCheck:
        _needs(self, "doc_id")
        return self

    @property
    def subject(self) -> str:
        """The document."""
        return self.doc_id or ""


class ToolCheck(_CheckBase):
    """Tool ``tool`` was called (``tool_called``) or not (``tool_not_called``), with ``arguments``."""

    type: Literal["tool_called", "tool_not_called"]
    """What kind of check."""
    tool: str | None = None
    """The tool name."""
    arguments: dict[str, Any] | None = None
    """Conditions on the call's arguments (value or ``{"$gt": 5}``)."""

    @model_validator(mode="after")
    def _fields(self) -> ToolCheck:
        _needs(self, "tool")
        return self

    @property
    def subject(self) -> str:
        """The tool."""
        return self.tool or ""


class JsonSchemaCheck(_CheckBase):
    """The target is JSON valid against a JSON Schema."""

    type: Literal["json_schema"]
    """What kind of check."""
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    """The JSON Schema the target must validate against (key ``schema`` in YAML)."""

    @model_validator(mode="after")
    def _fields(self) -> JsonSchemaCheck:
        _needs(self, "json_schema")
        return self


class LengthCheck(_CheckBase):
    """The target's length is within ``min``..``max``."""

    type: Literal["length"]
    """What kind of check."""
    min: int | None = None
    """Minimum length."""
    max: int | None = None
    """Maximum length."""
    count: Literal["chars", "words"] = "chars"
    """Unit of length."""

    @model_validator(mode="after")
    def _fields(self) -> LengthCheck:
        if self.min is None and self.max is None:
            raise ValueError("a length check needs `min` or `max`")
        return self


class PermissionsCheck(_CheckBase):
    """Every retrieved document was readable by the retrieval's principal (the manifest's ACLs)."""

    type: Literal["within_permissions"]
    """What kind of check."""
    principal: str | None = None
    """Principal to check when the trace does not record one."""


CheckSpec = Annotated[
    ContainsCheck
    | RegexCheck
    | NumberCheck
    | CitesCheck
    | ToolCheck
    | JsonSchemaCheck
    | LengthCheck
    | PermissionsCheck,
    Field(discriminator="type"),
]
"""A deterministic check, decided by code: one model per check type, chosen by ``type``."""

CHECK_SPEC: TypeAdapter[CheckSpec] = TypeAdapter(CheckSpec)
"""Validates a check from data: ``CHECK_SPEC.validate_python({"name": ..., "type": ...})``."""


def check_spec(**fields: Any) -> CheckSpec:
    """A check from keyword fields, its ``type`` picking the model:
    ``check_spec(name="n", type="regex", pattern="x")``."""
    return CHECK_SPEC.validate_python(fields)


class Rubric(_Frozen):
    """A scoring rubric (DESIGN 5.6): criteria for the judge, hard checks for code."""

    schema_version: int = SCHEMA_VERSION
    """Version of this file's layout."""
    name: str
    """Rubric name."""
    version: int | str
    """Bump on any change: scores of different versions never mix."""
    description: str = ""
    """What the rubric is for."""
    judge: JudgeConfig | None = None
    """The judge; None when every criterion is decided by checks."""
    judged: tuple[JudgedPart, ...] = ("input", "context", "output")
    """Which parts of the task record the judge sees."""
    criteria: tuple[Criterion, ...] = ()
    """Criteria on the 0-10 scale."""
    checks: tuple[CheckSpec, ...] = ()
    """Deterministic checks."""
    overall_threshold: float | None = None
    """When set, the mean judge score of an item must also reach this (0-10)."""
    reminders: dict[str, str] = Field(default_factory=dict)
    """Category -> extra instruction given to the judge for items of that category."""
    category_key: str = "category"
    """Trace metadata key (or tag prefix ``KEY:``) that names an item's category."""
    repeat: int = 1
    """Judge calls per item; more than one measures stability."""
    instructions: str = ""
    """Extra instructions added to the judge's system prompt."""

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        for rule in _RUBRIC_RULES:
            if (problem := rule(self)) is not None:
                raise ValueError(problem)
        return self


# A rubric's rules across its fields, in the order they are checked: each returns what is wrong, or None.


def _duplicate_names(rubric: Rubric) -> str | None:
    named = (("criterion", [c.name for c in rubric.criteria]), ("check", [c.name for c in rubric.checks]))
    return next(
        (f"{what} names must be unique" for what, names in named if len(set(names)) != len(names)), None
    )


def _unknown_criterion(rubric: Rubric) -> str | None:
    names = {c.name for c in rubric.criteria}
    unknown = next((c for c in rubric.checks if c.criterion is not None and c.criterion not in names), None)
    return (
        None if unknown is None else f"check {unknown.name!r} decides unknown criterion {unknown.criterion!r}"
    )


def _judge_missing(rubric: Rubric) -> str | None:
    decided = {c.criterion for c in rubric.checks if c.criterion}
    if rubric.judge is None and any(c.name not in decided for c in rubric.criteria):
        return "criteria the checks do not decide need a `judge` section"
    return None


def _empty(rubric: Rubric) -> str | None:
    if not rubric.criteria and not rubric.checks:
        return "a rubric needs at least one criterion or check"
    return None


def _repeat_below_one(rubric: Rubric) -> str | None:
    return "repeat must be at least 1" if rubric.repeat < 1 else None


def _threshold_off_scale(rubric: Rubric) -> str | None:
    threshold = rubric.overall_threshold
    if threshold is not None and not 0 <= threshold <= 10:
        return "overall_threshold must be on the 0-10 scale"
    return None


_RUBRIC_RULES: tuple[Callable[[Rubric], str | None], ...] = (
    _duplicate_names,
    _unknown_criterion,
    _judge_missing,
    _empty,
    _repeat_below_one,
    _threshold_off_scale,
)


class JudgeReply(_Frozen):
    """One judge call, kept whole: what was sent (by hash), what came back, and how it was read."""

    repeat: int = 0
    """Which repeat (0-based)."""
    prompt_hash: str
    """sha256 of the exact messages sent."""
    raw: str | None = None
    """The reply text exactly as received (None when no reply arrived)."""
    reasoning: str | None = None
    """The overall reasoning the judge gave."""
    scores: dict[str, float] = Field(default_factory=dict)
    """Scores read from the reply, per criterion (only valid ones)."""
    criterion_reasoning: dict[str, str] = Field(default_factory=dict)
    """Reasoning read from the reply, per criterion."""
    error: str | None = None
    """Why the reply cannot be used: ``timeout``, ``rate_limited``, ``server_error``, ``malformed_json``,
    ``out_of_range``, ``missing_criterion``, ``refusal``, ``budget_exhausted`` ... (None: usable)."""
    error_detail: str = ""
    """Human-readable detail of the error."""
    problems: dict[str, str] = Field(default_factory=dict)
    """Per-criterion reason a score was unusable (missing, out of range, not a number)."""
    model: str | None = None
    """Model name the server reported."""
    input_tokens: int = 0
    """Prompt tokens billed (0 for a cache hit)."""
    output_tokens: int = 0
    """Completion tokens billed (0 for a cache hit)."""
    latency_ms: float = 0.0
    """Wall time of the call including retries (0 for a cache hit)."""
    cached: bool = False
    """True when the reply came from the response cache."""
    structured: bool = False
    """True when structured output (JSON schema) was requested and accepted."""


class CriterionResult(_Frozen):
    """One criterion's outcome for one item, over all repeats."""

    score: float | None
    """Aggregate score (median over usable repeats); None when indeterminate or decided by a check."""
    reasoning: str = ""
    """The judge's reasoning (first usable repeat), or the check's detail."""
    verdict: ScoreVerdict
    """Derived from the score and threshold, never from what the model says."""
    reason: str = ""
    """Why the verdict is indeterminate (or which check decided it)."""
    decided_by: str = "judge"
    """``judge`` or ``check:<name>``."""
    scores: tuple[float, ...] = ()
    """Score of each usable repeat."""
    verdicts: tuple[ScoreVerdict, ...] = ()
    """Verdict of each repeat."""
    score_range: float | None = None
    """max - min over repeats (stability)."""
    flipped: bool = False
    """True when repeats disagreed on pass/fail."""


class CheckResult(_Frozen):
    """One hard check's outcome for one item."""

    verdict: ScoreVerdict
    """pass, fail, or indeterminate when the trace lacks what the check needs."""
    detail: str = ""
    """What was found."""
    type: str = ""
    """The check type."""
    evidence: tuple[str, ...] = ()
    """Span ids or document identities behind the verdict."""


class ItemResult(_Frozen):
    """The outcome for one trace."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    run_id: str
    """The run that produced it."""
    trace_id: str
    """The scored trace."""
    span_id: str | None = None
    """The evaluated span (final-answer span, else the root), for write-back."""
    category: str = "uncategorized"
    """The item's category."""
    verdict: ScoreVerdict
    """pass only when every criterion and check passed."""
    reason: str = ""
    """Why it failed or is indeterminate."""
    criteria: dict[str, CriterionResult] = Field(default_factory=dict)
    """Per criterion."""
    checks: dict[str, CheckResult] = Field(default_factory=dict)
    """Per hard check."""
    mean_score: float | None = None
    """Mean of the judge criterion scores, when all were scored."""
    replies: tuple[JudgeReply, ...] = ()
    """Every judge reply, kept whole."""
    input_tokens: int = 0
    """Prompt tokens billed for this item."""
    output_tokens: int = 0
    """Completion tokens billed for this item."""
    cost_usd: float = 0.0
    """Cost of this item's judge calls."""
    latency_ms: float = 0.0
    """Wall time scoring the item."""
    scored_at: datetime | None = None
    """When the item was scored."""
    task_time: datetime | None = None
    """The trace's start, stamped when the item is scored: the timestamp its write-back
    scores carry, the same on every rerun, so each replaces the last (Langfuse keeps one score per
    id, name and UTC day of its timestamp) with no lookup. None when the trace had no start (or
    could not be loaded), and in items stored before store schema 5: their write-back looks up the
    time of the score already written, as before."""


class Provenance(_Frozen):
    """What produced a score: a score change with a changed judge is not an agent change."""

    rubric_name: str
    """Rubric name."""
    rubric_version: str
    """Rubric version (as text)."""
    rubric_hash: str
    """sha256 of the rubric's canonical JSON."""
    prompt_hash: str
    """sha256 of the prompt template (system prompt and reply schema, before the trace is inserted)."""
    judge_model: str | None
    """Judge model (None when only checks ran)."""
    judge_base_url: str | None = None
    """Judge endpoint host (never a key)."""
    temperature: float | None
    """Judge temperature."""
    repeat: int = 1
    """Judge calls per item."""
    tracejudge_version: str
    """tracejudge's version."""
    manifest_hash: str | None = None
    """sha256 of the index manifest the permission check read (None: no ``--manifest``)."""


class GroupSummary(_Frozen):
    """Outcome counts and statistics for a set of items (the run, one criterion, one category)."""

    n: int = 0
    """Items."""
    pass_: int = Field(default=0, alias="pass")
    """Passed."""
    fail: int = 0
    """Failed."""
    indeterminate: int = 0
    """Could not be decided."""
    pass_rate: float | None = None
    """pass / n (indeterminate counts as not passing)."""
    mean: float | None = None
    """Mean score over scored items (criteria only)."""
    min: float | None = None
    """Lowest score."""
    max: float | None = None
    """Highest score."""
    flip_rate: float | None = None
    """Share of items whose repeats disagreed (repeat > 1)."""
    p95_latency_ms: float | None = None
    """95th percentile of per-item scoring latency."""
    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RunSummary(_Frozen):
    """What a run found: overall, per criterion, per check and per category."""

    overall: GroupSummary = Field(default_factory=GroupSummary)
    """All items."""
    criteria: dict[str, GroupSummary] = Field(default_factory=dict)
    """Per criterion."""
    checks: dict[str, GroupSummary] = Field(default_factory=dict)
    """Per hard check."""
    categories: dict[str, GroupSummary] = Field(default_factory=dict)
    """Per category."""
    reasons: dict[str, int] = Field(default_factory=dict)
    """Why criteria were indeterminate, and for how many criterion results (an item with two
    undecided criteria counts twice)."""
    judge_calls: int = 0
    """Judge calls made (cache hits excluded)."""
    cache_hits: int = 0
    """Replies served from the cache."""
    cost_usd: float = 0.0
    """Total judge cost."""
    not_scored: int = 0
    """Selected items left unscored because the budget ran out."""


class RunRecord(_Frozen):
    """One scoring run; never overwritten: a rerun is a new run linked to the previous one."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's layout."""
    run_id: str
    """Run id."""
    series: str
    """Hash of rubric name + version + judge model + temperature + prompt: runs of one series compare."""
    previous_run_id: str | None = None
    """The previous run of the same series, if any."""
    rerun_of: str | None = None
    """The run whose selection this run repeats, if asked for."""
    created_at: datetime
    """When the run started."""
    finished_at: datetime | None = None
    """When it ended."""
    status: RunStatus = "running"
    """Where the run stands."""
    provenance: Provenance
    """What produced the scores."""
    selection: dict[str, Any] = Field(default_factory=dict)
    """How traces were chosen (ids, filter, sample, limit)."""
    summary: RunSummary = Field(default_factory=RunSummary)
    """Results."""
    budget: dict[str, float] = Field(default_factory=dict)
    """Budget limits in force (usd, tokens)."""
    left_waiting: int = 0
    """Items the run was left with kept as not final, their trace still arriving (DESIGN 5.5), when it was
    last recorded at rest (a local run as it ended, a shared run once no worker held or could claim an
    item): with status ``running``, the run is at rest waiting for them — not in flight, nor killed. 0
    otherwise, and once they are scored."""
