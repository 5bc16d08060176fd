"""The report written to one self-contained HTML file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tracejudge.report._data import ReportData, build_report
from tracejudge.report._html import render_html
from tracejudge.store import Store


def write_report(
    store: Store,
    out: str | Path,
    *,
    suites: Sequence[str | Path] = (),
    langfuse_url: str | None = None,
) -> ReportData:
    """Build the report from the store and write it to ``out`` as one self-contained HTML file."""
    data = build_report(store, suites=suites, langfuse_url=langfuse_url)
    path = Path(out)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(data), encoding="utf-8")
    tmp.replace(path)
    return data
