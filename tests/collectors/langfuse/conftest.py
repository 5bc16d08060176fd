from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tracejudge.testing.langfuse_server import LangfuseServer
from tracejudge.write import LangfuseApi, LangfuseCredentials


class RecordingSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_server(generation: str, **kwargs: object) -> LangfuseServer:
    return LangfuseServer(generation=generation, **kwargs).start()  # type: ignore[arg-type]


@pytest.fixture(params=["v4", "v3"])
def server(request: pytest.FixtureRequest) -> Iterator[LangfuseServer]:
    srv = make_server(request.param)
    yield srv
    srv.stop()
    # Every response the server sent must match the official spec.
    assert srv.response_errors == []


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def api_for(sleep: RecordingSleep, closing: list[Any]) -> object:
    def make(srv: LangfuseServer, **kwargs: object) -> LangfuseApi:
        creds = LangfuseCredentials.model_validate(
            {"base_url": srv.base_url, "public_key": srv.public_key, "secret_key": srv.secret_key}
        )
        api = LangfuseApi(creds, sleep=sleep, backoff=0.01, **kwargs)  # type: ignore[arg-type]
        closing.append(api)
        return api

    return make
