"""The CLI's garbage-collection policy during a run (``tracejudge.cli._gc``)."""

from __future__ import annotations

import gc

import pytest

from tracejudge.cli._gc import RUN_THRESHOLD, collected_after_start_up


def test_no_collection_while_starting_then_start_up_frozen_and_all_restored() -> None:
    gc.unfreeze()  # as in a fresh process (main() freezes at its end, and tests may call it)
    before = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    with collected_after_start_up() as started:
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]  # made while the run starts: lives as long as the run
        started()
        assert gc.isenabled()
        assert gc.get_threshold() == RUN_THRESHOLD
        assert gc.get_freeze_count() >= len(kept)
        frozen = gc.get_freeze_count()
        started()  # only the first call freezes
        assert gc.get_freeze_count() == frozen
        # Garbage made during the run is still collected.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == before


def test_a_run_that_never_started_restores_the_collector() -> None:
    gc.unfreeze()
    before = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    try:
        with collected_after_start_up():
            raise KeyError("the run failed before its first item")
    except KeyError:
        pass
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == before


def test_objects_frozen_before_stay_frozen_with_ours() -> None:
    # Ours cannot be told from the process's own frozen objects: thawing would thaw those too.
    gc.freeze()
    try:
        with collected_after_start_up() as started:
            made = [[i] for i in range(100)]
            started()
        assert gc.get_freeze_count() >= len(made)
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with collected_after_start_up() as started:
            started()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_process_that_ends_with_the_command_keeps_start_up_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    # The console entry ends the process after the command: thawing a million objects there only
    # handed them to the next collection.
    from tracejudge.cli import _gc

    monkeypatch.setattr(_gc, "_ENDING", [False])
    gc.unfreeze()
    threshold = gc.get_threshold()
    _gc.process_ends_with_the_command()
    try:
        with collected_after_start_up() as started:
            made = [[i] for i in range(100)]
            started()
        assert gc.get_freeze_count() >= len(made)
        assert gc.get_threshold() == RUN_THRESHOLD
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
        gc.enable()
