"""The shared JSON client reads answers as the json module does, whichever parser reads them."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tracejudge.write import PhoenixApi, PhoenixApiError, PhoenixCredentials

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
