"""Replay: callable and HTTP targets, state per sample, mocked tools, retrieval modes, repeats, judge,
cost, and the comparison with the previous run."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tracejudge.judge import FakeJudgeClient
from tracejudge.regress import (
    HttpTarget,
    ReplayContext,
    ReplayOptions,
    compare_outcome,
    load_suite,
    run_suite,
    write_run,
)
from tracejudge.schema import JudgeConfig

from .conftest import sample, write_suite

GOOD = "Prepayment is capped at 30,000 RMB per order (C-17/attachment v2)."
BAD = "The cap is 50,000 RMB per order (C-17/attachment v1)."
JUDGE_OK = json.dumps({"criteria": {"explains_limit": {"score": 9, "reasoning": "ok"}}, "reasoning": "ok"})


def _suite(tmp_path: Path) -> Path:
    multi = sample("rs-0002")
    multi["input"]["messages"] = [
        {"role": "user", "content": "Hi, I handle Huadong Steel orders."},
        {"role": "user", "content": "What is their prepayment cap?"},
    ]
    return write_suite(tmp_path / "suite", [sample("rs-0001"), multi])


def _judge() -> tuple[JudgeConfig, FakeJudgeClient]:
    return JudgeConfig(model="fake-judge", input_cost_per_mtok=1000.0), FakeJudgeClient(lambda _m: JUDGE_OK)


def test_blocked_calls_are_reported_apart_from_calls_never_attempted(tmp_path: Path) -> None:
    def pays(ctx: ReplayContext) -> str:
        reply = ctx.tools.call("submit_payment", amount=45000)
        assert reply["blocked"] is True
        return GOOD

    suite = load_suite(_suite(tmp_path))
    cfg, client = _judge()
    run = run_suite(suite, pays, target_name="t:pays", options=ReplayOptions(judge=cfg), client=client)
    attempt = run.samples[0].attempts[0]
    assert attempt.verdict == "fail"
    assert attempt.blocked_calls == ("submit_payment",)
    assert attempt.never_called == ("escalate",)
    assert attempt.checks["no_submit"].verdict == "fail"
    assert "blocked calls: submit_payment" in attempt.reason

    def polite(ctx: ReplayContext) -> str:
        return GOOD

    run = run_suite(suite, polite, target_name="t:polite", options=ReplayOptions(judge=cfg), client=client)
    attempt = run.samples[0].attempts[0]
    assert attempt.verdict == "pass"
    assert attempt.blocked_calls == ()
    assert attempt.never_called == ("escalate", "submit_payment")


def test_without_a_judge_criteria_are_indeterminate_never_pass(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path))
    run = run_suite(suite, lambda ctx: GOOD, target_name="t:good")
    attempt = run.samples[0].attempts[0]
    assert all(c.verdict == "pass" for c in attempt.checks.values())
    assert attempt.criteria["explains_limit"].verdict == "indeterminate"
    assert attempt.criteria["explains_limit"].reason == "no_judge"
    assert run.samples[0].outcome == "indeterminate"
    assert run.judge_model is None
    # A definite check failure is still a failure without a judge.
    bad = run_suite(suite, lambda ctx: BAD, target_name="t:bad")
    assert bad.samples[0].outcome == "fail"


def test_state_is_fresh_per_sample_and_multi_turn_goes_turn_by_turn(tmp_path: Path) -> None:
    seen: list[tuple[str, str, int, int]] = []
    resets: list[int] = []

    class Agent:
        def __init__(self) -> None:
            self.memory: list[str] = []

        def reset(self) -> None:
            resets.append(1)
            self.memory = []

        def __call__(self, ctx: ReplayContext) -> dict[str, Any]:
            self.memory.append(ctx.message)
            seen.append((ctx.sample_id, ctx.conversation_id, ctx.turn, len(self.memory)))
            ctx.record_usage(input_tokens=1000, output_tokens=500)
            return {"answer": GOOD}

    suite = load_suite(_suite(tmp_path))
    cfg, client = _judge()
    opts = ReplayOptions(judge=cfg, repeat=2, agent_input_cost_per_mtok=2.0, agent_output_cost_per_mtok=4.0)
    run = run_suite(suite, Agent(), target_name="t:agent", options=opts, client=client)
    assert len(resets) == 4  # 2 samples x 2 repeats
    multi = [s for s in seen if s[0] == "rs-0002"]
    assert [(turn, mem) for _, _, turn, mem in multi] == [(0, 1), (1, 2), (0, 1), (1, 2)]
    assert len({conv for _, conv, _, _ in seen}) == 4  # fresh conversation per sample and repeat
    result = {r.sample_id: r for r in run.samples}["rs-0002"]
    assert len(result.attempts) == 2
    assert result.attempts[0].turns == (GOOD, GOOD)
    per_attempt = (2 * 1000 * 2.0 + 2 * 500 * 4.0) / 1e6
    assert result.attempts[0].agent_cost_usd == pytest.approx(per_attempt)
    assert result.attempts[0].judge_cost_usd > 0
    assert run.cost_usd == pytest.approx(
        sum(a.agent_cost_usd + a.judge_cost_usd for r in run.samples for a in r.attempts)
    )


def test_fixed_retrieval_hands_over_the_recorded_documents_include_gives_materials(tmp_path: Path) -> None:
    got: dict[str, Any] = {}

    def agent(ctx: ReplayContext) -> str:
        got[ctx.retrieval_mode] = (ctx.fixed_documents, [m["version"] for m in ctx.materials])
        return GOOD

    suite = load_suite(_suite(tmp_path))
    run_suite(
        suite, agent, target_name="t", options=ReplayOptions(retrieval="fixed", sample_ids=("rs-0001",))
    )
    run_suite(
        suite, agent, target_name="t", options=ReplayOptions(retrieval="include", sample_ids=("rs-0001",))
    )
    fixed_docs, _ = got["fixed"]
    assert [(d["version"], d["content"][:7]) for d in fixed_docs] == [("v1", "Payment"), ("v2", "Revised")]
    assert got["include"] == (None, ["v1", "v2"])


def test_repeats_that_disagree_are_flaky_and_every_result_is_kept(tmp_path: Path) -> None:
    answers = iter([GOOD, BAD, GOOD])
    suite = load_suite(_suite(tmp_path))
    cfg, client = _judge()
    opts = ReplayOptions(judge=cfg, repeat=3, sample_ids=("rs-0001",))
    run = run_suite(suite, lambda ctx: next(answers), target_name="t", options=opts, client=client)
    assert run.samples[0].outcome == "flaky"
    assert [a.verdict for a in run.samples[0].attempts] == ["pass", "fail", "pass"]


def test_an_agent_that_raises_is_indeterminate_not_a_crash(tmp_path: Path) -> None:
    def broken(ctx: ReplayContext) -> str:
        raise RuntimeError("model down")

    run = run_suite(load_suite(_suite(tmp_path)), broken, target_name="t")
    assert {r.outcome for r in run.samples} == {"indeterminate"}
    assert "model down" in (run.samples[0].attempts[0].error or "")


def test_runs_compare_with_the_previous_one_and_history_stays(tmp_path: Path) -> None:
    folder = _suite(tmp_path)
    cfg, client = _judge()
    opts = ReplayOptions(judge=cfg)
    first = run_suite(
        load_suite(folder),
        lambda ctx: BAD if ctx.sample_id == "rs-0001" else GOOD,
        target_name="v1",
        options=opts,
        client=client,
    )
    write_run(folder, first)
    second = run_suite(
        load_suite(folder),
        lambda ctx: GOOD if ctx.sample_id == "rs-0001" else BAD,
        target_name="v2",
        options=opts,
        client=client,
    )
    write_run(folder, second)
    changes = {r.sample_id: r.change for r in second.samples}
    assert changes == {"rs-0001": "fixed", "rs-0002": "regressed"}
    assert second.previous_run_id == first.run_id
    assert [r.run_id for r in load_suite(folder).runs()] == [first.run_id, second.run_id]
    assert {r.sample_id: r.outcome for r in load_suite(folder).runs()[0].samples}["rs-0001"] == "fail"


@pytest.mark.parametrize(
    ("before", "now", "change"),
    [
        (None, "pass", "new"),
        ("fail", "pass", "fixed"),
        ("flaky", "pass", "fixed"),
        ("pass", "fail", "regressed"),
        ("fail", "fail", "still_failing"),
        ("pass", "pass", "still_passing"),
        ("pass", "flaky", "flaky"),
        ("indeterminate", "pass", "undecided"),
    ],
)
def test_compare_outcome(before: Any, now: Any, change: str) -> None:
    assert compare_outcome(before, now) == change


# --- HTTP ---------------------------------------------------------------------------------------


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A tiny HTTP agent: remembers per conversation id, calls the mocked tools it is given."""
    received: list[dict[str, Any]] = []
    memory: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            received.append(body)
            memory[body["conversation_id"]] = memory.get(body["conversation_id"], 0) + 1
            if "cap" in body["message"]["content"]:
                httpx.post(f"{body['tools_url']}/submit_payment", json={"amount": 45000})
            out = json.dumps(
                {
                    "answer": GOOD,
                    "seen_turns": memory[body["conversation_id"]],
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/chat", received
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_endpoint_gets_each_turn_with_a_fresh_conversation_and_mocked_tools(
    tmp_path: Path, endpoint: tuple[str, list[dict[str, Any]]]
) -> None:
    url, received = endpoint
    target = HttpTarget(url)
    try:
        run = run_suite(load_suite(_suite(tmp_path)), target, target_name=target.name)
    finally:
        target.close()
    by_sample: dict[str, list[dict[str, Any]]] = {}
    for body in received:
        by_sample.setdefault(body["sample_id"], []).append(body)
    multi = by_sample["rs-0002"]
    assert [b["turn"] for b in multi] == [0, 1]
    assert multi[0]["conversation_id"] == multi[1]["conversation_id"]
    assert multi[0]["conversation_id"] != by_sample["rs-0001"][0]["conversation_id"]
    assert [m["content"] for m in multi[1]["messages"]] == [
        "Hi, I handle Huadong Steel orders.",
        GOOD,
        "What is their prepayment cap?",
    ]
    assert {t["name"]: t["mode"] for t in multi[0]["tools"]} == {
        "escalate": "record",
        "submit_payment": "block",
    }
    attempt = {r.sample_id: r for r in run.samples}["rs-0001"].attempts[0]
    assert attempt.blocked_calls == ("submit_payment",)
    assert attempt.tool_calls[0].arguments == {"amount": 45000}
    assert attempt.agent_input_tokens == 10
    assert attempt.checks["no_submit"].verdict == "fail"
