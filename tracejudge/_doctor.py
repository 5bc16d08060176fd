"""``tracejudge doctor``: what the user's setup can reach, each with the exact fix.

Every check reads its settings once (``DoctorSettings.from_env``), tries the one cheapest call
that proves the thing works, and returns a value: ok, fail (configured but not working), or
not_configured / skipped. A secret is never formatted into a message: URLs lose their password,
keys are named by their variable only, a server's own error text is not echoed (it could quote
the request), and every message goes through the one redactor (``tracejudge._redact``) as well.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from tracejudge import __version__
from tracejudge._errors import TracejudgeError
from tracejudge._redact import redact, redact_data

if TYPE_CHECKING:
    from tracejudge.write import LangfuseApi

__all__ = ["Check", "DoctorReport", "DoctorSettings", "run_doctor"]

Status = Literal["ok", "fail", "not_configured", "skipped"]

_DEFAULT_LISTEN = "127.0.0.1:4318"  # `collect otlp`'s default (the collectors package owns the receiver)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Check(_Record):
    """One thing doctor looked at."""

    name: str
    """store, store_data, receiver, langfuse, phoenix, judge, otlp_metrics."""
    status: Status
    """ok; fail (configured and not working); not_configured; skipped (not asked for)."""
    target: str = ""
    """What was checked (a URL or address with any password masked)."""
    detail: str = ""
    """What was found."""
    fix: str = ""
    """The exact next step when it is not ok."""
    facts: dict[str, str] = Field(default_factory=dict)
    """What was learnt: schema version, API generation, project, server version, model."""


class DoctorReport(_Record):
    """Every check, in a fixed order."""

    version: str
    """tracejudge's version."""
    checks: tuple[Check, ...]
    """store, store_data, receiver, langfuse, phoenix, judge, otlp_metrics."""

    @property
    def ok(self) -> bool:
        """Nothing configured fails."""
        return all(c.status != "fail" for c in self.checks)


class DoctorSettings(_Record):
    """Where everything is, resolved once at the edge (argument > environment > default)."""

    store_url: str
    """The store URL."""
    listen: str = _DEFAULT_LISTEN
    """The receiver's address (``TRACEJUDGE_OTLP_LISTEN``)."""
    receiver_token_set: bool = False
    """Whether ``TRACEJUDGE_OTLP_TOKEN`` is set (required beyond loopback)."""
    langfuse_url: str | None = None
    """``LANGFUSE_BASE_URL`` / ``LANGFUSE_HOST``."""
    langfuse_public_key: str | None = None
    """``LANGFUSE_PUBLIC_KEY`` (not secret, never printed all the same)."""
    langfuse_secret_set: bool = False
    """Whether ``LANGFUSE_SECRET_KEY`` is set (its value is read only to authenticate)."""
    phoenix_url: str | None = None
    """``PHOENIX_COLLECTOR_ENDPOINT`` / ``PHOENIX_BASE_URL``."""
    judge_base_url: str | None = None
    """``TRACEJUDGE_JUDGE_BASE_URL`` / ``OPENAI_BASE_URL``."""
    judge_key_set: bool = False
    """Whether ``OPENAI_API_KEY`` is set."""
    judge_model: str | None = None
    """``--judge-model`` / ``TRACEJUDGE_JUDGE_MODEL``."""
    metrics_endpoint: str | None = None
    """``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` as is, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + /v1/metrics."""
    timeout: float = 5.0
    """Seconds per network call."""

    @classmethod
    def from_env(
        cls,
        store_url: str,
        *,
        judge_model: str | None = None,
        timeout: float = 5.0,
        env: Mapping[str, str] | None = None,
    ) -> DoctorSettings:
        e = os.environ if env is None else env
        return cls.model_validate(
            {
                "store_url": store_url,
                "listen": e.get("TRACEJUDGE_OTLP_LISTEN") or _DEFAULT_LISTEN,
                **{name: _first_set(e, variables) for name, variables in _ENV_VALUES.items()},
                **{name: bool(e.get(variable)) for name, variable in _ENV_FLAGS.items()},
                "judge_model": judge_model or e.get("TRACEJUDGE_JUDGE_MODEL") or None,
                "metrics_endpoint": _metrics_endpoint(e),
                "timeout": timeout,
            }
        )


_ENV_VALUES: dict[str, tuple[str, ...]] = {
    "langfuse_url": ("LANGFUSE_BASE_URL", "LANGFUSE_HOST"),
    "langfuse_public_key": ("LANGFUSE_PUBLIC_KEY",),
    "phoenix_url": ("PHOENIX_COLLECTOR_ENDPOINT", "PHOENIX_BASE_URL"),
    "judge_base_url": ("TRACEJUDGE_JUDGE_BASE_URL", "OPENAI_BASE_URL"),
}
"""Setting -> the environment variables that give it, the first one set (non-empty) wins."""
_ENV_FLAGS: dict[str, str] = {
    "receiver_token_set": "TRACEJUDGE_OTLP_TOKEN",
    "langfuse_secret_set": "LANGFUSE_SECRET_KEY",
    "judge_key_set": "OPENAI_API_KEY",
}
"""Setting -> the secret variable whose being set it records (doctor never keeps the value)."""


def _first_set(env: Mapping[str, str], variables: tuple[str, ...]) -> str | None:
    return next((env[v] for v in variables if env.get(v)), None)


def _metrics_endpoint(env: Mapping[str, str]) -> str | None:
    """``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` as is, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + /v1/metrics."""
    metrics = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    if not metrics and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        metrics = env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/metrics"
    return metrics or None


def _mask(text: str) -> str:
    """``text`` with every URL's password and query string masked (either may carry a secret), then
    through the one redactor (configured keys, credentials, key-shaped text)."""
    text = re.sub(r"(://[^:/@\s]*:)[^@/\s]*@", r"\1***@", text)
    return redact(re.sub(r"(\w+://[^\s?'\"]*)\?[^\s'\"]*", r"\1?***", text))


def _unreachable(exc: Exception) -> str:
    """Why a connection failed, by exception type only (its text may quote the request)."""
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        return "connection refused or host not found"
    return type(exc).__name__


def _settings_failed(name: str, target: str, exc: TracejudgeError) -> Check:
    """A check that failed on its settings, with the error's own message and hint."""
    return Check(name=name, status="fail", target=target, detail=_mask(exc.message), fix=exc.hint or "")


# --- the checks -----------------------------------------------------------------------------------


def check_store(s: DoctorSettings) -> Check:
    from tracejudge.store import STORE_SCHEMA_VERSION, inspect_store, sqlite_file

    target = _mask(s.store_url)
    try:
        path = sqlite_file(s.store_url)
    except TracejudgeError as exc:
        return _settings_failed("store", target, exc)
    if path is not None and path != ":memory:" and not Path(path).exists():
        parent = Path(path).parent
        if parent.exists() and not os.access(parent, os.W_OK):
            return Check(
                name="store",
                status="fail",
                target=target,
                detail=f"{parent} is not writable, so the store cannot be created",
                fix="point --store (or TRACEJUDGE_STORE) at a writable path",
            )
        return Check(
            name="store",
            status="ok",
            target=target,
            detail="not created yet; the first command that stores something creates it",
            facts={"schema_version": str(STORE_SCHEMA_VERSION)},
        )
    # Read through a read-only connection: opening would create the tables or upgrade an older schema,
    # and an upgrade locks out the older tracejudge processes still using the store.
    try:
        state = inspect_store(s.store_url)
    except TracejudgeError as exc:
        return _settings_failed("store", target, exc)
    if state.schema_version is None:
        return Check(
            name="store",
            status="ok",
            target=target,
            detail="no tracejudge tables yet; the first command that stores something creates them",
            facts={"schema_version": str(STORE_SCHEMA_VERSION)},
        )
    return _store_schema(target, state.schema_version, state.has_traces)


def _store_schema(target: str, version: int, has_traces: bool) -> Check:
    """The store check for a store at schema ``version``: this version's, older (upgraded by the next
    command that writes to it) or newer (refused)."""
    from tracejudge.store import STORE_SCHEMA_VERSION as current

    facts = {"schema_version": str(version), "tracejudge_schema": str(current)}
    if version > current:
        return Check(
            name="store",
            status="fail",
            target=target,
            detail=f"schema version {version}, newer than this tracejudge knows ({current})",
            fix="upgrade tracejudge, or point --store at another store",
            facts=facts,
        )
    detail = f"schema {version}" + ("" if has_traces else "; no traces yet")
    if version < current:
        facts["upgrade"] = "on the next command that writes to it"
        detail += (
            f"; older than this tracejudge's {current}: doctor and the commands that only read (traces, "
            f"report, serve, ticket draft) leave it as it is, the next command that writes to it "
            f"(collect, score, triage, …) upgrades it to schema {current} in place, and tracejudge "
            "processes of the older version then refuse it: upgrade every process at once "
            "(README, At scale)"
        )
    return Check(name="store", status="ok", target=target, detail=detail, facts=facts)


# A failed store_data check names this many unreadable traces in its detail (facts list them all).
_SHOWN_UNREADABLE = 5


def check_store_data(
    s: DoctorSettings, *, deep: bool, progress: Callable[[int, int], None] | None = None
) -> Check:
    """With ``deep``: every stored trace read back (and a SQLite file's pages checked), read-only."""
    target = _mask(s.store_url)
    if not deep:
        return Check(
            name="store_data",
            status="skipped",
            target=target,
            detail="not asked for: `doctor --deep` reads every stored trace back",
        )
    from tracejudge.store import verify_store

    try:
        found = verify_store(s.store_url, progress=progress)
    except TracejudgeError as exc:
        return _settings_failed("store_data", target, exc)
    facts = {"traces": str(found.traces), "spans": str(found.spans), "unreadable": str(len(found.unreadable))}
    if found.ok:
        return Check(
            name="store_data",
            status="ok",
            target=target,
            detail=f"{found.traces} trace(s) and {found.spans} span(s) stored: every one reads back"
            if found.traces
            else "no traces stored yet",
            facts=facts,
        )
    parts = []
    if found.unreadable:
        shown = "; ".join(f"{u.trace_id} ({u.error})" for u in found.unreadable[:_SHOWN_UNREADABLE])
        more = " …" if len(found.unreadable) > _SHOWN_UNREADABLE else ""
        parts.append(f"{len(found.unreadable)} of {found.traces} trace(s) do not read back: {shown}{more}")
        facts["unreadable_traces"] = ",".join(u.trace_id for u in found.unreadable)
    if found.file_problems:
        lines = [line for text in found.file_problems for line in text.splitlines() if line.strip()]
        parts.append("SQLite's quick_check of the file: " + "; ".join(lines))
    fix = "restore the store from a backup: " + (
        "this copy has lost the traces listed (`doctor --deep --json` lists every one under"
        " facts.unreadable_traces); the others still read"
        if found.unreadable
        else "SQLite finds its file damaged, and reads may fail or miss what it holds"
    )
    return Check(
        name="store_data", status="fail", target=target, detail=". ".join(parts), fix=fix, facts=facts
    )


def check_receiver(s: DoctorSettings) -> Check:
    from tracejudge.serving import is_loopback, parse_listen

    try:
        host, port = parse_listen(s.listen, example_port=4318, strip=True)
    except TracejudgeError:
        return Check(
            name="receiver",
            status="fail",
            target=s.listen,
            detail="not HOST:PORT",
            fix="set TRACEJUDGE_OTLP_LISTEN=127.0.0.1:4318 (or pass --listen to collect otlp)",
        )
    if not is_loopback(host) and not s.receiver_token_set:
        return Check(
            name="receiver",
            status="fail",
            target=s.listen,
            detail="beyond loopback without a token: `collect otlp` refuses to start",
            fix="export TRACEJUDGE_OTLP_TOKEN=<a long random token> (senders send it as a Bearer token), "
            "or listen on 127.0.0.1",
        )
    if port == 0:
        return Check(name="receiver", status="ok", target=s.listen, detail="port 0: a free port at start")
    return _receiver_answering(s, host, port) or _receiver_bindable(s, host, port)


def _receiver_answering(s: DoctorSettings, host: str, port: int) -> Check | None:
    """What answers ``GET /health`` at the address, or None when nothing does."""
    try:
        url_host = f"[{host}]" if ":" in host else host
        r = httpx.get(f"http://{url_host}:{port}/health", timeout=s.timeout)
    except httpx.HTTPError:
        return None
    if r.status_code == 200 and r.headers.get("content-type", "").startswith("application/json"):
        return Check(
            name="receiver", status="ok", target=s.listen, detail="a receiver answers there (/health)"
        )
    return Check(
        name="receiver",
        status="fail",
        target=s.listen,
        detail=f"something else listens there (GET /health answered {r.status_code})",
        fix="stop it, or give the receiver another address: TRACEJUDGE_OTLP_LISTEN=127.0.0.1:4319",
    )


def _receiver_bindable(s: DoctorSettings, host: str, port: int) -> Check:
    """Whether ``collect otlp`` could listen at the address (nothing answers there)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            return Check(
                name="receiver",
                status="fail",
                target=s.listen,
                detail=f"cannot listen there ({exc.strerror or type(exc).__name__})",
                fix="pick a free local address: TRACEJUDGE_OTLP_LISTEN=127.0.0.1:4319",
            )
    return Check(
        name="receiver",
        status="ok",
        target=s.listen,
        detail="free: `tracejudge collect otlp` can listen there",
    )


def check_langfuse(s: DoctorSettings, env: Mapping[str, str]) -> Check:
    from tracejudge.write import LangfuseApi, LangfuseApiError, LangfuseCredentials

    if not (s.langfuse_url or s.langfuse_public_key or s.langfuse_secret_set):
        return Check(
            name="langfuse",
            status="not_configured",
            detail="LANGFUSE_BASE_URL and keys not set",
            fix="to use Langfuse: export LANGFUSE_BASE_URL, LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY",
        )
    target = _mask(s.langfuse_url or "")
    try:
        creds = LangfuseCredentials.from_env(env)
    except TracejudgeError as exc:
        return _settings_failed("langfuse", target, exc)
    facts: dict[str, str] = {}
    with LangfuseApi(creds, timeout=s.timeout, max_retries=0) as api:
        try:
            _learn_langfuse(api, facts)
        except LangfuseApiError as exc:
            return Check(name="langfuse", status="fail", target=target, facts=facts, **_langfuse_why(exc))
    detail = f"credentials valid; API {facts['api_generation']}"
    if "project" in facts:
        detail += f"; project {facts['project']}"
    return Check(name="langfuse", status="ok", target=target, detail=detail, facts=facts)


def _learn_langfuse(api: LangfuseApi, facts: dict[str, str]) -> None:
    """Fill ``facts`` with the server's version, the key pair's project and the API generation, call
    by call (what was learnt before a failing call is kept)."""
    health = api.get("/health", allow_404=True)
    if isinstance(health, dict) and health.get("version"):
        facts["server_version"] = str(health["version"])
    projects = api.get("/projects")
    data = projects.get("data") if isinstance(projects, dict) else None
    if data:
        facts["project"] = str(data[0].get("name") or data[0].get("id"))
    probe = api.get("/v2/observations", {"limit": 1, "fields": "core"}, allow_404=True)
    facts["api_generation"] = "v4" if probe is not None else "v3"


def _langfuse_why(exc: Exception) -> dict[str, str]:
    status = getattr(exc, "status", None)
    if status in (401, 403):
        return {
            "detail": f"the key pair was refused (HTTP {status})",
            "fix": "use the LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY of a project on this server "
            "(project settings → API keys)",
        }
    if status == 404:
        return {
            "detail": "no Langfuse API at this URL (HTTP 404 under /api/public)",
            "fix": "set LANGFUSE_BASE_URL to the server's root, e.g. https://cloud.langfuse.com "
            "(without /api/public)",
        }
    if status is None:
        return {
            "detail": "cannot reach the server",
            "fix": "start Langfuse or correct LANGFUSE_BASE_URL (scheme, host and port)",
        }
    return {"detail": f"the server answered HTTP {status}", "fix": "check the server's logs; rerun doctor"}


def check_phoenix(s: DoctorSettings, env: Mapping[str, str]) -> Check:
    from tracejudge.write import PhoenixApi, PhoenixApiError, PhoenixCredentials

    if not s.phoenix_url:
        return Check(
            name="phoenix",
            status="not_configured",
            detail="PHOENIX_COLLECTOR_ENDPOINT not set",
            fix="to use Phoenix: export PHOENIX_COLLECTOR_ENDPOINT=http://127.0.0.1:6006",
        )
    target = _mask(s.phoenix_url)
    try:
        creds = PhoenixCredentials.from_env(env)
    except TracejudgeError as exc:
        return _settings_failed("phoenix", target, exc)
    with PhoenixApi(creds, timeout=s.timeout, max_retries=0) as api:
        try:
            page = api.get("/v1/projects", {"limit": 100})
        except PhoenixApiError as exc:
            return Check(name="phoenix", status="fail", target=target, **_phoenix_why(exc.status))
    names = [str(p.get("name")) for p in (page.get("data") or [])] if isinstance(page, dict) else []
    return Check(
        name="phoenix",
        status="ok",
        target=target,
        detail=f"reachable; {len(names)} project(s)" + (f": {', '.join(names[:5])}" if names else ""),
        facts={"projects": ", ".join(names[:20])},
    )


def _phoenix_why(status: int | None) -> dict[str, str]:
    if status in (401, 403):
        return {
            "detail": f"the API key was refused (HTTP {status})",
            "fix": "set PHOENIX_API_KEY to an API key of this Phoenix (settings → API keys)",
        }
    if status == 404:
        return {
            "detail": "no Phoenix REST API at this URL (HTTP 404 on /v1/projects)",
            "fix": "set PHOENIX_COLLECTOR_ENDPOINT to the server's root, e.g. http://127.0.0.1:6006",
        }
    if status is None:
        return {
            "detail": "cannot reach the server",
            "fix": "start Phoenix or correct PHOENIX_COLLECTOR_ENDPOINT (scheme, host and port)",
        }
    return {"detail": f"the server answered HTTP {status}", "fix": "check the server's logs"}


def check_judge(s: DoctorSettings, *, call: bool) -> Check:
    target = _mask(s.judge_base_url or "https://api.openai.com/v1")
    if not s.judge_base_url and not s.judge_key_set:
        return Check(
            name="judge",
            status="not_configured",
            detail="OPENAI_BASE_URL and OPENAI_API_KEY not set",
            fix="export OPENAI_API_KEY=… for OpenAI, or OPENAI_BASE_URL=http://HOST:PORT/v1 for a "
            "compatible server (Ollama, vLLM)",
        )
    if not call:
        return Check(
            name="judge",
            status="skipped",
            target=target,
            detail="configured; not called",
            fix="doctor --judge",
        )
    if not s.judge_model:
        return Check(
            name="judge",
            status="fail",
            target=target,
            detail="no model to call",
            fix="pass --judge-model MODEL (or export TRACEJUDGE_JUDGE_MODEL)",
        )
    from tracejudge.judge import JudgeCallError, OpenAIJudgeClient
    from tracejudge.schema import JudgeConfig

    config = JudgeConfig(
        model=s.judge_model,
        base_url=s.judge_base_url,
        max_tokens=1,
        timeout_s=s.timeout,
        max_retries=0,
        response_format="none",
    )

    async def one_token() -> str:
        client = OpenAIJudgeClient(config, concurrency=1)
        try:
            reply = await client.complete([{"role": "user", "content": "Reply with OK."}], schema=None)
        finally:
            await client.aclose()
        return reply.model or s.judge_model or ""

    try:
        model = asyncio.run(one_token())
    except JudgeCallError as exc:
        fixes = {
            "auth_error": "set OPENAI_API_KEY to a key this endpoint accepts",
            "connection_error": "start the server or correct OPENAI_BASE_URL (scheme, host, port, /v1)",
            "timeout": "the endpoint did not answer in time: check it is up, or raise --timeout",
            "bad_request": f"check the model name {s.judge_model!r} and that OPENAI_BASE_URL ends in /v1",
        }
        return Check(
            name="judge",
            status="fail",
            target=target,
            detail=f"the one-token call failed: {exc.kind}",
            fix=fixes.get(exc.kind, "check the endpoint's logs"),
            facts={"model": s.judge_model},
        )
    return Check(
        name="judge",
        status="ok",
        target=target,
        detail=f"a one-token call to {s.judge_model} answered",
        facts={"model": model},
    )


def check_metrics(s: DoctorSettings) -> Check:
    if not s.metrics_endpoint:
        return Check(
            name="otlp_metrics",
            status="not_configured",
            detail="OTEL_EXPORTER_OTLP_ENDPOINT not set (score and collect push no metrics)",
            fix="to push metrics: export OTEL_EXPORTER_OTLP_ENDPOINT=http://HOST:4318",
        )
    target = _mask(s.metrics_endpoint)
    try:
        # An empty ExportMetricsServiceRequest: a valid OTLP/HTTP request carrying no data.
        r = httpx.post(
            s.metrics_endpoint,
            content=b"",
            headers={"Content-Type": "application/x-protobuf", "User-Agent": f"tracejudge/{__version__}"},
            timeout=s.timeout,
        )
    except httpx.HTTPError as exc:
        return Check(
            name="otlp_metrics",
            status="fail",
            target=target,
            detail=f"cannot reach the endpoint ({_unreachable(exc)})",
            fix="start the OTLP collector or correct OTEL_EXPORTER_OTLP_ENDPOINT (http://HOST:4318)",
        )
    if r.status_code >= 300:
        fix = (
            "OTEL_EXPORTER_OTLP_ENDPOINT is the collector's root (tracejudge adds /v1/metrics); "
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is the full URL"
            if r.status_code == 404
            else "check OTEL_EXPORTER_OTLP_HEADERS (auth) and the collector's logs"
        )
        return Check(
            name="otlp_metrics",
            status="fail",
            target=target,
            detail=f"the endpoint answered HTTP {r.status_code} to an empty OTLP metrics export",
            fix=fix,
        )
    return Check(name="otlp_metrics", status="ok", target=target, detail="accepts OTLP/HTTP metrics")


def run_doctor(
    settings: DoctorSettings,
    *,
    judge: bool = False,
    deep: bool = False,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    traces_read: Callable[[int, int], None] | None = None,
) -> DoctorReport:
    """Run every check in order; never raises for a broken setting (that is a ``fail`` check). ``deep``
    reads every stored trace back (``traces_read(done, total)`` after each)."""
    e = os.environ if env is None else env
    say = progress or (lambda _m: None)
    steps: list[tuple[str, Callable[[], Check]]] = [
        ("store", lambda: check_store(settings)),
        ("store_data", lambda: check_store_data(settings, deep=deep, progress=traces_read)),
        ("receiver", lambda: check_receiver(settings)),
        ("langfuse", lambda: check_langfuse(settings, e)),
        ("phoenix", lambda: check_phoenix(settings, e)),
        ("judge", lambda: check_judge(settings, call=judge)),
        ("otlp_metrics", lambda: check_metrics(settings)),
    ]
    checks = []
    for name, step in steps:
        say(f"checking {name}")
        # What a server said (a project name, an error) passes the redactor like everything else.
        checks.append(Check.model_validate(redact_data(step().model_dump(), e)))
    return DoctorReport(version=__version__, checks=tuple(checks))
