"""``score --run NAME --write-back T --json``: each worker's ``write_back`` reports what it wrote; a
script reading one worker's output could not tell whether the whole run was written back — another
worker may still be writing, or a write-back may have failed and left items for the next worker.
``write_back_pending`` says how many of the run's stored items are not written back yet when this
worker is done (0: all of them are), and stderr says what to do when some are."""

from __future__ import annotations

import json

from tests.cli import score_workers as sw
from tests.cli.score_workers import judge  # noqa: F401 - the slow scripted judge
from tests.store.conftest import postgres_url  # noqa: F401 - the fresh-database fixture
from tracejudge.testing.openai_server import ScriptedOpenAIServer


def test_a_worker_says_how_much_of_the_run_is_left_to_write_back(
    postgres_url: str,  # noqa: F811
    judge: ScriptedOpenAIServer,  # noqa: F811
) -> None:
    spans = sw.put_copies(postgres_url, 1)
    everything = {s.trace_id for s in spans}
    with sw.langfuse() as (langfuse, env):
        args = ("--run", "pending", "--concurrency", "4", "--write-back", "langfuse")
        # A wrong key: every score is refused, and the run's items stay for a later worker.
        refused = sw.start_worker(
            postgres_url, judge, *args, env={**env, "LANGFUSE_SECRET_KEY": "sk-lf-wrong"}
        )
        out, err = refused.communicate(timeout=300)
        assert refused.returncode == 0, err[-2000:]
        first = json.loads(out)
        assert first["write_back"][0]["failed"]
        assert first["write_back_pending"] == len(everything)
        assert f"write-back: {len(everything)} of the run's stored items are not written back yet" in err
        # A later worker of the run, its key right, writes them all: nothing of the run is left.
        last = sw.finish(sw.start_worker(postgres_url, judge, *args, env=env))
    assert last["items"] == []
    assert last["write_back_pending"] == 0
    assert {s["traceId"] for s in langfuse.scores} == everything
