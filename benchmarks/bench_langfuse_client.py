"""The `langfuse` SDK's generated API client (``langfuse.api.LangfuseAPI``) against tracejudge's
hand-written one (``tracejudge.write.LangfuseApi``), on the same local spec-validated server.

Four measurements, each printed with its figure:

1. coverage: of the Langfuse endpoints tracejudge calls, which ones the SDK's client has a method
   for (read from the SDK's own generated source, so a new SDK release is measured as it is);
2. v4 cursor reads: every observation through ``GET /v2/observations`` page by page (cursor), by
   both clients; the ids must match;
3. retries: a 500, a 429 with ``Retry-After: 1``, and a connection dropped mid-answer, each injected
   once before a read; does the client come back with the data, after how many requests;
4. speed: the cursor read of (2), best of 3, as a ratio SDK / hand-written.

The server runs in this process with its OpenAPI validation on (a request either client sends
wrong is answered 400 and fails the benchmark).

    .venv/bin/python benchmarks/bench_langfuse_client.py [--traces 300] [--page 100]
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracejudge.testing._apiserver import Fault
from tracejudge.testing.langfuse_server import LangfuseServer, synthetic_trace
from tracejudge.write import LangfuseApi, LangfuseCredentials

# The endpoints tracejudge calls (method, path under /api/public, what for).
USED = [
    ("GET", "/health", "server version (collect, doctor)"),
    ("GET", "/projects", "the key's project (doctor)"),
    ("GET", "/v2/observations", "v4 listing and trace reads (collect langfuse)"),
    ("GET", "/v3/scores", "scores, v4 and v3.179+ (collect --feedback/--queue, calibrate --labels)"),
    ("GET", "/v2/scores", "scores on older v3 servers"),
    ("GET", "/traces", "legacy listing (collect on v3)"),
    ("GET", "/traces/{id}", "legacy trace read (collect on v3)"),
    ("POST", "/scores", "score write-back (triage, score)"),
    ("POST", "/v2/datasets", "regress push"),
    ("POST", "/dataset-items", "regress push"),
    ("GET", "/score-configs", "report: score configs"),
    ("POST", "/score-configs", "report: score configs"),
    ("GET", "/annotation-queues", "calibrate sample --queue"),
    ("GET", "/annotation-queues/{id}", "calibrate sample --queue"),
    ("POST", "/annotation-queues/{id}/items", "calibrate sample --queue"),
]


def sdk_routes() -> set[tuple[str, str]]:
    """(method, path) of every route the SDK's generated raw clients call, from their source."""
    import langfuse.api

    root = Path(langfuse.api.__file__).parent
    out: set[tuple[str, str]] = set()
    call = re.compile(r'(?:f?)"api/public(/[^"]*)",\s*(?:base_url=[^,]*,\s*)?method="(\w+)"', re.S)
    for f in root.rglob("raw_client.py"):
        for path, method in call.findall(f.read_text(encoding="utf-8")):
            out.add((method.upper(), re.sub(r"\{jsonable_encoder\([^)]*\)\}", "{id}", path)))
    return out


def coverage() -> list[tuple[str, str, str, bool]]:
    have = sdk_routes()
    return [(m, p, why, (m, p) in have) for m, p, why in USED]


# --- reads ---------------------------------------------------------------------------------------


def hand_read(api: LangfuseApi, page: int) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": page, "fields": "core"}
        if cursor:
            params["cursor"] = cursor
        body = api.get("/v2/observations", params)
        ids.extend(o["id"] for o in body["data"])
        cursor = (body.get("meta") or {}).get("cursor")
        if not cursor:
            return ids


def sdk_read(client: Any, page: int, request_options: dict[str, Any] | None = None) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    while True:
        resp = client.observations.get_many(
            limit=page, fields="core", cursor=cursor, request_options=request_options
        )
        ids.extend(o.id for o in resp.data)
        cursor = resp.meta.cursor if resp.meta is not None else None
        if not cursor:
            return ids


def best_of(n: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def retry_case(
    server: LangfuseServer, fault: Fault, read: Callable[[], list[str]], expected: int
) -> tuple[str, int, float]:
    server.clear_requests()
    server.inject(fault)
    t0 = time.perf_counter()
    try:
        got = read()
        outcome = "ok" if len(got) == expected else f"wrong count {len(got)}"
    except Exception as exc:  # measuring what each client does; any failure is a result
        outcome = f"failed ({type(exc).__name__})"
    elapsed = time.perf_counter() - t0
    requests = sum(1 for r in server.requests if r.path == "/v2/observations")
    return outcome, requests, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=300)
    ap.add_argument("--page", type=int, default=100)
    args = ap.parse_args()

    from importlib.metadata import version

    from langfuse.api import LangfuseAPI

    sdk_version = version("langfuse")

    print(f"langfuse SDK {sdk_version}: generated client langfuse.api.LangfuseAPI")
    rows = coverage()
    covered = sum(r[3] for r in rows)
    print(f"\n1. coverage: {covered} of {len(rows)} endpoints tracejudge calls")
    for m, p, why, ok in rows:
        print(f"   {'yes' if ok else 'NO '}  {m:4} {p:32} {why}")

    with LangfuseServer(generation="v4") as server:
        for i in range(args.traces):
            server.add_trace(synthetic_trace(i))
        creds = LangfuseCredentials.model_validate(
            {"base_url": server.base_url, "public_key": server.public_key, "secret_key": server.secret_key}
        )
        sdk = LangfuseAPI(
            base_url=server.base_url, username=server.public_key, password=server.secret_key, timeout=30
        )
        with LangfuseApi(creds, backoff=0.5) as hand:
            a, b = hand_read(hand, args.page), sdk_read(sdk, args.page)
            pages = sum(1 for r in server.requests if r.path == "/v2/observations") // 2
            same = a == b
            print(
                f"\n2. v4 cursor reads: {len(a)} observations in {pages} pages; hand-written and SDK "
                f"ids {'identical' if same else 'DIFFER'}"
            )
            if not (same and a):
                raise SystemExit("the two clients must read the same observations")

            print("\n3. retries (one fault injected before the read; requests to /v2/observations):")
            faults = [
                ("HTTP 500 once", lambda: Fault("500", path="/v2/observations")),
                ("HTTP 429 Retry-After: 1", lambda: Fault("429", path="/v2/observations", retry_after=1)),
                ("connection dropped", lambda: Fault("drop", path="/v2/observations")),
            ]
            for label, make in faults:
                h = retry_case(server, make(), lambda: hand_read(hand, args.page), len(a))
                s = retry_case(server, make(), lambda: sdk_read(sdk, args.page), len(a))
                print(
                    f"   {label:26} hand-written: {h[0]}, {h[1]} requests, {h[2]:.2f} s | "
                    f"SDK: {s[0]}, {s[1]} requests, {s[2]:.2f} s"
                )

            t_hand = best_of(3, lambda: hand_read(hand, args.page))
            t_sdk = best_of(3, lambda: sdk_read(sdk, args.page))
        print(
            f"\n4. speed, the cursor read of (2), best of 3: hand-written {t_hand * 1000:.0f} ms, "
            f"SDK {t_sdk * 1000:.0f} ms -> SDK / hand-written {t_sdk / t_hand:.2f}x"
        )


if __name__ == "__main__":
    main()
