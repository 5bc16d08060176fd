"""``tracejudge demo score|calibrate|regress`` from an empty folder: offline, scripted model in-process,
everything written under the work folder and nothing into the bundled examples."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracejudge._bundled import example_module, find_example, is_bundled
from tracejudge.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _tree(folder: Path) -> dict[str, float]:
    return {
        str(p.relative_to(folder)): p.stat().st_mtime
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracejudge", "demo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_demo_regress_runs_the_loop_in_one_command_and_writes_only_under_its_work_folder(
    tmp_path: Path,
) -> None:
    before = _tree(EXAMPLES)
    result = _demo(tmp_path, "regress", "--json")
    assert result.returncode == 0, result.stderr + result.stdout
    report: dict[str, Any] = json.loads(result.stdout)
    first, second = report["runs"]
    assert (first["target"], second["target"]) == ("agent", "agent_fixed")
    failing = {s["sample_id"] for s in first["samples"] if s["outcome"] == "fail"}
    assert len(failing) == 8
    # Real verdicts, not connection errors: nothing indeterminate in either run.
    assert all(s["outcome"] in ("pass", "fail") for r in report["runs"] for s in r["samples"])
    assert set(report["fixed"]) == failing
    assert {s["change"] for s in second["samples"]} == {"fixed", "still_passing"}
    assert report["check_ok"] is True
    assert report["kinds"] == {"failure": 7, "success": 2, "reasonable_rejection": 1, "boundary": 1}
    assert report["ok"] is True
    work = Path(report["workdir"])
    assert (tmp_path / work).resolve().is_relative_to((tmp_path / ".tracejudge" / "demo").resolve())
    runs = sorted((tmp_path / report["suite"] / "runs").glob("*.json"))
    assert [p.name for p in runs] == sorted(f"{r['run_id']}.json" for r in report["runs"])
    assert _tree(EXAMPLES) == before
    assert str(work) in result.stderr  # says where it writes


def test_demo_score_scores_the_restaurant_battery_offline(tmp_path: Path) -> None:
    out = tmp_path / "work"
    result = _demo(tmp_path, "score", "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(result.stdout)
    s = report["summary"]
    assert (s["n"], s["pass"], s["fail"], s["indeterminate"]) == (14, 7, 6, 1)
    assert (out / "tracejudge.db").is_file()
    assert str(out) in result.stderr


def test_demo_calibrate_measures_both_rubrics(tmp_path: Path) -> None:
    result = _demo(tmp_path, "calibrate", "--out", str(tmp_path / "w"))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "kappa" in result.stdout
    assert result.stdout.count("confusion") == 2

    result = _demo(tmp_path, "calibrate", "--out", str(tmp_path / "w2"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["workdir"] == str(tmp_path / "w2")
    support, correctness = (
        report["rubrics"]["rubric-support.yaml"],
        report["rubrics"]["rubric-correctness.yaml"],
    )
    assert support["n"] == correctness["n"] == 20
    # The support-bot rubric demands a next step the labels never asked for: a strict judge.
    assert support["bias"] == "strict"
    assert support["judge_pass_rate"] < support["label_pass_rate"]
    assert correctness["kappa"] >= 0.8


def test_demo_regress_says_when_the_fix_does_not_fix(tmp_path: Path) -> None:
    # A copy of the example whose "fixed" agent is the deployed one: nothing gets fixed.
    import shutil

    copy = tmp_path / "procurement"
    shutil.copytree(EXAMPLES / "procurement", copy, ignore=shutil.ignore_patterns("__pycache__", "runs"))
    regress = copy / "regress.py"
    regress.write_text(
        regress.read_text(encoding="utf-8").replace(
            "return _answer(ctx, fixed=True)", "return _answer(ctx, fixed=False)"
        ),
        encoding="utf-8",
    )
    result = _demo(tmp_path, "regress", "--examples", str(copy), "--out", str(tmp_path / "w"), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["fixed"] == []
    assert {s["change"] for s in report["runs"][1]["samples"]} >= {"still_failing"}


def test_find_example_takes_the_folder_or_a_checkouts_examples(tmp_path: Path) -> None:
    for name in ("procurement", "restaurant", "calibration"):
        assert find_example(name) == EXAMPLES / name
        assert find_example(name, EXAMPLES) == EXAMPLES / name
        assert find_example(name, REPO) == EXAMPLES / name
        assert find_example(name, EXAMPLES / name) == EXAMPLES / name
    result = CliRunner().invoke(cli, ["demo", "score", "--examples", str(tmp_path)])
    assert result.exit_code == 2
    assert "rubric.yaml" in result.output


def test_bundled_examples_are_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_bundled(EXAMPLES / "procurement" / "suite")
    assert not is_bundled(tmp_path)
    monkeypatch.chdir(REPO)
    assert example_module(EXAMPLES / "procurement") == "examples.procurement"
    monkeypatch.chdir(tmp_path)
    assert example_module(EXAMPLES / "procurement") is None


def test_demo_model_serves_the_scripted_model_until_interrupted(tmp_path: Path) -> None:
    import re
    import signal

    import openai

    proc = subprocess.Popen(
        [sys.executable, "-m", "tracejudge", "demo", "model"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it, whoever runs the tests: a run started in the background
        # (nohup, `&` in a script) ignores SIGINT, the child inherits that, and Python then installs no
        # KeyboardInterrupt handler, so the SIGINT below would never stop it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", first)
        assert match, first
        lines = [proc.stdout.readline() for _ in range(3)]
        assert "--target examples.procurement.regress:agent " in lines[1]
        client = openai.OpenAI(base_url=match.group(1), api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="gpt-4.1-nano",
            messages=[
                {
                    "role": "user",
                    "content": "Context:\nPrepayment shall not exceed 50,000 RMB per order.\n"
                    "Question: what is the prepayment cap?",
                }
            ],
        )
        assert "50,000" in (reply.choices[0].message.content or "")
        client.close()
        # The restaurant judge serves beside it: the printed score command, on a store holding the
        # restaurant battery (as `demo score` leaves one), gives the demo's 7 / 6 / 1.
        lines_left: queue.Queue[str] = queue.Queue()  # read aside: a missing line fails, never hangs
        out = proc.stdout
        threading.Thread(target=lambda: [lines_left.put(line) for line in out], daemon=True).start()
        rest = [lines_left.get(timeout=30) for _ in range(2)]
        assert "restaurant" in rest[0]
        command = rest[1].split()
        assert command[:4] == ["tracejudge", "--store", "STORE", "score"]
        store = tmp_path / "restaurant.db"
        from tracejudge._demo_loops import load_script
        from tracejudge.store import SqliteStore

        db = SqliteStore(store)
        db.put_spans(load_script(EXAMPLES / "restaurant" / "traces.py").all_spans())
        db.close()
        env = {**os.environ, "OPENAI_BASE_URL": match.group(1), "OPENAI_API_KEY": "unused"}
        scored = subprocess.run(
            [sys.executable, "-m", "tracejudge", "--store", f"sqlite:///{store}", *command[3:], "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert scored.returncode == 0, scored.stderr
        summary = json.loads(scored.stdout)["summary"]
        assert (summary["pass"], summary["fail"], summary["indeterminate"]) == (7, 6, 1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # not left behind serving
            proc.communicate()
            raise
    assert proc.returncode == 0, err
    assert "stopped" in err
