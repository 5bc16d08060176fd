"""The command a run left waiting prints (``waiting.command``, and on stderr) goes on with the run as
printed: every option a later worker must share with the run — its selection (times as the run read them),
``--repeat``, budget to the last digit — is in it, so the run takes it as its own worker rather than refusing
it (tests/cli/test_score_shared_run.py: a worker with another selection, budget or repeat is refused)."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.runs.test_local_still_arriving import _resume, _score
from tests.runs.test_shared_still_arriving import late_beside_whole


def test_the_printed_command_is_taken_by_the_run_as_its_own_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    late_beside_whole(url, tmp_path)
    rubric = tmp_path / "rubric.yaml"
    options = ("--from", "7d", "--sample", "1.0", "--limit", "10", "--repeat", "2")
    budget = ("--budget-usd", "0.0123456789", "--budget-tokens", "100000")
    out, said = _score(url, rubric, "--run", "nightly", *options, *budget)
    command = out["waiting"]["command"]
    assert out["waiting"]["items"] == 1
    assert said.endswith(command)
    args = shlex.split(command)
    # The relative --from as the run read it (a time), the rest as given; the store this command was given.
    assert args[:3] == ["tracejudge", "--store", url]
    assert args[args.index("--from") + 1] == out["selection"]["since"]
    given = (*options[2:], *budget)
    for flag, value in zip(given[::2], given[1::2], strict=True):
        assert float(args[args.index(flag) + 1]) == float(value), flag

    # Run as printed: joined, not refused; nothing is scored before the rest has arrived.
    out, _ = _resume(url, command)
    assert (out["run_id"], out["items"], out["waiting"]["items"], out["status"]) == (
        "nightly",
        [],
        1,
        "running",
    )
