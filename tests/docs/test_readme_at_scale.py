"""README "At scale", run as written: its ``sh`` block's commands, each through bash in a folder of
its own (as on separate machines), against a fresh PostgreSQL database and the local Langfuse,
Phoenix and judge servers. Two receivers (each on a loopback port of its own instead of
0.0.0.0:4318) take overlapping span sets from the real OpenTelemetry SDK with the token; the pullers
pull; two scoring workers started at once share the night's run, and write its scores back.

The commands are read from the README itself, so a section that stops working, or a README whose
commands change without this test knowing, fails here. The Collector is not run (no binary here): its
config is checked by tests/examples/test_deploy.py, and validated by ``otelcol-contrib validate``
where that binary is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from tests.conftest import load_module
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.schema import RawSpan
from tracejudge.store import open_store
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer
from tracejudge.testing.phoenix_server import PhoenixServer, synthetic_spans

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLE = ROOT / "examples" / "restaurant"
traces = load_module(EXAMPLE / "traces.py", "restaurant_traces_at_scale")
TOKEN = "at-scale-test-token"
PHOENIX_KEY = "phx-at-scale"
COPIES = 4  # the example's 14 traces, 4 times over: 56 traces for the receivers


def section_commands() -> list[str]:
    """The commands of the "At scale" ``sh`` block: continuation lines joined, comments dropped."""
    text = README.read_text("utf-8")
    section = text.split("\n## At scale\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    lines = block.replace("\\\n", " ").splitlines()
    return [c for c in (re.sub(r"(^|\s)#.*$", "", line).strip() for line in lines) if c]


def _kind(command: str) -> str:
    words = command.split()
    if words[0] == "export":
        return "export"
    return " ".join(words[:3]) if words[0] == "tracejudge" and words[1] == "collect" else words[0]


def _env(**extra: str) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # where `tracejudge` is installed
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), **extra}


def _bash(command: str, cwd: Path, env: dict[str, str], **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, text=True, **kwargs)


def _ran(proc: subprocess.Popen[str], what: str) -> tuple[str, str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"{what}: {err[-2000:]}"
    return out, err


def _readable(s: RawSpan, shift_ns: int) -> ReadableSpan:
    ctx = SpanContext(int(s.trace_id, 16), int(s.span_id, 16), is_remote=False, trace_flags=TraceFlags(1))
    parent = SpanContext(int(s.trace_id, 16), int(s.parent_span_id, 16), False) if s.parent_span_id else None
    return ReadableSpan(
        name=s.name,
        context=ctx,
        parent=parent,
        resource=Resource.create(s.resource),
        attributes={k: v if not isinstance(v, dict) else json.dumps(v) for k, v in s.attributes.items()},
        kind=SpanKind.INTERNAL,
        start_time=s.start_time_unix_nano + shift_ns,
        end_time=s.end_time_unix_nano + shift_ns,
    )


def _example_spans() -> list[RawSpan]:
    spans = list(traces.all_spans())
    return [
        s.model_copy(update={"trace_id": f"{k:02x}" + s.trace_id[2:]}) for k in range(COPIES) for s in spans
    ]


def _judge_reply() -> dict[str, Any]:
    """A judgement for traces the example's rules do not know (the pulled ones)."""
    return {
        "criteria": {c: {"reasoning": f"{c} is fine", "score": 8} for c in traces.CRITERIA},
        "reasoning": "scripted judgement",
    }


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedOpenAIServer, LangfuseServer, PhoenixServer]]:
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    rules = [Rule(reply=r["reply"], any_message=re.escape(r["match"])) for r in traces.judge_rules()]
    langfuse = LangfuseServer(generation="v4").start()
    phoenix = PhoenixServer(api_key=PHOENIX_KEY).start()
    try:
        for i in range(2):
            langfuse.add_trace(synthetic_trace(i, base_time=an_hour_ago))
            for span in synthetic_spans(i, base_time=an_hour_ago):
                phoenix.add_span("default", span)
        with ScriptedOpenAIServer(rules, default_reply=json.dumps(_judge_reply())) as judge:
            yield judge, langfuse, phoenix
    finally:
        langfuse.stop()
        phoenix.stop()


def test_the_at_scale_section_runs_as_written(
    postgres_url: str,  # noqa: F811
    servers: tuple[ScriptedOpenAIServer, LangfuseServer, PhoenixServer],
    tmp_path: Path,
) -> None:
    judge, langfuse, phoenix = servers
    commands = section_commands()
    assert [_kind(c) for c in commands] == [
        "export",
        "export",
        "tracejudge collect otlp",
        "otelcol-contrib",
        "tracejudge collect langfuse",
        "tracejudge collect phoenix",
        "tracejudge",
    ]
    exports, (receiver, collector, *pullers, worker) = commands[:2], commands[2:]
    assert [e.split("=", 1)[0] for e in exports] == [
        "export TRACEJUDGE_STORE",
        "export TRACEJUDGE_OTLP_TOKEN",
    ]
    env = _env(
        TRACEJUDGE_STORE=postgres_url,
        TRACEJUDGE_OTLP_TOKEN=TOKEN,
        LANGFUSE_BASE_URL=langfuse.base_url,
        LANGFUSE_PUBLIC_KEY=langfuse.public_key,
        LANGFUSE_SECRET_KEY=langfuse.secret_key,
        PHOENIX_COLLECTOR_ENDPOINT=phoenix.base_url,
        PHOENIX_API_KEY=PHOENIX_KEY,
        OPENAI_BASE_URL=judge.base_url,
        OPENAI_API_KEY="sk-at-scale",
        NO_PROXY="127.0.0.1",
    )

    # The Collector's config is where the command says; validated where the binary is installed.
    config = collector.split("--config", 1)[1].split()[0]
    assert (ROOT / config).is_file()
    if shutil.which("otelcol-contrib"):
        validate = subprocess.run(
            ["otelcol-contrib", "validate", "--config", str(ROOT / config)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert validate.returncode == 0, validate.stderr

    # N receivers: on one machine, each on a port of its own.
    assert "--listen 0.0.0.0:4318" in receiver
    mine = receiver.replace("0.0.0.0:4318", "127.0.0.1:0")
    receivers = [_bash(mine, tmp_path, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    try:
        urls = []
        for proc in receivers:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("listening on http://127.0.0.1:"), proc.communicate()[1][-2000:]
            urls.append(line.split()[-1])
        # The apps (the Collector, here the SDK itself): overlapping span sets, one to each receiver.
        spans = _example_spans()
        shift = int((datetime.now(UTC) - timedelta(hours=2)).timestamp() * 1e9) - traces.T0
        sdk = [_readable(s, shift) for s in spans]
        for url, part in zip(urls, (sdk, sdk[: len(sdk) // 2]), strict=True):
            exporter = OTLPSpanExporter(
                endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
            )
            for i in range(0, len(part), 50):
                assert exporter.export(part[i : i + 50]) == SpanExportResult.SUCCESS
            exporter.shutdown()
        # A sender without the token is refused.
        stranger = OTLPSpanExporter(endpoint=f"{urls[0]}/v1/traces", timeout=5)
        assert stranger.export(sdk[:1]) == SpanExportResult.FAILURE
        stranger.shutdown()
    finally:
        for proc in receivers:
            proc.send_signal(signal.SIGINT)
    took = [_ran(proc, "receiver")[1] for proc in receivers]
    assert all("stopped:" in err for err in took)

    # Pullers, whenever and wherever.
    for puller in pullers:
        _ran(_bash(puller, tmp_path, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE), puller)

    store = open_store(postgres_url)
    try:
        stored = {t.trace_id: t.span_count for t in store.list_traces()}
    finally:
        store.close()
    expected = {s.trace_id for s in spans}
    pulled = set(stored) - expected
    assert expected <= set(stored)
    assert len(pulled) == 4  # two Langfuse traces, two Phoenix traces
    for trace_id in expected:  # every span once, though half were sent to both receivers
        assert stored[trace_id] == sum(1 for s in spans if s.trace_id == trace_id)

    # K workers started at the same time, each in its own folder (machine) with the rubric.
    assert "--run" in worker
    assert "> score.json" in worker
    folders = [tmp_path / f"worker-{k}" for k in range(2)]
    for folder in folders:
        folder.mkdir()
        shutil.copy(EXAMPLE / "rubric.yaml", folder / "rubric.yaml")
    workers = [_bash(worker, f, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for f in folders]
    for proc in workers:
        _ran(proc, "worker")
    reports = [json.loads((f / "score.json").read_text("utf-8")) for f in folders]
    night = f"nightly-{datetime.now(UTC):%Y-%m-%d}"
    assert {r["run_id"] for r in reports} == {night}
    scored = [i["trace_id"] for r in reports for i in r["items"]]
    assert len(scored) == len(set(scored))  # no item scored twice
    final = max(reports, key=lambda r: r["summary"]["n"])
    assert final["status"] == "complete"
    assert final["summary"]["n"] == len(scored) > 0
    assert set(scored) < set(stored)  # --sample 0.1 of everything from the last 24 h
    # The run's scores reached Langfuse, every item's once.
    assert {s["traceId"] for s in langfuse.scores} == set(scored)
    assert sum(r["write_back"][0]["written"] for r in reports) == len(langfuse.scores)

    # What an operator checks afterwards.
    doctor = subprocess.run(
        ["tracejudge", "doctor", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["store"]["status"] == "ok"
    assert checks["langfuse"]["status"] == "ok"
    listed = subprocess.run(
        ["tracejudge", "traces", "list", "--limit", "1000", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert {t["trace_id"] for t in json.loads(listed.stdout)} == set(stored)
    assert TOKEN not in doctor.stdout + listed.stdout + "".join(took)
