"""``POST /v1/embeddings`` of the scripted OpenAI server, through the real ``openai`` client."""

from __future__ import annotations

import math

import httpx
import openai

from tracejudge.testing.openai_server import ScriptedOpenAIServer, embed_text


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_client_default_base64_and_float_formats_give_the_same_unit_vectors() -> None:
    texts = ["Prepayment cap 30,000 RMB", "net 30 days after delivery"]
    with ScriptedOpenAIServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        default = client.embeddings.create(model="emb-1", input=texts)  # the client asks for base64
        floats = client.embeddings.create(model="emb-1", input=texts, encoding_format="float")
        [first, second] = server.requests
    assert first.body["encoding_format"] == "base64"
    assert second.body["encoding_format"] == "float"
    assert [d.index for d in default.data] == [0, 1]
    for got, want in zip(default.data, floats.data, strict=True):
        assert len(got.embedding) == 64
        assert all(
            math.isclose(x, y, abs_tol=1e-6) for x, y in zip(got.embedding, want.embedding, strict=True)
        )
    assert math.isclose(_cosine(floats.data[0].embedding, floats.data[0].embedding), 1.0, abs_tol=1e-9)
    assert default.model == "emb-1"
    assert default.usage.prompt_tokens == 9


def test_vectors_are_deterministic_and_shared_words_score_higher() -> None:
    query = embed_text("what is the prepayment cap")
    assert query == embed_text("What is the PREPAYMENT cap?")
    related = embed_text("the prepayment cap is 30,000 RMB")
    unrelated = embed_text("delivery within ten days")
    assert _cosine(query, related) > _cosine(query, unrelated)
    assert len(embed_text("", 8)) == 8


def test_single_string_input_and_dimensions() -> None:
    with ScriptedOpenAIServer() as server:
        reply = httpx.post(
            f"{server.base_url}/embeddings",
            json={"model": "m", "input": "hello world", "dimensions": 16, "encoding_format": "float"},
        ).json()
    assert [len(d["embedding"]) for d in reply["data"]] == [16]
    assert reply["data"][0]["embedding"] == embed_text("hello world", 16)


def test_bad_requests_are_400() -> None:
    with ScriptedOpenAIServer() as server:
        url = f"{server.base_url}/embeddings"
        assert httpx.post(url, content=b"not json").status_code == 400
        assert httpx.post(url, json={"model": "m"}).status_code == 400
        assert httpx.post(url, json={"model": "m", "input": []}).status_code == 400
        assert httpx.post(url, json={"model": "m", "input": "x", "dimensions": 0}).status_code == 400
