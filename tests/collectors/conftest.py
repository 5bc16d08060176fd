from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from tracejudge.store import SqliteStore


class _Closable(Protocol):
    def close(self) -> None: ...


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    st = SqliteStore(tmp_path / "t.db")
    yield st
    st.close()


@pytest.fixture
def closing() -> Iterator[list[_Closable]]:
    """Clients a test opened; each is closed after the test."""
    made: list[_Closable] = []
    yield made
    for client in made:
        client.close()
