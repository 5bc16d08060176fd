"""The scripted OpenAI-compatible server, driven by the real ``openai`` client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}]


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(models=("judge-1", "agent-1")) as s:
        yield s


def _client(server: ScriptedOpenAIServer, **kw: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test-secret", max_retries=0, **kw)  # type: ignore[arg-type]


def test_base_url_is_loopback_with_a_picked_port(server: ScriptedOpenAIServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.port != 0


def test_rules_match_last_user_message_any_message_and_model(server: ScriptedOpenAIServer) -> None:
    server.set_rules(
        [
            Rule(model="judge-1", reply="judge says hi"),
            Rule(last_user=r"prepayment\s+cap", reply="30,000 RMB"),
            Rule(any_message="terse", reply="short"),
        ]
    )
    client = _client(server)
    r1 = client.chat.completions.create(model="agent-1", messages=_user("What is the Prepayment  cap?"))
    r2 = client.chat.completions.create(model="judge-1", messages=_user("What is the prepayment cap?"))
    r3 = client.chat.completions.create(model="agent-1", messages=_user("hello"))
    assert r1.choices[0].message.content == "30,000 RMB"
    assert r2.choices[0].message.content == "judge says hi"
    assert r3.choices[0].message.content == "short"
    assert r1.model == "agent-1"
    assert r1.choices[0].finish_reason == "stop"
    assert r1.usage is not None
    assert r1.usage.total_tokens == r1.usage.prompt_tokens + r1.usage.completion_tokens
    assert [r.rule for r in server.requests] == [1, 0, 2]


def test_last_user_ignores_earlier_user_messages(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(last_user="first", reply="wrong")], default_reply="right")
    messages = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second question"},
    ]
    reply = _client(server).chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "right"


def test_json_reply_for_structured_output(server: ScriptedOpenAIServer) -> None:
    verdict = {"criteria": {"correctness": {"score": 3, "reasoning": "cites 50,000"}}, "reasoning": "stale"}
    server.set_rules([Rule(reply=verdict)])
    reply = _client(server).chat.completions.create(
        model="judge-1", messages=_user("judge this"), response_format={"type": "json_object"}
    )
    assert json.loads(reply.choices[0].message.content or "") == verdict
    assert server.completion_requests()[0]["response_format"] == {"type": "json_object"}


def test_unscripted_request_fails_loudly(server: ScriptedOpenAIServer) -> None:
    with pytest.raises(openai.BadRequestError, match="no scripted rule"):
        _client(server).chat.completions.create(model="m", messages=_user("anything"))
    assert server.requests[0].rule is None


def test_rate_limit_with_retry_after_then_success(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(status=429, retry_after=0.05, times=1), Rule(reply="after the wait")])
    with pytest.raises(openai.RateLimitError) as info:
        _client(server).chat.completions.create(model="m", messages=_user("x"))
    assert info.value.response.headers["retry-after"] == "0.05"
    # The fault was used up: the next request gets the reply.
    reply = _client(server).chat.completions.create(model="m", messages=_user("x"))
    assert reply.choices[0].message.content == "after the wait"


def test_openai_client_retries_through_a_scripted_429(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(status=429, retry_after=0.01, times=2), Rule(reply="third time")])
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=2)
    reply = client.chat.completions.create(model="m", messages=_user("x"))
    assert reply.choices[0].message.content == "third time"
    assert [r.rule for r in server.requests] == [0, 0, 1]


def test_server_error(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(status=500)])
    with pytest.raises(openai.InternalServerError):
        _client(server).chat.completions.create(model="m", messages=_user("x"))


def test_malformed_body(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(malformed=True)])
    with pytest.raises((openai.APIResponseValidationError, json.JSONDecodeError, ValueError)):
        _client(server).chat.completions.create(model="m", messages=_user("x"))
    raw = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": _user("x")})
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw.text)


def test_raw_body_is_sent_verbatim(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(raw_body='{"weird": true}', status=503)])
    raw = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": _user("x")})
    assert raw.status_code == 503
    assert raw.text == '{"weird": true}'


def test_delay_trips_a_client_timeout(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(delay=5, reply="too late")])
    with pytest.raises(openai.APITimeoutError):
        _client(server, timeout=0.2).chat.completions.create(model="m", messages=_user("x"))


def test_streaming_reassembles_to_the_reply(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(reply="The cap is 30,000 RMB per order.")])
    stream = _client(server).chat.completions.create(
        model="m", messages=_user("x"), stream=True, stream_options={"include_usage": True}
    )
    pieces, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "The cap is 30,000 RMB per order."
    assert len([p for p in pieces if p]) > 1
    assert finish == "stop"
    assert usage is not None
    assert usage.completion_tokens > 0


def test_tool_calls(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(tool_calls=[{"name": "submit_payment", "arguments": {"amount": 45000}}])])
    reply = _client(server).chat.completions.create(model="m", messages=_user("pay"))
    call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "submit_payment"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"amount": 45000}  # type: ignore[union-attr]
    assert reply.choices[0].finish_reason == "tool_calls"


def test_models_endpoint(server: ScriptedOpenAIServer) -> None:
    assert [m.id for m in _client(server).models.list()] == ["judge-1", "agent-1"]


def test_requests_are_recorded_with_the_key_masked(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(reply="x")])
    _client(server).chat.completions.create(model="agent-1", messages=_user("record me"), temperature=0)
    (req,) = server.requests
    assert req.method == "POST"
    assert req.path == "/v1/chat/completions"
    assert req.body["messages"][1]["content"] == "record me"
    assert req.body["temperature"] == 0
    assert req.headers["authorization"] == "***"
    assert "sk-test-secret" not in repr(server.requests)
    server.clear_requests()
    assert server.requests == []


def test_bad_request_body_is_rejected() -> None:
    with ScriptedOpenAIServer(default_reply="x") as server:
        raw = httpx.post(f"{server.base_url}/chat/completions", content=b"not json")
        assert raw.status_code == 400
        raw = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m"})
        assert raw.status_code == 400


def test_stop_releases_the_port() -> None:
    server = ScriptedOpenAIServer(default_reply="x").start()
    url = server.base_url
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models")


def test_a_delay_shorter_than_the_timeout_still_replies(server: ScriptedOpenAIServer) -> None:
    server.set_rules([Rule(delay=0.1, reply="slow but here")])
    reply = _client(server, timeout=30).chat.completions.create(model="m", messages=_user("x"))
    assert reply.choices[0].message.content == "slow but here"
