"""Where write-back goes: the one registry of targets, each saying what it writes and how its writer opens.

``triage --write-back``, ``score --write-back`` and ``regress push`` all resolve their target here, and
their help text lists the targets from here, so a new backend is one entry (see CONTRIBUTING.md).
Each factory reads the backend's settings from the environment and imports the backend lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from tracejudge._errors import InputError
from tracejudge.write._otel import EvaluationWriter
from tracejudge.write._protocol import DatasetWriter, ScoreWriter

WriteKind = Literal["scores", "events", "datasets"]
"""What a target takes: scores on traces, OTel evaluation events on spans, dataset items."""


@dataclass(frozen=True)
class Target:
    """A write-back backend: its name, a line for help text, and a factory per kind it writes."""

    name: str
    """How commands name it (``--write-back langfuse``)."""
    about: str
    """What it becomes there, for help text and errors."""
    scores: Callable[[], ScoreWriter] | None = None
    """Opens a score writer from the environment; None when the backend takes no scores."""
    events: Callable[[], EvaluationWriter] | None = None
    """Opens an evaluation-event writer; None when the backend takes no events."""
    datasets: Callable[[], DatasetWriter] | None = None
    """Opens a dataset writer; None when the backend takes no dataset items."""

    def writes(self, kind: WriteKind) -> bool:
        """Whether the target takes this kind."""
        return getattr(self, kind) is not None


def _langfuse() -> ScoreWriter:
    from tracejudge.write._langfuse import LangfuseWriter

    return LangfuseWriter.from_env()


def _langfuse_datasets() -> DatasetWriter:
    from tracejudge.write._langfuse import LangfuseWriter

    return LangfuseWriter.from_env()


def _phoenix() -> ScoreWriter:
    from tracejudge.write._phoenix import PhoenixWriter

    return PhoenixWriter.from_env()


def _otel() -> EvaluationWriter:
    from tracejudge.write._otel import OtelEvaluationWriter

    return OtelEvaluationWriter()


TARGETS: Mapping[str, Target] = MappingProxyType(
    {
        t.name: t
        for t in (
            Target(
                "langfuse",
                "Langfuse scores and dataset items (LANGFUSE_BASE_URL and the key pair)",
                scores=_langfuse,
                datasets=_langfuse_datasets,
            ),
            Target(
                "otel",
                "gen_ai.evaluation.result events on the evaluated span (OTEL_EXPORTER_OTLP_*)",
                events=_otel,
            ),
            Target(
                "phoenix",
                "Phoenix span or trace annotations (PHOENIX_COLLECTOR_ENDPOINT, PHOENIX_API_KEY)",
                scores=_phoenix,
            ),
        )
    }
)
"""Every write-back target by name."""


def target_names(*kinds: WriteKind) -> tuple[str, ...]:
    """The sorted names of the targets that take any of ``kinds``."""
    return tuple(sorted(name for name, t in TARGETS.items() if any(t.writes(k) for k in kinds)))


def targets_help(*kinds: WriteKind) -> str:
    """``langfuse, otel or phoenix``: the targets taking ``kinds``, for a command's help text."""
    names = target_names(*kinds)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def find_target(name: str, *kinds: WriteKind) -> Target:
    """The target ``name``, which must take one of ``kinds``; an :class:`InputError` naming the valid
    ones otherwise."""
    found = TARGETS.get(name)
    valid = target_names(*kinds)
    if found is None:
        raise InputError(f"unknown write-back target {name!r}", hint=f"valid targets: {', '.join(valid)}")
    if not any(found.writes(k) for k in kinds):
        raise InputError(
            f"{name} does not take {' or '.join(kinds)}", hint=f"valid targets: {', '.join(valid)}"
        )
    return found


def open_score_writer(name: str) -> ScoreWriter:
    """The score writer of target ``name``, configured from the environment."""
    factory = find_target(name, "scores").scores
    assert factory is not None  # find_target() checked
    return factory()


def open_event_writer(name: str) -> EvaluationWriter:
    """The evaluation-event writer of target ``name``, configured from the environment."""
    factory = find_target(name, "events").events
    assert factory is not None  # find_target() checked
    return factory()


def open_dataset_writer(name: str) -> DatasetWriter:
    """The dataset writer of target ``name``, configured from the environment."""
    factory = find_target(name, "datasets").datasets
    assert factory is not None  # find_target() checked
    return factory()
