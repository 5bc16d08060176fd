"""The shared JSON client: answers read as the json module reads them, whichever parser reads them;
its counters and its pause after a 429 with several threads sending."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tracejudge.testing.langfuse_server import Fault, LangfuseServer, synthetic_trace
from tracejudge.write import (
    LangfuseApi,
    LangfuseCredentials,
    LangfuseWriter,
    PhoenixApi,
    PhoenixApiError,
    PhoenixCredentials,
    ScoreRecord,
)

# Bodies by path: what orjson reads, and what only json reads (NaN, integers beyond 64 bits, UTF-16).
BODIES: dict[str, bytes] = {
    "/plain": json.dumps({"data": [{"a": 1.5, "b": "é", "c": None}], "next_cursor": None}).encode(),
    "/nan": b'{"score": NaN, "big": 123456789012345678901234567890}',
    "/utf16": json.dumps({"name": "trace"}).encode("utf-16"),
    "/broken": b'{"data": [',
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = BODIES[self.path.split("?")[0]]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[PhoenixApi]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    creds = PhoenixCredentials.model_validate({"base_url": f"http://127.0.0.1:{server.server_port}"})
    with PhoenixApi(creds, max_retries=0) as client:
        yield client
    server.shutdown()
    server.server_close()


def test_answers_read_as_json_reads_them(api: PhoenixApi) -> None:
    assert api.get("/plain") == json.loads(BODIES["/plain"])
    odd = api.get("/nan")
    assert math.isnan(odd["score"])
    assert odd["big"] == 123456789012345678901234567890
    assert api.get("/utf16") == {"name": "trace"}


def test_a_body_that_is_not_json_is_an_error_naming_it(api: PhoenixApi) -> None:
    with pytest.raises(PhoenixApiError, match="not JSON"):
        api.get("/broken")


# -- several threads: the counters, and the pause after a 429 ----------------------------------------


def _langfuse_api(srv: LangfuseServer, **kwargs: Any) -> LangfuseApi:
    creds = LangfuseCredentials.model_validate(
        {"base_url": srv.base_url, "public_key": srv.public_key, "secret_key": srv.secret_key}
    )
    return LangfuseApi(creds, **kwargs)


class _YieldingCount(int):
    """A count whose addition lets other threads run between reading it and storing the sum, as a
    free-threaded build (or an unlucky switch) may: ``retries += 1`` unlocked then loses counts."""

    def __add__(self, other: object) -> _YieldingCount:
        value = int(self) + int(other)  # type: ignore[call-overload]
        time.sleep(0.0005)
        return _YieldingCount(value)


def test_retries_and_waits_are_counted_from_many_threads():
    srv = LangfuseServer(record=True).start()
    # The first 120 reads are answered 500, the next 120 429 (no wait asked): 240 retries in all.
    srv.inject(
        Fault("500", path="^/projects$", times=120),
        Fault("429", path="^/projects$", times=120, retry_after=0),
    )
    sleeps: list[float] = []
    try:
        with _langfuse_api(srv, max_retries=500, backoff=0.0, sleep=sleeps.append) as api:
            api.retries = _YieldingCount(0)

            def reads() -> None:
                for _ in range(10):
                    api.get("/projects")

            threads = [threading.Thread(target=reads) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        srv.stop()
    refused = [r for r in srv.requests if r.status in (429, 500)]
    assert len(refused) == 240
    assert len([r for r in srv.requests if r.status == 200]) == 160
    # Every refused request was retried once, and counted once; every wait slept is in waits.
    assert api.retries == 240
    assert sorted(api.waits) == sorted(sleeps)
    assert srv.response_errors == []


def _scores(n: int) -> list[ScoreRecord]:
    trace = synthetic_trace(0)
    return [
        ScoreRecord(
            trace_id=trace["id"],
            name=f"criterion-{i}",
            value=float(i % 10),
            data_type="NUMERIC",
            timestamp=datetime(2026, 3, 1, 9, 30, tzinfo=UTC),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("retry_after", "window", "holder_tries"),
    [
        # Retry-After 1 s: the request holding the pause is sent at most at 0, 1 and 2 s of a 2.5 s window.
        (1, 2.5, 3),
        # No Retry-After: it backs off 0.05, 0.1, 0.2, 0.4, 0.8 s (and more): at most 5 sends in 1 s.
        (None, 1.0, 5),
    ],
)
def test_a_rate_limit_pauses_the_writers_other_requests(retry_after, window, holder_tries):
    srv = LangfuseServer().start()
    limited = Fault("429", path="^/scores$", method="POST", times=None, retry_after=retry_after)
    srv.inject(limited)
    records = _scores(200)
    lift = threading.Timer(window, srv.lift, args=(limited,))
    concurrency = 8
    try:
        api = _langfuse_api(srv, max_retries=10, backoff=0.05)
        with LangfuseWriter(api, concurrency=concurrency) as w:
            lift.start()
            report = w.write_scores(records)
    finally:
        lift.cancel()
        srv.stop()
    assert report.written == 200
    assert len(srv.scores) == 200
    # The requests the server received while it answered 429: the one holding the pause, sent
    # again after each wait, and at most one from each other thread (sent before it knew of the
    # pause). Each thread retrying on its own sends about concurrency x holder_tries (24 and 40).
    refused = [r for r in srv.requests if r.status == 429]
    assert 1 <= len(refused) <= (concurrency - 1) + holder_tries
    assert api.retries == len(refused)
    # Only the thread holding the pause slept; the others waited for its answer.
    assert 1 <= len(api.waits) <= holder_tries
    assert srv.request_errors == []
    assert srv.response_errors == []
