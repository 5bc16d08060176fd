from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tracejudge.testing.phoenix_server import PhoenixServer
from tracejudge.write import PhoenixApi, PhoenixCredentials

KEY = "phx-secret-key-8d2e"


@pytest.fixture
def server() -> Iterator[PhoenixServer]:
    srv = PhoenixServer(api_key=KEY).start()
    yield srv
    srv.stop()
    # Every response the server sent must match Phoenix's spec, and every request too.
    assert srv.response_errors == []
    assert srv.request_errors == []


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def api_for(sleeps: list[float], closing: list[Any]) -> object:
    def make(srv: PhoenixServer, **kwargs: object) -> PhoenixApi:
        creds = PhoenixCredentials.from_env(
            {"PHOENIX_COLLECTOR_ENDPOINT": srv.base_url, "PHOENIX_API_KEY": KEY}
        )
        api = PhoenixApi(creds, sleep=sleeps.append, backoff=0.01, **kwargs)  # type: ignore[arg-type]
        closing.append(api)
        return api

    return make
