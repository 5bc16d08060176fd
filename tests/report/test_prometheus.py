"""Real Prometheus (Debian's ``prometheus``) scrapes ``tracejudge serve`` after the demo's triage and
three scoring runs; every PromQL expression in dashboards/ must return data, and every metric a
dashboard names must exist."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "dashboards" / "grafana").glob("*.json"))
METRIC = re.compile(r"\btracejudge_[a-z0-9_]+\b")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cmd: list[str], pattern: str, *, timeout: float = 60) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not found and (m := re.search(pattern, line)):
                found.append(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(timeout)
    if not found:
        proc.kill()
        pytest.fail(f"{cmd[0]} did not start")
    return proc, found[0]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(scope="module")
def served(populated: tuple[Path, dict[str, Any]]) -> Iterator[str]:
    db, _ = populated
    cmd = [sys.executable, "-m", "tracejudge", "--store", str(db), "serve", "--listen", "127.0.0.1:0"]
    proc, url = _start(cmd, r"listening on (http://\S+)")
    yield url
    _stop(proc)


@pytest.fixture(scope="module")
def prometheus(served: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus is required (.ci/run installs it: apt-get install prometheus)"
    work = tmp_path_factory.mktemp("prometheus")
    target = served.removeprefix("http://")
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: tracejudge\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready once a counter has two samples: increase() over it then returns data.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail("prometheus exited")
            try:
                r = httpx.get(
                    f"{url}/api/v1/query", params={"query": "increase(tracejudge_info[1m])"}, timeout=2
                )
                if r.status_code == 200 and r.json()["data"]["result"]:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        else:
            pytest.fail("prometheus never scraped tracejudge serve twice")
        yield url
    finally:
        _stop(proc)  # type: ignore[arg-type]


def _exprs(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for panel in dashboard.get("panels", []):
        for t in panel.get("targets", []):
            out.append((panel["title"], t["expr"], t.get("legendFormat", "")))
    return out


def _variables(dashboard: dict[str, Any]) -> dict[str, str]:
    out = {}
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out[v["name"]] = query
    return out


def dashboard_problems(dashboard: dict[str, Any], prom: str) -> list[str]:
    """What is wrong with a dashboard against a live Prometheus: metrics that do not exist, queries that
    fail or return no data, variables whose metric is missing."""
    names = set(httpx.get(f"{prom}/api/v1/label/__name__/values", timeout=10).json()["data"])
    problems = []
    for name, query in _variables(dashboard).items():
        for metric in METRIC.findall(query):
            if metric not in names:
                problems.append(f"variable {name}: metric {metric} does not exist")
        if m := re.fullmatch(r"label_values\((\w+), *(\w+)\)", query.strip()):
            series = httpx.get(f"{prom}/api/v1/series", params={"match[]": m.group(1)}, timeout=10).json()
            if not any(m.group(2) in s for s in series["data"]):
                problems.append(f"variable {name}: no {m.group(1)} series has label {m.group(2)}")
    for title, expr, legend in _exprs(dashboard):
        for metric in METRIC.findall(expr):
            if metric not in names:
                problems.append(f"{title}: metric {metric} does not exist")
        promql = expr.replace("$rubric", ".*").replace("$__rate_interval", "5m")
        r = httpx.get(f"{prom}/api/v1/query", params={"query": promql}, timeout=10)
        body = r.json()
        if body.get("status") != "success":
            problems.append(f"{title}: {expr!r} failed: {body.get('error')}")
        elif not body["data"]["result"]:
            problems.append(f"{title}: {expr!r} returned no data")
        else:
            # A legend naming a label the series lack draws every line with the same blank name.
            for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
                if any(label not in r["metric"] for r in body["data"]["result"]):
                    problems.append(f"{title}: legend label {label} is not on {expr!r}")
    return problems


def test_dashboards_exist_and_are_provisionable() -> None:
    assert {p.name for p in DASHBOARDS} >= {"tracejudge-scoring.json", "tracejudge-triage.json"}
    for path in DASHBOARDS:
        d = json.loads(path.read_text())
        assert d["uid"].startswith("tracejudge-")
        assert d["panels"]
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids))
        for p in d["panels"]:
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_prometheus_scrapes_serve_and_every_dashboard_query_returns_data(prometheus: str) -> None:
    targets = httpx.get(f"{prometheus}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
    assert [t["health"] for t in targets] == ["up"]
    for path in DASHBOARDS:
        assert dashboard_problems(json.loads(path.read_text()), prometheus) == [], path.name


def test_values_prometheus_holds_match_the_store(
    prometheus: str, populated: tuple[Path, dict[str, Any]]
) -> None:
    _, filled = populated

    def query(q: str) -> list[dict[str, Any]]:
        return list(
            httpx.get(f"{prometheus}/api/v1/query", params={"query": q}, timeout=10).json()["data"]["result"]
        )

    runs = filled["runs"]
    (row,) = query('tracejudge_score_runs_total{rubric="restaurant-assistant"}')
    assert float(row["value"][1]) == len(runs)
    (row,) = query("tracejudge_pass_rate")
    assert row["metric"]["judge_model"] == "judge-model-2"
    assert float(row["value"][1]) == pytest.approx(runs[-1].summary.overall.pass_rate)
    total = sum(float(r["value"][1]) for r in query("tracejudge_triage_verdicts"))
    assert total == len(filled["demo"].rows)
    filtered = query('tracejudge_triage_verdicts{verdict="filtered"}')
    assert {r["metric"]["cause"] for r in filtered} == {"filter", "permission"}
    assert {r["metric"]["stage"] for r in filtered} == {"retrieved"}
    (kappa,) = query("tracejudge_calibration_kappa")
    assert float(kappa["value"][1]) == pytest.approx(filled["calibration"].kappa)
    # The triage dashboard's still-arriving panel: the latest sweep's count, as recorded.
    (arriving,) = query("tracejudge_sweep_still_arriving_traces")
    assert float(arriving["value"][1]) == filled["sweep"].still_arriving
    calls = sum(float(r["value"][1]) for r in query("tracejudge_judge_latency_seconds_count"))
    assert calls == sum(r.summary.judge_calls for r in runs)


def test_a_dashboard_naming_a_missing_metric_fails(prometheus: str) -> None:
    bad = json.loads(DASHBOARDS[0].read_text())
    bad["panels"][0]["targets"][0]["expr"] = "tracejudge_pass_rat"
    problems = dashboard_problems(bad, prometheus)
    assert any("tracejudge_pass_rat does not exist" in p for p in problems)
    assert any("returned no data" in p for p in problems)


def test_a_legend_naming_a_missing_label_fails(prometheus: str) -> None:
    bad = json.loads((ROOT / "dashboards" / "grafana" / "tracejudge-scoring.json").read_text())
    target = bad["panels"][0]["targets"][0]
    assert target["expr"].startswith("tracejudge_pass_rate")
    target["legendFormat"] = "{{rubric}} ({{judge}})"
    problems = dashboard_problems(bad, prometheus)
    assert problems == [f"{bad['panels'][0]['title']}: legend label judge is not on {target['expr']!r}"]
