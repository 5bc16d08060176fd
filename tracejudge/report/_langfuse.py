"""Langfuse score configs for tracejudge's scores, so Langfuse's own dashboards can filter on them:
the triage verdict (categorical), each criterion (numeric 0-10), each rubric's verdict (categorical)
and each hard check (boolean)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tracejudge.report._data import VERDICTS
from tracejudge.schema import Rubric, RunRecord
from tracejudge.store import Store

ScoreConfigType = Literal["NUMERIC", "CATEGORICAL", "BOOLEAN"]

_NAME = re.compile(r"[A-Za-z0-9_ .()-]{1,35}")
_SCORE_VERDICTS = ("pass", "fail", "indeterminate")


class ScoreConfigSpec(BaseModel):
    """One Langfuse score config, as tracejudge wants it."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The score name it describes (Langfuse allows 35 characters: letters, digits, ``_ .()-``)."""
    data_type: ScoreConfigType
    """NUMERIC, CATEGORICAL or BOOLEAN."""
    categories: tuple[str, ...] = ()
    """Category labels of a CATEGORICAL config, valued 0, 1, 2 ... in order."""
    min_value: float | None = None
    """Lowest value of a NUMERIC config."""
    max_value: float | None = None
    """Highest value of a NUMERIC config."""
    description: str = ""
    """Shown in Langfuse's UI."""

    def body(self) -> dict[str, Any]:
        """The ``POST /api/public/score-configs`` request body."""
        out: dict[str, Any] = {"name": self.name, "dataType": self.data_type}
        if self.data_type == "CATEGORICAL":
            out["categories"] = [{"label": c, "value": float(i)} for i, c in enumerate(self.categories)]
        if self.data_type == "NUMERIC":
            out["minValue"] = self.min_value
            out["maxValue"] = self.max_value
        if self.description:
            out["description"] = self.description
        return out


class ConfigsReport(BaseModel):
    """What ``report langfuse-configs`` did."""

    model_config = ConfigDict(frozen=True)

    created: tuple[str, ...] = ()
    """Configs created now."""
    existing: tuple[str, ...] = ()
    """Configs already there (by name, not archived): left as they are."""
    skipped: dict[str, str] = Field(default_factory=dict)
    """Score names Langfuse cannot take as a config name, and why."""
    planned: tuple[ScoreConfigSpec, ...] = ()
    """Every config tracejudge wants."""


def triage_config() -> ScoreConfigSpec:
    """``tracejudge.triage``: the triage verdict written back by ``triage --write-back langfuse``."""
    from tracejudge.write import TRIAGE_SCORE_NAME

    return ScoreConfigSpec(
        name=TRIAGE_SCORE_NAME,
        data_type="CATEGORICAL",
        categories=VERDICTS,
        description="tracejudge triage: which stage lost the applicable material (or unconfirmed)",
    )


def rubric_configs(
    rubric: str, criteria: Iterable[str], checks: Iterable[str], check_decided: Iterable[str] = ()
) -> list[ScoreConfigSpec]:
    """Configs for one rubric's scores: ``RUBRIC.CRITERION`` numeric 0-10 (categorical when a check
    decides the criterion), ``RUBRIC.verdict`` categorical, ``RUBRIC.CHECK`` boolean."""
    decided = set(check_decided)
    out = []
    for c in criteria:
        if c in decided:
            out.append(
                ScoreConfigSpec(
                    name=f"{rubric}.{c}",
                    data_type="CATEGORICAL",
                    categories=_SCORE_VERDICTS,
                    description=f"{rubric}: criterion {c}, decided by a hard check",
                )
            )
        else:
            out.append(
                ScoreConfigSpec(
                    name=f"{rubric}.{c}",
                    data_type="NUMERIC",
                    min_value=0,
                    max_value=10,
                    description=f"{rubric}: judge score for {c} (0-10)",
                )
            )
    out.append(
        ScoreConfigSpec(
            name=f"{rubric}.verdict",
            data_type="CATEGORICAL",
            categories=_SCORE_VERDICTS,
            description=f"{rubric}: the item's verdict (every criterion and check passed)",
        )
    )
    out.extend(
        ScoreConfigSpec(name=f"{rubric}.{k}", data_type="BOOLEAN", description=f"{rubric}: hard check {k}")
        for k in checks
    )
    return out


def configs_from_rubrics(rubrics: Sequence[Rubric]) -> list[ScoreConfigSpec]:
    """Configs for the triage verdict and the given rubrics."""
    out = [triage_config()]
    for r in rubrics:
        decided = [c.criterion for c in r.checks if c.criterion]
        out.extend(
            rubric_configs(
                r.name, [c.name for c in r.criteria], [c.name for c in r.checks if not c.criterion], decided
            )
        )
    return out


def configs_from_runs(
    runs: Sequence[RunRecord], decided: dict[str, set[str]] | None = None
) -> list[ScoreConfigSpec]:
    """Configs for the triage verdict and the rubrics of the latest run of each rubric name."""
    latest: dict[str, RunRecord] = {}
    for r in runs:
        name = r.provenance.rubric_name
        if name not in latest or r.created_at > latest[name].created_at:
            latest[name] = r
    out = [triage_config()]
    for name, run in sorted(latest.items()):
        out.extend(
            rubric_configs(
                name,
                sorted(run.summary.criteria),
                sorted(run.summary.checks),
                (decided or {}).get(run.run_id, ()),
            )
        )
    return out


def configs_from_store(store: Store) -> list[ScoreConfigSpec]:
    """Configs for the triage verdict and every rubric scored in the store."""
    runs = store.list_runs()
    decided: dict[str, set[str]] = {}
    for run in runs:
        found: set[str] = set()
        for item in store.iter_score_items(run.run_id):
            found = {k for k, c in item.criteria.items() if c.decided_by.startswith("check:")}
            break
        decided[run.run_id] = found
    return configs_from_runs(runs, decided)


def _configured_names(api: Any) -> set[str]:
    """The names of the project's score configs that are not archived, read page by page."""
    have: set[str] = set()
    page = 1
    while True:
        body = api.get("/score-configs", {"page": page, "limit": 100}) or {}
        have.update(str(c.get("name")) for c in body.get("data", []) if not c.get("isArchived"))
        pages = int((body.get("meta") or {}).get("totalPages") or 1)
        if page >= pages or not body.get("data"):
            return have
        page += 1


def create_score_configs(api: Any, specs: Sequence[ScoreConfigSpec]) -> ConfigsReport:
    """Create the configs Langfuse does not have yet (by name, archived ones ignored) through a
    :class:`tracejudge.write.LangfuseApi`; a rerun creates nothing new."""
    have = _configured_names(api)
    created, existing, skipped = [], [], {}
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            continue
        seen.add(spec.name)
        if not _NAME.fullmatch(spec.name):
            skipped[spec.name] = (
                "Langfuse config names are at most 35 letters, digits, spaces or _ . ( ) -; "
                "shorten the rubric or criterion name"
            )
            continue
        if spec.name in have:
            existing.append(spec.name)
            continue
        api.post("/score-configs", spec.body())
        created.append(spec.name)
    return ConfigsReport(
        created=tuple(created), existing=tuple(existing), skipped=skipped, planned=tuple(specs)
    )
