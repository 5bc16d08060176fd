"""``score`` off a terminal (a CronJob's log, ``> score.json 2> score.err``): there is no bar to draw,
and a ``score --run`` worker's log said nothing until the run was over — minutes to hours in which
it could not be told from a hung one. Now a line on stderr every ``--progress-every`` seconds (30 by
default; env TRACEJUDGE_SCORE_PROGRESS_EVERY; 0: none), as items finish, says how many this process
scored; stdout keeps the pure ``--json``."""

from __future__ import annotations

import json
import re

from tests.cli import score_workers as sw
from tests.cli.score_workers import judge  # noqa: F401 - the slow scripted judge
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.testing.openai_server import ScriptedOpenAIServer


def test_a_worker_off_a_terminal_says_how_far_it_got_as_it_goes(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    sw.put_copies(postgres_url, 1)
    # Each judge call takes 0.25 s: every item finishes more than 0.01 s after the line before it.
    worker = sw.start_worker(
        postgres_url, judge, "--run", "nightly", "--concurrency", "1", "--progress-every", "0.01"
    )
    out, err = worker.communicate(timeout=300)
    assert worker.returncode == 0, err[-2000:]
    data = json.loads(out)  # stdout is the JSON alone
    lines = [line for line in err.splitlines() if line.startswith("scoring run nightly: ")]
    assert len(lines) >= 2, err[-2000:]
    scored = [int(re.match(r"scoring run nightly: (\d+) scored here so far", line)[1]) for line in lines]  # type: ignore[index]
    assert scored == sorted(scored)
    assert scored[-1] <= len(data["items"])
    assert re.search(r"\(pass \d+, fail \d+, indeterminate \d+\) in \d+ s$", lines[-1])


def test_no_lines_with_progress_every_0(postgres_url: str, judge: ScriptedOpenAIServer) -> None:  # noqa: F811
    sw.put_copies(postgres_url, 1)
    worker = sw.start_worker(
        postgres_url, judge, "--concurrency", "4", env={"TRACEJUDGE_SCORE_PROGRESS_EVERY": "0"}
    )
    _, err = worker.communicate(timeout=300)
    assert worker.returncode == 0, err[-2000:]
    assert "scoring " not in err
