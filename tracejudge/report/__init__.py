"""See it: the self-contained HTML report, ``/metrics`` for Prometheus, the live server, and the
Langfuse score configs that make tracejudge"s scores filterable in Langfuse (DESIGN 4, 6)."""

from __future__ import annotations

import typing as _typing

from tracejudge._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from tracejudge.report._data import (
        VERDICTS,
        CategoryRow,
        ReportData,
        RubricView,
        RunPoint,
        SuiteView,
        TicketView,
        TriageView,
        build_report,
        deciding_stage,
        langfuse_trace_url,
        rubric_view,
        score_bins,
        suite_view,
        triage_view,
    )
    from tracejudge.report._html import CSP, render_html
    from tracejudge.report._langfuse import (
        ConfigsReport,
        ScoreConfigSpec,
        configs_from_rubrics,
        configs_from_runs,
        configs_from_store,
        create_score_configs,
        rubric_configs,
        triage_config,
    )
    from tracejudge.report._metrics import (
        CONTENT_TYPE,
        LATENCY_BUCKETS,
        Family,
        LatencyCache,
        calibration_families,
        exposition,
        scoring_families,
        store_metrics,
        triage_families,
    )
    from tracejudge.report._otel_metrics import RunMetrics
    from tracejudge.report._serve import (
        DEFAULT_LISTEN,
        build_app,
        check_exposure,
        is_loopback,
        parse_listen,
        serve,
    )
    from tracejudge.report._write import write_report

__all__ = [
    "CONTENT_TYPE",
    "CSP",
    "DEFAULT_LISTEN",
    "LATENCY_BUCKETS",
    "VERDICTS",
    "CategoryRow",
    "ConfigsReport",
    "Family",
    "LatencyCache",
    "ReportData",
    "RubricView",
    "RunMetrics",
    "RunPoint",
    "ScoreConfigSpec",
    "SuiteView",
    "TicketView",
    "TriageView",
    "build_app",
    "build_report",
    "calibration_families",
    "check_exposure",
    "configs_from_rubrics",
    "configs_from_runs",
    "configs_from_store",
    "create_score_configs",
    "deciding_stage",
    "exposition",
    "is_loopback",
    "langfuse_trace_url",
    "parse_listen",
    "render_html",
    "rubric_configs",
    "rubric_view",
    "score_bins",
    "scoring_families",
    "serve",
    "store_metrics",
    "suite_view",
    "triage_config",
    "triage_families",
    "triage_view",
    "write_report",
]

__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "tracejudge.report._data": (
            "VERDICTS",
            "CategoryRow",
            "ReportData",
            "RubricView",
            "RunPoint",
            "SuiteView",
            "TicketView",
            "TriageView",
            "build_report",
            "deciding_stage",
            "langfuse_trace_url",
            "rubric_view",
            "score_bins",
            "suite_view",
            "triage_view",
        ),
        "tracejudge.report._html": (
            "CSP",
            "render_html",
        ),
        "tracejudge.report._langfuse": (
            "ConfigsReport",
            "ScoreConfigSpec",
            "configs_from_rubrics",
            "configs_from_runs",
            "configs_from_store",
            "create_score_configs",
            "rubric_configs",
            "triage_config",
        ),
        "tracejudge.report._metrics": (
            "CONTENT_TYPE",
            "LATENCY_BUCKETS",
            "Family",
            "LatencyCache",
            "calibration_families",
            "exposition",
            "scoring_families",
            "store_metrics",
            "triage_families",
        ),
        "tracejudge.report._otel_metrics": ("RunMetrics",),
        "tracejudge.report._serve": (
            "DEFAULT_LISTEN",
            "build_app",
            "check_exposure",
            "is_loopback",
            "parse_listen",
            "serve",
        ),
        "tracejudge.report._write": ("write_report",),
    },
)
