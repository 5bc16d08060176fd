"""A local run (``score`` without ``--run``) and a trace still arriving (DESIGN 5.5). An item whose trace may
still be arriving is kept as not final — indeterminate, saying why — and the run says what waits and when to
run it again: ``score --run RUN_ID`` (the run's own id) resumes it as a later worker of a shared run does
(tests/runs/test_shared_still_arriving.py) — it scores the kept item once its trace has arrived, and scores
nothing final again; the item is stored, counted in the run's totals (its budget's) and written back once.
On SQLite and on a real PostgreSQL; the batches are the real SDK's BatchSpanProcessor's
(tests/localize/test_late_spans.py)."""

from __future__ import annotations

import json
import shlex
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from click.testing import CliRunner

from tests.cli.score_workers import langfuse
from tests.localize.test_late_spans import RUNS, _batches, collect_batch
from tests.runs.test_shared_still_arriving import assert_late_kept, late_beside_whole
from tests.runs.test_still_arriving import RUBRIC
from tests.store.conftest import postgres_url, store_url  # noqa: F401 - the store fixtures
from tracejudge.cli import cli
from tracejudge.runs import left_waiting
from tracejudge.schema import ItemResult
from tracejudge.store import RunProgress, open_store


def _score(url: str, rubric: Path, *args: str) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(cli, ["--store", url, "score", "--rubric", str(rubric), *args, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out, " ".join(result.stderr.split())


def _resume(url: str, command: str) -> tuple[dict[str, Any], str]:
    """Run the command a run printed to go on with it, as printed (the store the environment's when it
    names none; a PostgreSQL URL's password is never printed: PostgreSQL reads it from a password file)."""
    args = shlex.split(command)
    assert args[0] == "tracejudge"
    password = urlsplit(url).password
    if password is not None:
        assert f":{password}@" not in command
    env = {} if "--store" in args else {"TRACEJUDGE_STORE": url}
    result = CliRunner().invoke(cli, [*args[1:], "--json"], env={**env, **password_env(url)})
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out, " ".join(result.stderr.split())


def password_env(url: str) -> dict[str, str]:
    """The environment giving PostgreSQL the password of ``url`` as a user would (a password file,
    ``PGPASSFILE``: not PGPASSWORD, whose value every output redacts, and the test server's password is
    its user's name, which the printed command holds); none when it has none."""
    password = urlsplit(url).password
    if password is None:
        return {}
    path = Path(tempfile.mkdtemp()) / "pgpass"
    path.write_text(f"*:*:*:*:{unquote(password)}\n")
    path.chmod(0o600)
    return {"PGPASSFILE": str(path)}


def _left_waiting(url: str, run_id: str) -> tuple[int, bool]:
    store = open_store(url)
    try:
        run = store.get_run(run_id)
    finally:
        store.close()
    assert run is not None
    return run.left_waiting, left_waiting(run)


def _stored(url: str, run_id: str) -> tuple[dict[str, ItemResult], RunProgress]:
    store = open_store(url)
    try:
        return {i.trace_id: i for i in store.iter_score_items(run_id)}, store.run_progress(run_id)
    finally:
        store.close()


def test_a_local_run_resumed_scores_an_item_left_still_arriving_once_its_trace_has_arrived(
    store_url: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    rest, late, done, rubric = late_beside_whole(store_url, tmp_path)
    selection = ("--trace", late, "--trace", done, "--budget-usd", "5")

    out, said = _score(store_url, rubric, *selection)
    run_id = out["run_id"]
    # Kept, and what waits, when, and the command that resumes it said as a shared run says it: `score
    # --run RUN_ID` with the options the run must be resumed with (its selection and budget among them).
    command = assert_late_kept(out, said, late, done, run_id)
    assert shlex.split(command)[-8:] == [
        "--run",
        run_id,
        "--trace",
        late,
        "--trace",
        done,
        "--budget-usd",
        "5.0",
    ]
    items, progress = _stored(store_url, run_id)
    assert items[late].verdict == "indeterminate"
    assert (progress.done, progress.pending, progress.claimed, progress.waiting) == (1, 0, 0, 1)
    scored_at = items[done].scored_at
    # Recorded at rest with the item waiting (what audit's drift reads), not merely running with a summary.
    assert _left_waiting(store_url, run_id) == (1, True)

    # Resumed before the rest has arrived, by the command as printed: nothing is scored (the final item is
    # not scored again).
    out, said = _resume(store_url, command)
    assert out["items"] == []
    assert (out["waiting"]["items"], out["waiting"]["command"], out["status"]) == (1, command, "running")
    assert said.endswith(command)
    assert _stored(store_url, run_id)[1].done == 1

    # The rest arrives: the resume scores the kept item at once, and only it; stored and counted once.
    collect_batch(store_url, tmp_path / "rest.json", rest)
    out, said = _resume(store_url, command)
    assert [(i["trace_id"], i["verdict"]) for i in out["items"]] == [(late, "pass")]
    assert out["waiting"] == {"items": 0, "after_s": None, "command": None}
    assert "still arriving" not in said
    assert (out["run_id"], out["summary"]["n"], out["summary"]["pass"], out["status"]) == (
        run_id,
        2,
        2,
        "complete",
    )
    items, progress = _stored(store_url, run_id)
    assert _left_waiting(store_url, run_id) == (0, False)
    assert {t: i.verdict for t, i in items.items()} == {late: "pass", done: "pass"}
    assert items[done].scored_at == scored_at
    assert (progress.done, progress.pending, progress.claimed, progress.waiting) == (2, 0, 0, 0)

    # Nothing is left: another resume scores nothing.
    out, _ = _score(store_url, rubric, *selection, "--run", run_id)
    assert out["items"] == []
    assert _stored(store_url, run_id)[1].done == 2


def test_a_local_run_with_nothing_still_arriving_says_nothing_waits(
    tmp_path: Path,
) -> None:
    run = next(r for r in RUNS if r.name == "draft-then-answer")
    whole = [s for batch in _batches(run) for s in batch]
    url = f"sqlite:///{tmp_path}/store.db"
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(RUBRIC)
    collect_batch(url, tmp_path / "whole.json", whole)
    out, said = _score(url, rubric, "--trace", f"{whole[0].context.trace_id:032x}")
    assert [i["verdict"] for i in out["items"]] == ["pass"]
    assert out["waiting"] == {"items": 0, "after_s": None, "command": None}
    assert (out["status"], out["summary"]["waiting"]) == ("complete", 0)
    assert "still arriving" not in said
    # Not made a resumable run: the store holds no queue for it.
    assert _stored(url, out["run_id"])[1] == RunProgress()


def test_a_local_run_writes_back_an_item_left_still_arriving_once_it_is_scored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    rest, late, done, rubric = late_beside_whole(url, tmp_path)
    selection = ("--trace", late, "--trace", done, "--write-back", "langfuse")
    with langfuse() as (server, env):

        def score(*more: str) -> dict[str, Any]:
            args = ["--store", url, "score", "--rubric", str(rubric), *selection, *more, "--json"]
            result = CliRunner().invoke(cli, args, env=env)
            assert result.exit_code == 0, result.output
            out: dict[str, Any] = json.loads(result.stdout)
            return out

        run_id = score()["run_id"]
        # The kept item is not written back: its verdict is not final.
        written = Counter(s["traceId"] for s in server.scores)
        assert set(written) == {done}
        collect_batch(url, tmp_path / "rest.json", rest)
        out = score("--run", run_id)
        assert [(i["trace_id"], i["verdict"]) for i in out["items"]] == [(late, "pass")]
        assert out["write_back_pending"] == 0
        # Written back once it is scored; the final item is not written again.
        again = Counter(s["traceId"] for s in server.scores)
        assert again[done] == written[done]
        assert again[late] > 0
