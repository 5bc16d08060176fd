"""A score run over stored traces, one of which the store holds damaged: that item is indeterminate with a
reason naming the damage and what to run, and the rest are scored (a StoreError stopped the run before)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.runs.test_shared_still_arriving import late_beside_whole
from tests.store.damage import cut_chunks
from tracejudge.cli import cli
from tracejudge.judge import load_rubric
from tracejudge.runs import score_run, store_loader
from tracejudge.store import open_store


def test_a_damaged_trace_is_an_indeterminate_item_and_the_rest_are_scored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    _, late, done, rubric_path = late_beside_whole(url, tmp_path)
    cut_chunks(tmp_path / "store.db", late)
    store = open_store(url)
    try:
        why = store_loader(store)(late)
        assert isinstance(why, str)
        assert why.startswith("store_damaged: a stored chunk of spans")
        assert "tracejudge doctor --deep" in why
        run = score_run(load_rubric(rubric_path), store, [late, done])
        items = {i.trace_id: i for i in store.iter_score_items(run.run_id)}
    finally:
        store.close()
    assert items[late].verdict == "indeterminate"
    assert items[late].reason == why
    assert items[done].verdict == "pass"
    assert (run.summary.overall.n, run.summary.overall.indeterminate) == (2, 1)


def test_score_names_a_damaged_trace_and_scores_it_as_indeterminate(tmp_path: Path) -> None:
    """``score --trace`` takes a damaged trace as stored (it is: it does not read back), not as an id that
    names nothing; the run makes it an indeterminate item that names the damage."""
    url = f"sqlite:///{tmp_path}/store.db"
    _, late, done, rubric_path = late_beside_whole(url, tmp_path)
    cut_chunks(tmp_path / "store.db", late)
    args = ["--store", url, "score", "--rubric", str(rubric_path), "--trace", late, "--trace", done, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    items = {i["trace_id"]: i for i in json.loads(result.stdout)["items"]}
    assert items[done]["verdict"] == "pass"
    assert items[late]["verdict"] == "indeterminate"
    assert items[late]["reason"].startswith("store_damaged: ")
    assert "no spans stored" not in result.output
