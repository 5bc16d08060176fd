"""A ``score --run`` worker sent SIGTERM (Kubernetes, systemd, ``timeout``) keeps the result of the item
whose judge reply it has in hand. The CLI's handler raised KeyboardInterrupt wherever the main thread
was — often inside the worker's own task, between the reply and the store call that keeps the item's
result: the task died with the result, the store call never went out, and a rerun paid the judge for
that item again. Now the signal cancels the command at the loop's next turn, the item in hand is stored
first, and the signal then reaches the CLI's handler (exit 143) once the loop is closed.

The signal is raised on the loop's thread as the worker's first judge reply comes in — the moment it
landed in — so the order that was a matter of timing is the one every run takes."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from tests.store.conftest import postgres_url, store_url  # noqa: F401 - the store fixtures
from tracejudge.judge import OpenAIJudgeClient, load_rubric
from tracejudge.runs import ScoreOptions, score_traces
from tracejudge.runs._run import score_run_async
from tracejudge.schema import ItemResult
from tracejudge.store import SqliteStore, open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer

if TYPE_CHECKING:
    from tests.conftest import Restaurant
    from tracejudge.judge import Completion


@contextlib.contextmanager
def _cli_sigterm() -> Iterator[list[int]]:
    """The CLI's SIGTERM handler (tracejudge.cli.main) while the block runs: it notes the signal (the
    exit code is 128 + it) and raises KeyboardInterrupt; the signals it took."""
    took: list[int] = []

    def terminate(signum: int, _frame: FrameType | None) -> None:
        took.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield took
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_as_a_reply_comes_in_keeps_that_items_result_and_a_rerun_does_not_pay_for_it_again(
    store_url: str,  # noqa: F811
    restaurant: Restaurant,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rubric = load_rubric(restaurant.rubric)
    ids = sorted({s.trace_id for s in restaurant.spans})
    options = ScoreOptions(run_name="termed", concurrency=1, use_cache=False, lease_s=300)
    store = open_store(store_url)
    real = OpenAIJudgeClient.complete
    replies = 0

    async def reply_then_sigterm(
        self: OpenAIJudgeClient, messages: Sequence[dict[str, str]], *, schema: dict[str, Any] | None
    ) -> Completion:
        nonlocal replies
        completion = await real(self, messages, schema=schema)
        replies += 1
        if replies == 1:
            signal.raise_signal(signal.SIGTERM)  # its handler runs here, in the worker's task
        return completion

    try:
        store.put_spans(restaurant.spans)
        with ScriptedOpenAIServer(restaurant.rules) as judge, _cli_sigterm() as took:
            monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            with monkeypatch.context() as patched:
                patched.setattr(OpenAIJudgeClient, "complete", reply_then_sigterm)
                with pytest.raises(KeyboardInterrupt):
                    score_traces(store, rubric, trace_ids=ids, options=options)
            assert took == [signal.SIGTERM]  # the CLI's handler had it once: exit 143
            assert replies == 1  # stopped at the first judge reply
            stopped = {i.trace_id: i for i in store.iter_score_items("termed")}
            # The reply that came in with the signal is stored with its item (before: 0 of 1 paid).
            assert sum(len(i.replies) for i in stopped.values()) == len(judge.requests) == 1
            progress = store.run_progress("termed")
            assert progress.claimed == 0  # the rest went back at once
            assert progress.done == len(stopped)
            rerun = score_traces(store, rubric, trace_ids=ids, options=options)
        assert rerun.run.status == "complete"
        again = [i.trace_id for i in rerun.items]
        assert not set(again) & set(stopped)  # nothing the stopped worker stored is scored again
        assert sorted([*stopped, *again]) == ids  # every item once
        # Every judge call's reply is stored: none paid for twice (before: one more call than replies).
        kept = sum(len(i.replies) for i in store.iter_score_items("termed"))
        assert len(judge.requests) == kept
    finally:
        store.close()


class _HeldFinish(SqliteStore):
    """A store whose first ``finish_run_item``, once sent, waits to be released; it notes the order in
    which results are stored and the worker leaves."""

    sent: threading.Event
    release: threading.Event
    left: threading.Event
    calls: list[str]

    def finish_run_item(self, item: ItemResult, *, worker: str) -> bool:
        if not self.sent.is_set():
            self.sent.set()
            assert self.release.wait(120), "never released"  # bounded: a failure, not a hang
        stored = super().finish_run_item(item, worker=worker)
        self.calls.append(f"stored {item.trace_id}")
        return stored

    def leave_run(self, run_id: str, *, worker: str) -> None:
        self.calls.append("left")
        self.left.set()
        super().leave_run(run_id, worker=worker)


def test_a_stopped_worker_leaves_only_once_the_result_it_was_storing_is_stored(
    restaurant: Restaurant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped while an item's store call was out, the worker gave way at once: it left the run (and its
    caller could close the store) with the call still under way. Now it waits for the call, then
    stops."""
    store = _HeldFinish(tmp_path / "s.db")
    store.sent, store.release, store.left = threading.Event(), threading.Event(), threading.Event()
    store.calls = []
    rubric = load_rubric(restaurant.rubric)
    ids = sorted({s.trace_id for s in restaurant.spans})
    options = ScoreOptions(run_name="held", concurrency=1, use_cache=False, lease_s=300)

    async def stopped_while_storing() -> bool:
        run = asyncio.create_task(score_run_async(rubric, store, ids, options=options))
        await asyncio.to_thread(store.sent.wait)
        run.cancel()  # what Ctrl-C (and now SIGTERM) does to the command
        # Before, the worker left within this wait; now it cannot while the store call is held.
        left_meanwhile = await asyncio.to_thread(store.left.wait, 2.0)
        store.release.set()
        with pytest.raises(asyncio.CancelledError):
            await run
        return left_meanwhile

    try:
        store.put_spans(restaurant.spans)
        with ScriptedOpenAIServer(restaurant.rules) as judge:
            monkeypatch.setenv("OPENAI_BASE_URL", judge.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            assert not asyncio.run(stopped_while_storing())
            (first,) = (c for c in store.calls if c.startswith("stored "))
            assert store.calls == [first, "left"]  # stored, then left
            progress = store.run_progress("held")
            assert (progress.done, progress.claimed) == (1, 0)
            seen: list[str] = []
            rerun = score_run_async(
                rubric, store, ids, options=options, on_item=lambda i: seen.append(i.trace_id)
            )
            assert asyncio.run(rerun).status == "complete"
        assert first.removeprefix("stored ") not in seen  # not scored again
        assert len(seen) == len(set(seen)) == len(ids) - 1
    finally:
        store.close()
