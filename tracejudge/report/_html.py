"""The report as one self-contained HTML file: Jinja2 with autoescape, inline CSS, inline SVG, no script."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from tracejudge.report._data import VERDICTS, ReportData, RubricView, RunPoint, gate_reading, mismatch_rows
from tracejudge.report._svg import VERDICT_COLOURS, Bar, Marker, bar_chart, histogram, line_chart

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
"""The page may load nothing: no script, no font, no image, no frame; only its own inline styles."""

_TEMPLATE = "report.html.j2"


def _dt(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _short(run_id: str, created: datetime) -> str:
    return created.strftime("%m-%d %H:%M") if created else run_id[:8]


def _per_key(runs: Sequence[RunPoint], field: str) -> dict[str, list[float | None]]:
    """One series per key of the runs' ``field`` mapping (criteria or categories), in name order."""
    values: list[Mapping[str, float | None]] = [getattr(p, field) for p in runs]
    return {k: [v.get(k) for v in values] for k in sorted({k for v in values for k in v})}


def _rubric_charts(r: RubricView) -> dict[str, Any]:
    labels = [f"#{i + 1} {_short(p.run_id, p.created_at)}" for i, p in enumerate(r.runs)]
    markers = [Marker(i, "; ".join(p.changes)) for i, p in enumerate(r.runs) if p.changes]
    series = {"overall": [p.pass_rate for p in r.runs], **_per_key(r.runs, "criteria")}
    cat_series = _per_key(r.runs, "categories")
    categories = (
        line_chart(cat_series, labels, title=f"{r.name}: pass rate per category", markers=markers)
        if cat_series
        else None
    )
    return {
        "criteria": line_chart(
            series, labels, title=f"{r.name}: pass rate per criterion", markers=markers, strong="overall"
        ),
        "categories": categories,
        "indeterminate": line_chart(
            {"indeterminate share": [p.indeterminate_share for p in r.runs]},
            labels,
            title=f"{r.name}: indeterminate share",
            markers=markers,
            height=170,
        ),
        "hist": {
            name: histogram(bins, title=f"{name}: scores 0-10") for name, bins in r.distributions.items()
        },
    }


def _charts(data: ReportData) -> dict[str, Any]:
    counts = data.triage.verdict_counts
    verdicts = bar_chart(
        [Bar(v, float(counts.get(v, 0)), VERDICT_COLOURS.get(v)) for v in VERDICTS],
        title="tickets per triage verdict (latest triage of each ticket)",
    )
    calibration: list[Markup] = []
    for c in data.calibrations:
        calibration.append(
            bar_chart(
                [
                    Bar("judge pass rate", c.judge_pass_rate or 0.0, "#0072B2", _pct(c.judge_pass_rate)),
                    Bar("label pass rate", c.label_pass_rate or 0.0, "#E69F00", _pct(c.label_pass_rate)),
                ],
                title="judge pass rate next to label pass rate",
                width=420,
                max_value=1.0,
            )
        )
    return {
        "verdicts": verdicts,
        "rubric": {r.name: _rubric_charts(r) for r in data.rubrics},
        "calibration": calibration,
        "mismatches": {a.report_id: mismatch_rows(a.mismatches) for a in data.audits},
    }


# Bidi marks, embeddings, overrides and isolates: a value holding one (U+202E reverses what follows)
# must not reorder the report's own text around it.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _isolate(value: Any) -> Any:
    """Jinja's ``finalize``: text holding a bidi control is escaped and wrapped in ``<bdi>`` (the
    browser isolates it: its direction cannot leak into the text around it)."""
    if isinstance(value, str) and not hasattr(value, "__html__") and _BIDI.search(value):
        from markupsafe import Markup, escape

        return Markup("<bdi>") + escape(value) + Markup("</bdi>")
    return value


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        finalize=_isolate,
    )
    env.filters.update(dt=_dt, pct=_pct, num=_num, ms=_ms)
    return env


def render_html(data: ReportData) -> str:
    """The report as one HTML document: nothing in it loads from anywhere, and every text from traces,
    tickets and judges is escaped (Jinja2 autoescape; charts are built escaped)."""
    template = _environment().get_template(_TEMPLATE)
    return str(
        template.render(
            data=data,
            charts=_charts(data),
            csp=CSP,
            faults=VERDICTS[:5],
            gate={c.calibration_id: gate_reading(c) for c in data.calibrations},
        )
    )
