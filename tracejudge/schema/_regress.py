"""Regression samples (DESIGN 5.8), their replay runs, hygiene reports and anonymization reports."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from tracejudge.schema._score import CheckResult, CheckSpec, Criterion, CriterionResult, ScoreVerdict
from tracejudge.schema._spans import SCHEMA_VERSION, IdText, MaybeIdText, Time, _Frozen
from tracejudge.schema._triage import Material, Verdict

SampleKind = Literal["failure", "success", "reasonable_rejection", "boundary"]
SampleSplit = Literal["debug", "acceptance"]
SampleStatus = Literal["active", "retired"]
ToolMode = Literal["record", "block"]
RetrievalMode = Literal["fixed", "include"]
RunPurpose = Literal["evaluate", "debug"]
SampleOutcome = Literal["pass", "fail", "indeterminate", "flaky"]
Change = Literal["fixed", "regressed", "still_failing", "still_passing", "flaky", "new", "undecided"]
HygieneRule = Literal[
    "balance", "near_duplicate", "split_straddle", "leakage", "debug_used", "missing_material", "duplicate"
]

SAMPLE_KINDS: tuple[SampleKind, ...] = ("failure", "success", "reasonable_rejection", "boundary")


class SampleSource(_Frozen):
    """Where a sample came from, and who verified it."""

    trace_id: IdText
    """The trace the verified feedback is about."""
    observation_id: str | None = None
    """The observation (span) the feedback is about, if any."""
    ticket: MaybeIdText = None
    """Ticket id (or Langfuse score id for feedback from scores)."""
    feedback: str = ""
    """The verified report's text."""
    verified_by: str | None = None
    """Who verified it."""
    verified_at: date | datetime | None = None
    """When it was verified."""
    also: tuple[str, ...] = ()
    """Other tickets/traces that posed the very same problem (merged duplicates)."""


class SampleMessage(_Frozen):
    """One message the agent received (never the expected answer)."""

    role: Literal["system", "user", "assistant"] = "user"
    """Who said it; user turns are sent one by one on replay."""
    content: str
    """The text."""


class SampleInput(_Frozen):
    """What the agent received."""

    messages: tuple[SampleMessage, ...] = Field(min_length=1)
    """The conversation; several user turns make a multi-turn case."""
    principal: str | None = None
    """Who the agent ran as (retrieval permissions)."""


class SampleBasis(_Frozen):
    """The applicable basis, as in the ticket (DESIGN 5.2)."""

    required: tuple[Material, ...] = ()
    """Material that should have been used."""
    superseded: tuple[Material, ...] = ()
    """Stale material the agent must not rest on."""


class SampleMaterial(_Frozen):
    """One material version in the sample's environment."""

    doc_id: IdText
    """Document identity."""
    version: MaybeIdText = None
    """Version."""
    content: str
    """The text."""
    effective_from: Time | None = None
    """When it took effect."""
    effective_to: Time | None = None
    """When it stopped applying (None: still applies)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Metadata a retriever filters on."""
    acl: tuple[str, ...] | None = None
    """Principals allowed to read it (None: unrestricted)."""
    searchable: bool = True
    """Whether the index held it at the task time (what retrieval can find)."""


class FixedDocument(_Frozen):
    """A document the fixed retrieval returns (its text is the environment material's)."""

    doc_id: IdText
    """Document identity."""
    version: MaybeIdText = None
    """Version."""
    score: float | None = None
    """Score as recorded."""


class FixedRetrieval(_Frozen):
    """Fixed-retrieval results: what was recorded, plus the required material that was available."""

    query: str | None = None
    """The recorded query."""
    documents: tuple[FixedDocument, ...] = ()
    """Documents in rank order."""


class SampleTool(_Frozen):
    """A mocked tool: every call is recorded; a ``block`` tool refuses the call (and it is reported)."""

    name: str
    """Tool name."""
    mode: ToolMode = "record"
    """record: the call succeeds with ``result``; block: the call is refused."""
    result: Any = None
    """What a recorded call returns."""
    description: str = ""
    """What the tool does, for the agent."""


class SampleEnvironment(_Frozen):
    """The fixture a replay runs in."""

    task_time: Time | None = None
    """The time the task is posed at (materials' effectiveness is judged at it)."""
    materials: tuple[SampleMaterial, ...] = ()
    """The materials and what is searchable."""
    retrieval: FixedRetrieval | None = None
    """Fixed-retrieval results (None: fixed-retrieval mode is not available)."""
    tools: tuple[SampleTool, ...] = ()
    """Mocked tools."""


class SampleObserved(_Frozen):
    """What went wrong (or right) when the feedback was given."""

    verdict: Verdict | None = None
    """The triage verdict."""
    answer: str | None = None
    """The agent's answer as recorded."""
    deviation: str = ""
    """What deviated, in one line."""


class SampleExpected(_Frozen):
    """The expected behaviour: any phrasing with the right basis and actions passes."""

    behavior: str
    """For people and the judge."""
    checks: tuple[CheckSpec, ...] = ()
    """Hard checks (the scoring check types)."""
    criteria: tuple[Criterion, ...] = ()
    """Semantic criteria for the judge."""


class RegressionRecord(_Frozen):
    """What the failure ran on: versions of materials, model, prompt, retrieval, rubric."""

    model_config = ConfigDict(frozen=True, extra="allow")

    materials: dict[str, str | None] = Field(default_factory=dict)
    """doc_id -> version of the applicable basis."""
    model: str | None = None
    """Model name."""
    prompt: str | None = None
    """Prompt name@version."""
    retrieval: str | None = None
    """Retrieval configuration."""
    rubric: str | None = None
    """Rubric name@version."""


class Sample(_Frozen):
    """One regression sample (DESIGN 5.8): one YAML file in a suite folder."""

    schema_version: int = SCHEMA_VERSION
    """Version of this file's layout."""
    id: str = Field(pattern=r"^rs-[0-9a-z][0-9a-z-]*$")
    """Stable id, derived from the source trace and the basis."""
    kind: SampleKind
    """failure, success, reasonable_rejection or boundary."""
    group: str
    """Near-duplicate group; a group never straddles splits."""
    split: SampleSplit
    """debug or acceptance."""
    status: SampleStatus = "active"
    """retired samples stay in the folder for history but are not run or pushed."""
    replaces: str | None = None
    """The retired sample this one replaces."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Risk, complexity, anomaly, ..."""
    source: SampleSource
    """Where it came from."""
    input: SampleInput
    """What the agent received (never the expected answer)."""
    basis: SampleBasis = Field(default_factory=SampleBasis)
    """The applicable basis."""
    environment: SampleEnvironment = Field(default_factory=SampleEnvironment)
    """The replay fixture."""
    observed: SampleObserved = Field(default_factory=SampleObserved)
    """The observed deviation."""
    expected: SampleExpected
    """What passes."""
    record: RegressionRecord = Field(default_factory=RegressionRecord)
    """What the failure ran on."""

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value


# --- replay -----------------------------------------------------------------------------------


class ToolCallRecord(_Frozen):
    """One call the agent made to a mocked tool."""

    name: str
    """Tool name."""
    arguments: Any = None
    """Arguments as sent."""
    blocked: bool = False
    """True when the tool refused the call (mode ``block``)."""
    known: bool = True
    """False when the sample declares no such tool."""
    turn: int = 0
    """The user turn during which it was called."""


class Attempt(_Frozen):
    """One replay of one sample (one repeat)."""

    repeat: int
    """Which repeat (0-based)."""
    conversation_id: str
    """Fresh per attempt."""
    verdict: ScoreVerdict
    """pass only when every check and criterion passed."""
    reason: str = ""
    """Why it failed or is indeterminate."""
    answer: str | None = None
    """The agent's final answer."""
    turns: tuple[str, ...] = ()
    """The agent's reply to each user turn."""
    checks: dict[str, CheckResult] = Field(default_factory=dict)
    """Hard checks."""
    criteria: dict[str, CriterionResult] = Field(default_factory=dict)
    """Judge criteria (indeterminate without a judge)."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Every tool call, blocked or not."""
    blocked_calls: tuple[str, ...] = ()
    """Tools whose calls were blocked (attempted violations)."""
    never_called: tuple[str, ...] = ()
    """Declared tools never attempted."""
    retrieved: tuple[str, ...] = ()
    """``doc_id@version`` the agent reported retrieving."""
    agent_input_tokens: int = 0
    """Tokens the agent reported using (prompt)."""
    agent_output_tokens: int = 0
    """Tokens the agent reported using (completion)."""
    agent_cost_usd: float = 0.0
    """Agent cost (reported, or tokens times the given prices)."""
    judge_cost_usd: float = 0.0
    """Judge cost."""
    error: str | None = None
    """The agent raised or the endpoint failed (the attempt is indeterminate)."""


class SampleRunResult(_Frozen):
    """One sample's result in a run, over every repeat."""

    sample_id: str
    """Sample id."""
    sample_hash: str
    """Hash of the sample file's content as run (which version of the sample)."""
    kind: SampleKind
    """Sample kind."""
    split: SampleSplit
    """Sample split."""
    outcome: SampleOutcome
    """pass / fail / indeterminate over every repeat; flaky when repeats disagree on pass/fail."""
    change: Change = "new"
    """Compared with the previous run."""
    previous_outcome: SampleOutcome | None = None
    """The outcome in the previous run."""
    attempts: tuple[Attempt, ...] = ()
    """Every repeat, kept."""
    cost_usd: float = 0.0
    """Agent + judge cost over every repeat."""


class SuiteRun(_Frozen):
    """A replay run of a suite: a file in the suite's ``runs/`` folder, never overwritten."""

    schema_version: int = SCHEMA_VERSION
    """Version of this file's layout."""
    run_id: str
    """Run id (sortable)."""
    suite: str
    """Suite folder name."""
    suite_hash: str
    """Hash over the sample hashes run."""
    previous_run_id: str | None = None
    """The run this one is compared with."""
    created_at: datetime
    """When it started."""
    finished_at: datetime | None = None
    """When it ended."""
    target: str
    """``module:function`` or the endpoint URL (credentials removed)."""
    retrieval: RetrievalMode
    """fixed or include."""
    repeat: int = 1
    """Attempts per sample."""
    purpose: RunPurpose = "evaluate"
    """debug runs mark acceptance samples as seen while debugging."""
    judge_model: str | None = None
    """The judge (None: criteria were indeterminate)."""
    samples: tuple[SampleRunResult, ...] = ()
    """Per sample."""
    summary: dict[str, int] = Field(default_factory=dict)
    """Counts of outcomes and changes."""
    cost_usd: float = 0.0
    """Total agent + judge cost."""


# --- hygiene and anonymization ------------------------------------------------------------------


class Violation(_Frozen):
    """One hygiene violation."""

    rule: HygieneRule
    """Which rule."""
    message: str
    """What is wrong and what to do."""
    samples: tuple[str, ...] = ()
    """Sample ids concerned."""
    files: tuple[str, ...] = ()
    """Sample files concerned."""


class HygieneReport(_Frozen):
    """What ``regress check`` found."""

    suite: str
    """Suite folder."""
    samples: int
    """Active samples checked."""
    kinds: dict[str, int] = Field(default_factory=dict)
    """Active samples per kind."""
    splits: dict[str, int] = Field(default_factory=dict)
    """Active samples per split."""
    groups: dict[str, list[str]] = Field(default_factory=dict)
    """Group -> sample ids."""
    violations: tuple[Violation, ...] = ()
    """Everything wrong."""

    @property
    def ok(self) -> bool:
        """No violations."""
        return not self.violations


class AnonymizedCheck(_Frozen):
    """The verification of one sample: triage verdict and hard checks before and after."""

    sample_id: str
    """Anonymized sample id."""
    original_id: str
    """Original sample id (stays out of the anonymized suite)."""
    verdict_before: Verdict | None
    """Triage verdict of the observed situation, before."""
    verdict_after: Verdict | None
    """And after."""
    checks_before: dict[str, ScoreVerdict] = Field(default_factory=dict)
    """Hard checks on the observed answer, before."""
    checks_after: dict[str, ScoreVerdict] = Field(default_factory=dict)
    """And after."""
    identical: bool
    """Both the same."""


class AnonymizeReport(_Frozen):
    """What ``regress anonymize`` did."""

    out: str
    """The anonymized suite folder."""
    samples: int
    """Samples written."""
    replaced: dict[str, int] = Field(default_factory=dict)
    """Identifier kind -> distinct identifiers replaced."""
    verified: tuple[AnonymizedCheck, ...] = ()
    """Per sample."""
    mapping_file: str | None = None
    """Where the mapping was written (outside the suite), if asked."""

    @property
    def ok(self) -> bool:
        """Every sample verified identical."""
        return all(v.identical for v in self.verified)


class BuildSkip(_Frozen):
    """A source ``regress build`` could not turn into a sample, and why."""

    source: str
    """The ticket file, or ``trace_id/score_id``."""
    reason: str
    """Why (for example: no spans stored for the trace)."""


class BuildReport(_Frozen):
    """What ``regress build`` wrote."""

    out: str
    """The suite folder."""
    written: tuple[str, ...] = ()
    """Sample files written."""
    kept: tuple[str, ...] = ()
    """Sample files already there with the same id, left as they were (edits survive a rebuild)."""
    merged: dict[str, list[str]] = Field(default_factory=dict)
    """Sample id -> the other sources that posed the very same problem."""
    skipped: tuple[BuildSkip, ...] = ()
    """Sources that gave no sample."""
    kinds: dict[str, int] = Field(default_factory=dict)
    """Samples per kind."""
