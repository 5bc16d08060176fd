"""Triage on traces recorded outside this repository (tests/fixtures/outside/README.md names each source,
commit and licence): OpenInference spans of the OpenAI SDK recorded by envoyproxy/ai-gateway, the Vercel AI
SDK's spans captured by Arize-ai/openinference, TruLens' LlamaIndex and LangChain RAG events, and Logfire's
spans of an OpenAI Agents SDK run with OpenAI's hosted file search, pydantic-ai's recorded Responses API
calls with that search (with and without its results) replayed under OpenInference, and the AI SDK's own
telemetry test snapshots of a tool it ran (``ai.toolCall``), and OpenLLMetry's recorded API calls replayed
under its own instrumentations: a Pinecone RAG run (embed, query, complete) and an Azure OpenAI reply its
content filter withheld, and the OTel GenAI OpenAI instrumentation's recorded test calls replayed under it
(a stream closed early, two choices, a tool round trip), and openinference-instrumentation-dspy's recorded
RAG module test replayed under it (its passages retrieved, then left out of the model's input), and
openinference-instrumentation-bedrock's recorded Knowledge Base tests replayed under it (retrieve,
retrieve_and_generate over a knowledge base and over a PDF in S3, an agent's knowledge-base lookup), and
OpenLLMetry's recorded Marqo search replayed under its Marqo instrumentation. Each goes
through the commands a user runs — ``collect file``, ``traces show --json``, ``triage --json`` with a ticket
whose material is taken from the trace itself — and what they read is pinned. The OpenAI and AI SDK traces
record no retrieval, nor does a hosted search record what it found unless asked (asked, its results are the
retrieval, and what the model was given inside the call stays unrecorded), so no verdict on them may be
definite; the TruLens traces record their retrievals as texts without ids (identified by the manifest's
content), the Pinecone run its matches with ids and texts, and removing any one record of any of them leaves
the verdict or makes it ``unconfirmed`` (DESIGN 5.5).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from tests.fixtures.outside import _formats as fmt
from tracejudge.cli import cli
from tracejudge.localize import localize
from tracejudge.normalize import normalize
from tracejudge.schema import ManifestEntry, Material, RawSpan, Ticket
from tracejudge_collectors.otel import decode_json

OUTSIDE = Path(fmt.__file__).resolve().parent
T0 = 1_763_456_400_000_000_000  # 2025-11-18T09:00:00Z: the envoy spans' times were cleared by their recorder
DECODER = (
    "the decoder inserts a third sub-layer, which performs multi-head attention over the output of the"
    " encoder stack"
)


@dataclass(frozen=True)
class Outside:
    """One outside trace: how to build its request, the trace triaged and the ticket derived from it."""

    name: str
    request: Callable[[], dict[str, Any]]
    trace_id: str
    ticket: dict[str, Any]
    manifest: list[dict[str, Any]]


def _envoy(name: str, n: int, ticket: dict[str, Any], manifest: list[dict[str, Any]]) -> Outside:
    trace_id = f"{n:032x}"
    return Outside(
        f"envoy/{name}",
        lambda: fmt.envoy(name, trace_id, T0 + n * 60_000_000_000),
        trace_id,
        ticket,
        manifest,
    )


def _entry(doc_id: str, version: str, content: str, **kw: Any) -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "version": version,
        "effective_from": "2017-06-12T00:00:00Z",
        "indexed_at": "2025-01-01T00:00:00Z",
        "content": content,
        **kw,
    }


def _contrib(name: str, n: int, clause: str, content: str) -> Outside:
    trace_id = f"{0xC0 + n:032x}"
    short = name.removeprefix("test_chat_completion_").replace("_", "-")
    ticket = {"required": [{"doc_id": short, "version": "v1", "clause": clause}]}
    return Outside(
        f"genai-openai/{short}",
        lambda: fmt.genai_openai_chat(name, trace_id),
        trace_id,
        ticket,
        [_entry(short, "v1", content)],
    )


CONTRIB_TEST = "This is a test! How can I assist you further?"
CONTRIB_WEATHER = "Seattle: 50 degrees and raining. San Francisco: 70 degrees and sunny."
# The material of each ticket is what the trace shows the model had, or answered from.
PLANNER = "You are a financial research planner."
AZURE_FILTERED = "0000000000000000000000000000d001"
CASES = [
    _envoy(
        "chat-basic",
        1,
        {"required": [{"doc_id": "greeting", "version": "v1", "clause": "How can I help you today?"}]},
        [_entry("greeting", "v1", "Hi there! How can I help you today?")],
    ),
    _envoy(
        "chat-multiturn",
        2,
        {"required": [{"doc_id": "style", "version": "v1", "clause": "Answer in up to 5 words"}]},
        [_entry("style", "v1", "Answer in up to 5 words.")],
    ),
    _envoy(
        "chat-openai-agents-python",
        4,
        {"required": [{"doc_id": "planner-prompt", "version": "v3", "clause": PLANNER}]},
        [_entry("planner-prompt", "v3", PLANNER + " Given a request for financial analysis, produce a set.")],
    ),
    _envoy(
        "chat-tools",
        3,
        {"required": [{"doc_id": "weather-tool", "version": "v1", "clause": "Boston"}]},
        [_entry("weather-tool", "v1", "Weather in Boston")],
    ),
    _envoy(
        "completion-basic",
        5,
        {"required": [{"doc_id": "fib", "version": "v1", "clause": "return fib(n-1) + fib(n-2)"}]},
        [
            _entry(
                "fib",
                "v1",
                "def fib(n):\n    if n <= 1:\n        return n\n    else:\n"
                "        return fib(n-1) + fib(n-2)",
            )
        ],
    ),
    _envoy(
        "chat-web-search",
        6,
        {
            "required": [
                {"doc_id": "httpbin", "version": "v1", "clause": "https://httpbin.org/base64/dGVzdA=="}
            ]
        },
        [_entry("httpbin", "v1", "https://httpbin.org/base64/dGVzdA== returns test")],
    ),
    # Calls the API refused (HTTP 400 for a null message and out-of-range parameters, 404 for a model that
    # does not exist): the span's status is error, its exception event says why.
    _envoy(
        "chat-bad-request",
        7,
        {"required": [{"doc_id": "nano-limits", "version": "v1", "clause": "max_tokens"}]},
        [_entry("nano-limits", "v1", "max_tokens is not supported with this model")],
    ),
    _envoy(
        "chat-unknown-model",
        8,
        {"required": [{"doc_id": "greeting", "version": "v1", "clause": "Hello!"}]},
        [_entry("greeting", "v1", "Hello! How can I help you today?")],
    ),
    # OpenLLMetry's Azure OpenAI test: the model's reply withheld by Azure's content filter (finish_reason
    # content_filter, no message), under OpenLLMetry's OpenAI instrumentation.
    Outside(
        "openllmetry-azure/content-filter",
        lambda: fmt.openllmetry_azure_chat("test_chat_content_filtering", AZURE_FILTERED),
        AZURE_FILTERED,
        {"required": [{"doc_id": "joke-brief", "version": "v1", "clause": "a joke about opentelemetry"}]},
        [_entry("joke-brief", "v1", "Tell me a joke about opentelemetry")],
    ),
    Outside(
        "vercel/ai-generateText",
        lambda: fmt.vercel("ai-generateText"),
        "700d5f98fe2420adcf6ab0822f7a323c",
        {
            "required": [
                {"doc_id": "haiku-brief", "version": "v1", "clause": "Write a haiku about programming."}
            ]
        },
        [_entry("haiku-brief", "v1", "Write a haiku about programming.")],
    ),
    Outside(
        "vercel/ai-generateText-doGenerate",
        lambda: fmt.vercel("ai-generateText-doGenerate"),
        "b3e700af9eab81e19f72f964d62a35af",
        {
            "required": [
                {"doc_id": "haiku-brief", "version": "v1", "clause": "Write a haiku about programming."}
            ]
        },
        [_entry("haiku-brief", "v1", "Write a haiku about programming.")],
    ),
    # opentelemetry-instrumentation-openai-v2 replaying its own tests' cassettes: a stream the app closed
    # after two chunks, a call asking for two choices (n=2), a tool round trip (two calls).
    *(
        _contrib(name, n, clause, content)
        for n, (name, clause, content) in enumerate(
            [
                ("test_chat_completion_streaming_not_complete", "Say this is a test", "Say this is a test."),
                ("test_chat_completion_multiple_choices", "How can I assist you further?", CONTRIB_TEST),
                ("test_chat_completion_tool_calls_with_content", "50 degrees and raining", CONTRIB_WEATHER),
            ],
            start=1,
        )
    ),
]
IDS = [c.name for c in CASES]


def _run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", *args])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every outside trace collected from files into one store, as a user would."""
    folder = tmp_path_factory.mktemp("outside")
    files = []
    for case in [
        *CASES,
        *TRULENS,
        *LOGFIRE,
        *VERCEL_TOOLS,
        *FILE_SEARCH_CASES,
        *PINECONE,
        *DSPY,
        *BEDROCK,
        *MARQO,
    ]:
        path = folder / (case.name.replace("/", "-") + ".json")
        path.write_text(json.dumps(case.request()))
        files.append(str(path))
    db = folder / "s.db"
    result = _run(db, "collect", "file", *files, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["rejected"], summary["failed"]) == (0, 0)
    return db


def _show(store: Path, trace_id: str) -> dict[str, Any]:
    result = _run(store, "traces", "show", trace_id, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _triage(store: Path, tmp_path: Path, case: Outside, *, manifest: bool) -> dict[str, Any]:
    ticket = tmp_path / "ticket.yaml"
    ticket.write_text(yaml.safe_dump({"ticket": case.name, "trace_id": case.trace_id, **case.ticket}))
    args = ["triage", "--ticket", str(ticket), "--json"]
    if manifest:
        path = tmp_path / "manifest.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in case.manifest))
        args += ["--manifest", str(path)]
    result = _run(store, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _assert_pinned(given: dict[str, Any], pinned: tuple[str, list[str], str | None]) -> None:
    """A triage report is the pinned one: its verdict, its stages' statuses, and what the first open stage
    misses (when pinned)."""
    verdict, statuses, missing = pinned
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (verdict, statuses)
    if missing is not None:
        open_stage = statuses.index("unconfirmed")
        assert any(missing in m for m in given["stages"][open_stage]["missing"])


def test_a_span_dumped_alone_is_refused_naming_what_to_wrap_it_in(tmp_path: Path) -> None:
    # envoyproxy/ai-gateway keeps each recorded span as one bare Span message: read as a request it
    # imported nothing and exited 0.
    result = _run(tmp_path / "s.db", "collect", "file", str(OUTSIDE / "envoy_ai_gateway" / "chat-basic.json"))
    assert result.exit_code == 2, result.output
    assert "no resourceSpans or resourceLogs" in result.output
    assert "looks like a single span" in result.output
    assert '{"resourceSpans": [{"scopeSpans"' in result.output


@pytest.mark.parametrize("name", ["console.json", "console.jsonl", "one-span.json"])
def test_console_exporter_output_is_refused_naming_the_exporter_to_use(tmp_path: Path, name: str) -> None:
    # The SDK's ConsoleSpanExporter, often what a tutorial's "exported trace" is: pretty-printed spans one
    # after another (no line of it is JSON: the error named line 1), or one span per line / per file.
    out = io.StringIO()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
    with provider.get_tracer("app").start_as_current_span("rag") as root:
        root.set_attribute("input.value", "cap?")
        with provider.get_tracer("app").start_as_current_span("retrieve"):
            pass
    printed = out.getvalue()
    first, _ = json.JSONDecoder().raw_decode(printed)
    body = {
        "console.json": printed,
        "console.jsonl": json.dumps(first) + "\n",
        "one-span.json": json.dumps(first),
    }
    path = tmp_path / name
    path.write_text(body[name])
    result = _run(tmp_path / "s.db", "collect", "file", str(path))
    assert result.exit_code == 2, result.output
    assert "ConsoleSpanExporter" in result.output
    assert "OTLPSpanExporter" in result.output


def test_an_empty_request_is_still_an_empty_request(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("{}\n")
    result = _run(tmp_path / "s.db", "collect", "file", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["spans"] == 0


def test_every_outside_span_is_stored(store: Path) -> None:
    counts = {case.name: len(_show(store, case.trace_id)["spans"]) for case in CASES}
    assert counts == {
        "envoy/chat-basic": 1,
        "envoy/chat-multiturn": 1,
        "envoy/chat-openai-agents-python": 1,
        "envoy/chat-tools": 1,
        "envoy/completion-basic": 1,
        "envoy/chat-web-search": 1,
        "envoy/chat-bad-request": 1,
        "envoy/chat-unknown-model": 1,
        "openllmetry-azure/content-filter": 1,
        "vercel/ai-generateText": 1,
        "vercel/ai-generateText-doGenerate": 1,
        # The replay's root (app) and each call's span.
        "genai-openai/streaming-not-complete": 2,
        "genai-openai/multiple-choices": 2,
        "genai-openai/tool-calls-with-content": 3,
    }


def test_openinference_openai_messages_roles_and_answers(store: Path) -> None:
    basic = _show(store, CASES[0].trace_id)
    (call,) = basic["model_calls"]
    assert [(m["role"], m["content"]) for m in call["input_messages"]] == [("user", "Hello!")]
    assert basic["final_answer"].startswith("Hi there! How can I help you today?")
    multiturn = _show(store, CASES[1].trace_id)
    (call,) = multiturn["model_calls"]
    assert [m["role"] for m in call["input_messages"]] == ["developer", "user", "assistant", "user"]
    assert call["input_messages"][-1]["content"] == "Answer in up to 5 words: What's the weather like?"
    assert multiturn["final_answer"] == "What city or region?"
    planner = _show(store, CASES[2].trace_id)
    (call,) = planner["model_calls"]
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    assert call["input_messages"][0]["content"].startswith(PLANNER)
    assert json.loads(planner["final_answer"])["searches"]


def test_openinference_completion_output_is_the_completed_text_not_the_response_body(store: Path) -> None:
    # A completions call's output.value is the whole response (ids, usage, the text JSON-escaped); the text
    # the model completed is llm.choices.N.completion.text.
    record = _show(store, f"{5:032x}")
    (call,) = record["model_calls"]
    assert call["input_text"].startswith("def fib(n):\n    if n <= 1:")
    assert call["output_text"] == record["final_answer"]
    assert record["final_answer"].startswith(" + fib(n-3) + fib(n-4)\n\ndef fib(n):")


def test_a_model_s_hosted_web_search_is_named_where_the_retrieval_is_missing(store: Path) -> None:
    # gpt-4o-mini-search-preview with web_search_options searched the web inside the call: no span holds what
    # it found, and no span could be marked a retrieval.
    record = _show(store, f"{6:032x}")
    (detail,) = [g["detail"] for g in record["gaps"] if g["kind"] == "no_retrieval_span"]
    assert "(web_search)" in detail
    assert "search with a tool of your own" in detail
    assert "gen_ai.tool.type = datastore" not in detail  # nothing to mark


@pytest.mark.parametrize(
    ("n", "error"), [(7, "BadRequestError: Error code: 400"), (8, "NotFoundError: Error code: 404")]
)
def test_a_model_call_that_failed_is_said_to_have_failed_not_to_have_hidden_its_output(
    store: Path, n: int, error: str
) -> None:
    # Both read as an output the instrumentation hid, naming OPENINFERENCE_HIDE_OUTPUTS to turn off: no
    # setting records the output of a call that returned none.
    record = _show(store, f"{n:032x}")
    (call,) = record["model_calls"]
    gaps = {g["kind"]: g for g in record["gaps"]}
    for kind in ("model_output_not_recorded", "no_final_answer"):
        assert error in gaps[kind]["detail"]
        assert gaps[kind]["switch"] == ""
        assert "OPENINFERENCE_HIDE" not in gaps[kind]["detail"]
    assert gaps["no_final_answer"]["span_id"] == call["span_id"]
    assert record["final_answer"] is None


def test_openllmetry_output_withheld_by_a_content_filter_is_no_answer(store: Path) -> None:
    # gen_ai.output.messages holds the choice with no parts and finish_reason content_filter: no answer, the
    # output recorded empty (not hidden).
    record = _show(store, AZURE_FILTERED)
    (call,) = record["model_calls"]
    assert [(m["role"], m["content"]) for m in call["input_messages"]] == [
        ("user", "Tell me a joke about opentelemetry")
    ]
    assert [(m["role"], m["content"], m["tool_calls"]) for m in call["output_messages"]] == [
        ("assistant", None, [])
    ]
    assert record["final_answer"] is None
    # Recorded as withheld: it read as not recorded, naming TRACELOOP_TRACE_CONTENT (capture was on).
    gaps = {g["kind"]: g for g in record["gaps"]}
    assert "model_output_not_recorded" not in gaps
    assert "finish_reason content_filter" in gaps["model_output_empty"]["detail"]
    assert gaps["model_output_empty"]["switch"] == ""
    assert all("TRACELOOP_TRACE_CONTENT" not in g["detail"] for g in record["gaps"])


HAIKU = "Lines of code align,  \nLogic dances through the night—  \nDreams in data flow."


def test_vercel_ai_sdk_provider_request_is_the_model_call(store: Path) -> None:
    # The capture kept no parent ids: each provider request (doGenerate) is a trace of its own.
    haiku = _show(store, "b3e700af9eab81e19f72f964d62a35af")
    (call,) = haiku["model_calls"]
    assert [(m["role"], m["content"]) for m in call["input_messages"]] == [
        ("user", "Write a haiku about programming.")
    ]
    assert call["output_text"] == haiku["final_answer"] == HAIKU
    chat = _show(store, "edff2fc5854be6170e8cccccec0c82cf")
    (call,) = chat["model_calls"]
    assert [m["role"] for m in call["input_messages"]] == ["system", "user", "assistant", "user"]
    assert call["input_messages"][2]["content"] == "2 + 2 equals 4."
    assert chat["final_answer"] == "3 + 3 equals 6."


def test_vercel_ai_sdk_call_span_is_the_request_and_the_answer(store: Path) -> None:
    prompt = _show(store, "700d5f98fe2420adcf6ab0822f7a323c")
    assert (prompt["input"], prompt["final_answer"]) == ("Write a haiku about programming.", HAIKU)
    # The call's own span is not a model call: its provider request was captured apart.
    assert prompt["model_calls"] == []
    messages = _show(store, "673a889f59126f8b4c90dce5a1f99368")
    assert messages["input"].startswith("And what")
    assert messages["final_answer"] == "3 + 3 equals 6."


def test_a_tool_call_output_is_read_as_a_tool_call_not_an_answer(store: Path) -> None:
    record = _show(store, CASES[3].trace_id)
    (call,) = record["model_calls"]
    ((message,),) = [call["output_messages"]]
    assert (message["content"], call["output_recorded"]) == (None, True)
    assert [(t["name"], t["arguments"]) for t in message["tool_calls"]] == [
        ("get_current_weather", {"location": "Boston, MA", "unit": "fahrenheit"})
    ]
    assert record["final_answer"] is None
    assert "no_final_answer" in {g["kind"] for g in record["gaps"]}


def test_a_stream_the_app_closed_early_is_an_answer_that_may_be_incomplete(store: Path) -> None:
    # The test reads two chunks ("", "This") and closes the stream: the instrumentation records "This" with
    # finish_reason "error". It read as the whole answer, with no gap.
    record = _show(store, f"{0xC1:032x}")
    (call,) = record["model_calls"]
    assert [(m["role"], m["content"]) for m in call["output_messages"]] == [("assistant", "This")]
    assert record["final_answer"] == "This"
    (gap,) = [g for g in record["gaps"] if g["kind"] == "model_output_truncated"]
    assert (gap["span_id"], gap["switch"]) == (call["span_id"], "")
    assert "finish_reason error" in gap["detail"]


def test_a_call_with_two_choices_records_both(store: Path) -> None:
    record = _show(store, f"{0xC2:032x}")
    (call,) = record["model_calls"]
    assert [(m["role"], m["content"]) for m in call["output_messages"]] == [
        ("assistant", "This is a test."),
        ("assistant", CONTRIB_TEST),
    ]
    # The app got both replies and the replay's root records neither: which the user got is open (the
    # first choice was read as the answer before).
    assert (record["final_answer"], record["final_answer_span_id"]) == (None, None)
    (gap,) = [g for g in record["gaps"] if g["kind"] == "answer_uncertain"]
    assert (gap["span_id"], "returned 2 choices" in gap["detail"]) == (call["span_id"], True)


def test_a_genai_tool_round_trip_answers_with_the_second_call(store: Path) -> None:
    # The replay's root span (app) records nothing: the answer is the last call's reply.
    record = _show(store, f"{0xC3:032x}")
    first, second = record["model_calls"]
    (asked,) = first["output_messages"]
    assert [(t["name"], t["arguments"]) for t in asked["tool_calls"]] == [
        ("get_current_weather", {"location": "Seattle, WA"}),
        ("get_current_weather", {"location": "San Francisco, CA"}),
    ]
    assert [m["role"] for m in second["input_messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert second["input_messages"][3]["content"] == "50 degrees and raining"
    assert record["final_answer"] == second["output_text"]
    assert record["final_answer"].startswith("Today, the weather in Seattle is 50 degrees and raining")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_no_recorded_retrieval_no_definite_verdict(store: Path, tmp_path: Path, case: Outside) -> None:
    record = _show(store, case.trace_id)
    assert record["retrievals"] == []
    assert "no_retrieval_span" in {g["kind"] for g in record["gaps"]}
    # Without a manifest the index is unknown; with one, the trace still shows no retrieval.
    bare = _triage(store, tmp_path, case, manifest=False)
    assert (bare["verdict"], [s["status"] for s in bare["stages"]]) == (
        "unconfirmed",
        ["unconfirmed", "skipped", "skipped", "skipped"],
    )
    assert any("index manifest entry" in m for m in bare["stages"][0]["missing"])
    given = _triage(store, tmp_path, case, manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )
    assert any("a retrieval span" in m for m in given["stages"][1]["missing"])


# ----------------------------------------------------------------------------- TruLens

LLAMA, CHAIN = "768f8edd7f429ac42a327b464ff47058", "96c0b8dfd4f04d2612116d54e91b87b1"
CHAIN_DOCS = ("attention/table-4", "attention/table-2", "attention/multi-head", "attention/figure-1")


def _contexts(name: str) -> list[str]:
    """The texts the trace's outermost retrieval span returned, as TruLens recorded them."""
    (resource,) = fmt.trulens(name)["resourceSpans"]
    for span in resource["scopeSpans"][0]["spans"]:
        values = {a["key"]: a["value"] for a in span["attributes"]}
        if "ai.observability.retrieval.retrieved_contexts" in values:
            texts = values["ai.observability.retrieval.retrieved_contexts"]["arrayValue"]["values"]
            return [t["stringValue"] for t in texts]
    raise AssertionError(name)


def _llama_manifest() -> list[dict[str, Any]]:
    return [_entry("attention/page-3", "v1", _contexts("test_otel_tru_llama__test_smoke")[1])]


def _chain_manifest() -> list[dict[str, Any]]:
    returned = _contexts("test_otel_tru_chain__test_smoke")
    never = "In this work, we use sine and cosine functions of different frequencies."
    return [
        *(_entry(doc, "v1", text) for doc, text in zip(CHAIN_DOCS, returned, strict=True)),
        _entry("attention/positional-encoding", "v1", never),
    ]


FEEDBACK = "test_otel_feedback_computation__test_feedback_computation"
UNMARKED = "3886ea5edb8b00cc5393e5fae57756cb"
FEEDBACK_DOCS = ("attention/title-page", "attention/figure-3", "attention/references", "attention/figure-1")
ENCODER = "The encoder is composed of a stack of N= 6 identical layers"


def _feedback_manifest() -> list[dict[str, Any]]:
    returned = _contexts(FEEDBACK)
    return [_entry(doc, "v1", text) for doc, text in zip(FEEDBACK_DOCS, returned, strict=True)]


BLEU = "establishing a new state-of-the-art BLEU score of 28.4"
TRULENS = [
    # LlamaIndex with MockLLM: the retriever returned page 3, and the model call (MockLLM.complete, a span
    # TruLens leaves "unknown") got it and echoed its prompt, so the answer states the clause.
    Outside(
        "trulens/llama",
        lambda: fmt.trulens("test_otel_tru_llama__test_smoke"),
        LLAMA,
        {
            "required": [
                {"doc_id": "attention/page-3", "version": "v1", "clause": DECODER, "facts": {"d_model": 512}}
            ]
        },
        _llama_manifest(),
    ),
    # LangChain with FakeListLLM: table 2 was returned and sent; the canned answer states no BLEU score.
    Outside(
        "trulens/chain",
        lambda: fmt.trulens("test_otel_tru_chain__test_smoke"),
        CHAIN,
        {
            "required": [
                {"doc_id": "attention/table-2", "version": "v1", "clause": BLEU, "facts": {"bleu": 28.4}}
            ]
        },
        _chain_manifest(),
    ),
    # An older TruLens' LangChain RAG chain (its feedback test), whose LLM call (BaseLLM.invoke) it left
    # "unknown": read as the model call, the prompt value holds Figure 1's chunk; FakeListLLM's canned answer
    # says nothing of it.
    Outside(
        "trulens/chain-unmarked-llm",
        lambda: fmt.trulens(FEEDBACK),
        UNMARKED,
        {"required": [{"doc_id": "attention/figure-1", "version": "v1", "clause": ENCODER}]},
        _feedback_manifest(),
    ),
    # The same run against material it never returned: with no filter recorded, rank or filter is open.
    Outside(
        "trulens/chain-not-returned",
        lambda: fmt.trulens("test_otel_tru_chain__test_smoke"),
        CHAIN,
        {
            "required": [
                {
                    "doc_id": "attention/positional-encoding",
                    "version": "v1",
                    "clause": "we use sine and cosine functions of different frequencies",
                }
            ]
        },
        _chain_manifest(),
    ),
]
TRULENS_IDS = [c.name for c in TRULENS]
# case -> (verdict and statuses with the manifest, what the first open stage misses)
TRULENS_VERDICTS: dict[str, tuple[str, list[str], str | None]] = {
    "trulens/llama": ("no_fault", ["pass", "pass", "pass", "pass"], None),
    "trulens/chain": ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"], "a usage judge"),
    "trulens/chain-unmarked-llm": ("unconfirmed", ["pass", "pass", "pass", "unconfirmed"], "a usage judge"),
    "trulens/chain-not-returned": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "tracejudge.retrieval.filter",
    ),
}


def test_trulens_llama_index_retrieval_is_one_call_of_unidentified_texts(store: Path) -> None:
    record = _show(store, LLAMA)
    (retrieval,) = record["retrievals"]
    # The query engine's retrieve, the retriever's retrieve and its _retrieve: one call.
    assert len(retrieval["span_ids"]) == 3
    assert retrieval["query"] == "What is multi-headed attention?"
    docs = retrieval["documents"]
    assert [d["doc_id"] for d in docs] == [None, None, None]
    assert docs[1]["content"].startswith("To facilitate these residual connections")
    assert record["input"] == "What is multi-headed attention?"
    # TruLens leaves MockLLM.complete "unknown": an LLM class's method, it is the model call, its prompt the
    # first positional argument. MockLLM echoes it: the answer is the prompt.
    (call,) = record["model_calls"]
    assert call["name"] == "llama_index.core.llms.mock.MockLLM.complete"
    assert call["input_text"].startswith("Context information is below.")
    assert DECODER in call["input_text"].replace("\n", " ")
    assert record["final_answer"] == call["output_text"] == call["input_text"]
    assert "no_model_span" not in {g["kind"] for g in record["gaps"]}


def test_trulens_langchain_prompt_value_is_read_with_its_line_breaks(store: Path) -> None:
    record = _show(store, CHAIN)
    (retrieval,) = record["retrievals"]
    assert len(retrieval["documents"]) == 4
    (call,) = record["model_calls"]
    ((message,),) = [call["input_messages"]]
    assert message["role"] == "user"
    # The repr's escapes are decoded: real line breaks and quotes, no backslashes.
    assert "If you don't know the answer" in message["content"]
    assert "Question: What is multi-headed attention? \nContext: Table 4:" in message["content"]
    assert "\\n" not in message["content"]
    assert call["output_text"] == record["final_answer"] == "This is a mocked response for prompt 0."


def test_trulens_langchain_llm_call_left_unknown_is_the_model_call(store: Path) -> None:
    # An older TruLens recorded LangChain's BaseLLM.invoke as an "unknown" span, no "generation" span.
    record = _show(store, UNMARKED)
    ((retrieval,),) = [record["retrievals"]]
    assert len(retrieval["documents"]) == 4
    (call,) = record["model_calls"]
    assert call["name"] == "langchain_core.language_models.llms.BaseLLM.invoke"
    assert ENCODER in call["input_text"]
    assert call["output_text"] == record["final_answer"] == "This is a mocked response for prompt 0."
    assert "no_model_span" not in {g["kind"] for g in record["gaps"]}


@pytest.mark.parametrize("case", TRULENS, ids=TRULENS_IDS)
def test_trulens_triage(store: Path, tmp_path: Path, case: Outside) -> None:
    pinned = TRULENS_VERDICTS[case.name]
    bare = _triage(store, tmp_path, case, manifest=False)
    # Texts without ids name no document: without the manifest nothing shows what was indexed.
    assert (bare["verdict"], [s["status"] for s in bare["stages"]]) == (
        "unconfirmed",
        ["unconfirmed", "skipped", "skipped", "skipped"],
    )
    _assert_pinned(_triage(store, tmp_path, case, manifest=True), pinned)


# ----------------------------------------------------------------------------- Logfire

# The OpenAI Agents SDK with OpenAI's hosted file_search, under logfire.instrument_openai_agents(): two runs
# in one trace ("Who made Logfire?", then "2+2?" after it), each one Responses API call.
FILE_SEARCH = "0000000000000000000000000000f001"
LOGFIRE = [
    Outside(
        "logfire/file-search",
        lambda: fmt.logfire("openai_agents-test_file_search", FILE_SEARCH, T0),
        FILE_SEARCH,
        {"required": [{"doc_id": "test.txt", "version": "v1", "clause": "Logfire is made by Pydantic"}]},
        [_entry("test.txt", "v1", "Logfire is made by Pydantic.")],
    )
]
# Logfire's test_responses: agent1 calls its random_number tool and hands off to agent2, told to "Return
# double the number", which answers with the number undoubled.
RESPONSES = "0000000000000000000000000000f002"
LOGFIRE.append(
    Outside(
        "logfire/function-tool-handoff",
        lambda: fmt.logfire("openai_agents-test_responses", RESPONSES, T0),
        RESPONSES,
        {
            "required": [
                {"doc_id": "agent2-instructions", "version": "v1", "clause": "Return double the number"}
            ]
        },
        [_entry("agent2-instructions", "v1", "Return double the number")],
    )
)
LOGFIRE_IDS = [c.name for c in LOGFIRE]
INCLUDE = 'include=["file_search_call.results"]'


def test_logfire_responses_events_are_the_messages_and_the_hosted_search_a_gap(store: Path) -> None:
    record = _show(store, FILE_SEARCH)
    first, second = record["model_calls"]
    assert [(m["role"], m["content"]) for m in first["input_messages"]] == [("user", "Who made Logfire?")]
    search, answer = first["output_messages"]
    assert [t["name"] for t in search["tool_calls"]] == ["file_search"]
    assert answer["content"] == first["output_text"] == "Logfire is made by Pydantic."
    # The second run sends the first back: the search item holds nothing the trace recorded.
    assert [m["role"] for m in second["input_messages"]] == ["user", "unknown", "assistant", "user"]
    assert second["input_partial"]
    # Two runs in one trace: the first run's reply was given before the second asked more; which of the two
    # the trace's answer is, nothing records (no root output), so none is read.
    assert (record["input"], record["final_answer"]) == ("Who made Logfire?", None)
    gaps = {g["kind"]: g["detail"] for g in record["gaps"]}
    assert f"model call {first['span_id']}" in gaps["answer_uncertain"]
    assert INCLUDE in gaps["retrieval_documents_not_recorded"]
    assert INCLUDE in gaps["no_retrieval_span"]
    assert record["retrievals"] == []


def test_logfire_function_tool_is_a_tool_call_paired_with_the_model_s_request(store: Path) -> None:
    record = _show(store, RESPONSES)
    (tool,) = record["tool_calls"]
    # Logfire's "Function: {name}" span: the tool's name, arguments and result; the call id is the model's.
    assert (tool["name"], tool["arguments"], tool["result"]) == ("random_number", {}, 4)
    assert tool["call_id"] == "call_vwqy7HyGGnNht9NNfxMnnouY"
    first, second = record["model_calls"]
    assert [t["name"] for m in first["output_messages"] for t in m["tool_calls"]] == [
        "random_number",
        "transfer_to_agent2",
    ]
    # agent2's instructions lead its input (Logfire's one system event), then agent1's turn with the results.
    assert [m["role"] for m in second["input_messages"]] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "tool",
    ]
    assert second["input_messages"][0]["content"] == "Return double the number"
    assert record["final_answer"] == "The random number generated is 4, and it's been handed off to agent2."


@pytest.mark.parametrize("case", LOGFIRE, ids=LOGFIRE_IDS)
def test_a_trace_without_a_retrieval_gives_no_definite_verdict(
    store: Path, tmp_path: Path, case: Outside
) -> None:
    bare = _triage(store, tmp_path, case, manifest=False)
    assert (bare["verdict"], [s["status"] for s in bare["stages"]]) == (
        "unconfirmed",
        ["unconfirmed", "skipped", "skipped", "skipped"],
    )
    given = _triage(store, tmp_path, case, manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )
    if case.trace_id == FILE_SEARCH:
        # What to turn on is the API's, not a span to mark.
        assert any(INCLUDE in m for m in given["stages"][1]["missing"])


# ----------------------------------------------------------------------------- OpenAI's hosted file search

# pydantic-ai's VCR cassettes of the Responses API with OpenAI's hosted file_search over a vector store
# holding one file ("Paris is the capital of France. It is known for the Eiffel Tower."), replayed through
# the openai client under openinference-instrumentation-openai: one asked for the search's results
# (include=["file_search_call.results"]), the other did not (two turns, each searching).
WITH_RESULTS = "test_openai_responses_model_file_search_tool_with_results"
WITHOUT_RESULTS = "test_openai_responses_model_file_search_tool"
PARIS = "Paris is the capital of France. It is known for the Eiffel Tower."
EIFFEL = "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars."
FS_RESULTS, FS_NOT_RETURNED = "0000000000000000000000000000b001", "0000000000000000000000000000b002"
FS_FIRST, FS_SECOND = "0000000000000000000000000000b003", "0000000000000000000000000000b004"
PARIS_TICKET = {
    "required": [{"doc_id": "paris", "version": "v1", "clause": "Paris is the capital of France"}]
}
FILE_SEARCH_CASES = [
    Outside(
        "openai-file-search/results",
        lambda: fmt.openai_responses(WITH_RESULTS, 0, FS_RESULTS),
        FS_RESULTS,
        PARIS_TICKET,
        [_entry("paris", "v1", PARIS)],
    ),
    # The same recording, a ticket whose material the search did not return.
    Outside(
        "openai-file-search/results-not-returned",
        lambda: fmt.openai_responses(WITH_RESULTS, 0, FS_NOT_RETURNED),
        FS_NOT_RETURNED,
        {
            "required": [
                {"doc_id": "eiffel", "version": "v1", "clause": "The Eiffel Tower is 330 metres tall"}
            ]
        },
        [_entry("paris", "v1", PARIS), _entry("eiffel", "v1", EIFFEL)],
    ),
    Outside(
        "openai-file-search/no-results",
        lambda: fmt.openai_responses(WITHOUT_RESULTS, 0, FS_FIRST),
        FS_FIRST,
        PARIS_TICKET,
        [_entry("paris", "v1", PARIS)],
    ),
    Outside(
        "openai-file-search/no-results-second-turn",
        lambda: fmt.openai_responses(WITHOUT_RESULTS, 1, FS_SECOND),
        FS_SECOND,
        {"required": [{"doc_id": "paris", "version": "v1", "clause": "It is known for the Eiffel Tower"}]},
        [_entry("paris", "v1", PARIS)],
    ),
]
# The recording with the search's results, replayed under OpenLLMetry's OpenAI instrumentation instead: it
# records the answer and finish_reason tool_call, and neither the request's tools nor the search's item.
FS_OPENLLMETRY = "0000000000000000000000000000b005"
FILE_SEARCH_CASES.append(
    Outside(
        "openai-file-search/openllmetry",
        lambda: fmt.openai_responses(WITH_RESULTS, 0, FS_OPENLLMETRY, openllmetry=True),
        FS_OPENLLMETRY,
        PARIS_TICKET,
        [_entry("paris", "v1", PARIS)],
    )
)
FILE_SEARCH_IDS = [c.name for c in FILE_SEARCH_CASES]


def test_a_hosted_search_openllmetry_drops_leaves_the_model_s_input_partial(store: Path) -> None:
    record = _show(store, FS_OPENLLMETRY)
    (call,) = record["model_calls"]
    assert [(m["role"], m["content"]) for m in call["input_messages"]] == [
        ("system", "You are a helpful assistant."),
        ("user", "What is the capital of France?"),
    ]
    assert record["final_answer"] == "The capital of France is Paris."
    assert record["retrievals"] == []
    # The search ran inside the call and nothing holds what it gave the model: the input was read as whole.
    assert call["input_partial"]
    gaps = {g["kind"]: g["detail"] for g in record["gaps"]}
    assert "finish_reason tool_call" in gaps["model_input_truncated"]


def test_a_hosted_file_search_s_requested_results_are_what_it_retrieved(store: Path) -> None:
    record = _show(store, FS_RESULTS)
    # The Responses API's file_search_call item, in the response OpenInference records whole (output.value).
    (call,) = record["model_calls"]
    (retrieval,) = record["retrievals"]
    assert retrieval["span_id"] == call["span_id"]
    assert retrieval["query"] == "What is the capital of France?"
    ((doc_id, content, score, metadata),) = [
        (d["doc_id"], d["content"], d["score"], d["metadata"]) for d in retrieval["documents"]
    ]
    assert (doc_id, content, score) == ("file-2b6dRdmXnzSrqiEbhVJZRU", PARIS, 0.9716)
    assert metadata["filename"] == "tmpd_9a5dki.txt"
    # What the model was given inside the call is not its request's messages: its input reads as partial.
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    assert call["input_partial"]
    gaps = {g["kind"]: g["detail"] for g in record["gaps"]}
    assert "hosted file_search inside the call" in gaps["model_input_truncated"]
    assert "no_retrieval_span" not in gaps
    assert record["final_answer"] == "The capital of France is Paris."


def test_a_hosted_file_search_without_its_results_names_what_to_request(store: Path) -> None:
    for trace_id, queries in (
        (FS_FIRST, "['What is the capital of France?']"),
        (FS_SECOND, "['Eiffel Tower']"),
    ):
        record = _show(store, trace_id)
        assert record["retrievals"] == []
        gaps = {g["kind"]: g["detail"] for g in record["gaps"]}
        assert INCLUDE in gaps["retrieval_documents_not_recorded"]
        assert queries in gaps["retrieval_documents_not_recorded"]
        # The request's tools are in llm.tools (not llm.invocation_parameters): the search is named.
        assert "(file_search)" in gaps["no_retrieval_span"]
        assert INCLUDE in gaps["no_retrieval_span"]


def test_material_the_hosted_search_returned_stops_at_what_the_model_was_given(
    store: Path, tmp_path: Path
) -> None:
    case = FILE_SEARCH_CASES[0]
    given = _triage(store, tmp_path, case, manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "pass", "unconfirmed", "skipped"],
    )
    assert "returned paris@v1 at rank 1" in given["stages"][1]["evidence"][0]["note"]
    assert any("hosted file_search inside the call" in m for m in given["stages"][2]["missing"])


def test_material_the_hosted_search_did_not_return_is_not_returned_pending_its_filter(
    store: Path, tmp_path: Path
) -> None:
    # The search returned paris only: eiffel was not returned, and whether a filter or the ranking left it
    # out is not recorded.
    given = _triage(store, tmp_path, FILE_SEARCH_CASES[1], manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )
    assert any("metadata filter" in m for m in given["stages"][1]["missing"])


@pytest.mark.parametrize("case", FILE_SEARCH_CASES[2:4], ids=FILE_SEARCH_IDS[2:4])
def test_a_hosted_search_without_results_gives_no_definite_verdict(
    store: Path, tmp_path: Path, case: Outside
) -> None:
    given = _triage(store, tmp_path, case, manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )
    assert any(INCLUDE in m for m in given["stages"][1]["missing"])


def test_a_hosted_search_no_record_names_gives_no_definite_verdict(store: Path, tmp_path: Path) -> None:
    given = _triage(store, tmp_path, FILE_SEARCH_CASES[4], manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )
    assert any("a retrieval span" in m for m in given["stages"][1]["missing"])


# ----------------------------------------------------------------------------- Vercel AI SDK tools

# vercel/ai's own telemetry test (packages/otel): streamText over a mock model that asks for tool1, the SDK
# running it (an ai.toolCall span), and — with stopWhen: 2 steps — a second request carrying its result.
_LEGACY = "LegacyOpenTelemetry integration with streamText"
TWO_STEPS, ONE_STEP = "0000000000000000000000000000a101", "0000000000000000000000000000a102"
VERCEL_TOOLS = [
    Outside(
        "vercel-ai/tool-two-steps",
        lambda: fmt.vercel_mock(
            f"{_LEGACY} stopWhen (2 steps) > should record telemetry data for each step", TWO_STEPS, T0
        ),
        TWO_STEPS,
        {"required": [{"doc_id": "tool1-result", "version": "v1", "clause": "result1"}]},
        [_entry("tool1-result", "v1", "result1")],
    ),
    Outside(
        "vercel-ai/tool-call",
        lambda: fmt.vercel_mock(f"{_LEGACY} > should record successful tool call", ONE_STEP, T0),
        ONE_STEP,
        {"required": [{"doc_id": "tool1-result", "version": "v1", "clause": "value-result"}]},
        [_entry("tool1-result", "v1", "value-result")],
    ),
]
VERCEL_TOOL_IDS = [c.name for c in VERCEL_TOOLS]


def test_vercel_ai_sdk_tool_call_span_is_the_tool_call_the_model_asked_for(store: Path) -> None:
    record = _show(store, TWO_STEPS)
    # ai.toolCall: ai.toolCall.name, .id (the model's), .args and .result as JSON text. It was read as no
    # step at all: the trace held no tool call.
    (tool,) = record["tool_calls"]
    assert (tool["name"], tool["call_id"], tool["arguments"], tool["result"]) == (
        "tool1",
        "call-1",
        {"value": "value"},
        "result1",
    )
    first, second = record["model_calls"]
    assert [t["name"] for m in first["output_messages"] for t in m["tool_calls"]] == ["tool1"]
    # The second request sends the call back (AI SDK parts: tool-call, tool-result {type, value}): the tool
    # message holds the result, not a message whose content was lost.
    assert [(m["role"], m["content"]) for m in second["input_messages"]] == [
        ("user", "test-input"),
        ("assistant", "thinking"),
        ("tool", "result1"),
    ]
    assert [t["id"] for t in second["input_messages"][1]["tool_calls"]] == ["call-1"]
    assert not second["input_partial"]
    # Each span is a root (the mock test propagates no context): four runs, as a reused trace id would hold,
    # whose answers differ, so the trace's is not read; the first root's run read alone gives it.
    assert (record["input"], record["final_answer"]) == (None, None)
    assert (record["runs"][0]["input"], record["runs"][0]["final_answer"]) == ("test-input", "Hello, world!")
    assert "model_input_not_recorded" not in {g["kind"] for g in record["gaps"]}
    one = _show(store, ONE_STEP)
    assert [(t["name"], t["result"]) for t in one["tool_calls"]] == [("tool1", "value-result")]


@pytest.mark.parametrize("case", VERCEL_TOOLS, ids=VERCEL_TOOL_IDS)
def test_a_tool_that_is_no_retrieval_gives_no_definite_verdict(
    store: Path, tmp_path: Path, case: Outside
) -> None:
    # The tool returned the material, but nothing marks it a retrieval: where it came from is unknown.
    record = _show(store, case.trace_id)
    assert record["retrievals"] == []
    given = _triage(store, tmp_path, case, manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )
    assert any("a retrieval span" in m for m in given["stages"][1]["missing"])


# ----------------------------------------------------------------------------- OpenLLMetry's Pinecone RAG

# OpenLLMetry's test_pinecone_retrieval (traceloop/openllmetry, VCR cassette of the real OpenAI and Pinecone
# APIs) run again under its OpenAI and Pinecone instrumentations: the question embedded, Pinecone's top 3
# transcript chunks of YouTube videos on sentence transformers (id, score, metadata with the chunk's text),
# and davinci-002 completing a prompt of the three chunks. Its answer starts "You can use multilingual
# parallel data, semantic textual similarity data, or negative ranking loss." (then runs on to 400 tokens).
PINECONE_RAG = "openllmetry/test_pinecone_retrieval.yaml"
PC_RETURNED, PC_UNSTATED, PC_NOT_RETURNED = (f"0000000000000000000000000000c00{n}" for n in (1, 2, 3))
TSDAE = "pNvujJ1XyeQ-t418.88"


def _pinecone_matches() -> list[dict[str, Any]]:
    """What the recorded Pinecone query returned (the cassette's response)."""
    cassette = yaml.safe_load((OUTSIDE / PINECONE_RAG).read_text())
    (query,) = [i for i in cassette["interactions"] if i["request"]["uri"].endswith("/query")]
    matches: list[dict[str, Any]] = json.loads(query["response"]["body"]["string"])["matches"]
    return matches


def _pinecone_manifest() -> list[dict[str, Any]]:
    """The index as the trace shows it: the chunks returned (their ids and texts), and one it did not
    return — the TSDAE video's next chunk (its text made up here)."""
    returned = [_entry(m["id"], "v1", m["metadata"]["text"]) for m in _pinecone_matches()]
    next_chunk = "TSDAE is a denoising auto-encoder: it trains on unlabeled sentences with a deletion noise."
    return [*returned, _entry("pNvujJ1XyeQ-t568.0", "v1", next_chunk)]


PINECONE = [
    # The chunk the answer's first sentence comes from: returned (rank 2), in the prompt, its fact stated.
    Outside(
        "openllmetry-pinecone/returned",
        lambda: fmt.openllmetry_pinecone(PC_RETURNED),
        PC_RETURNED,
        {
            "required": [
                {
                    "doc_id": TSDAE,
                    "version": "v1",
                    "clause": "you can use multilingual parallel data",
                    "facts": {"training_data": "semantic textual similarity data"},
                }
            ]
        },
        _pinecone_manifest(),
    ),
    # Returned (rank 1) and in the prompt, its fact not in the answer: whether the model ignored it is a
    # judge's call.
    Outside(
        "openllmetry-pinecone/returned-unstated",
        lambda: fmt.openllmetry_pinecone(PC_UNSTATED),
        PC_UNSTATED,
        {
            "required": [
                {
                    "doc_id": "WS1uVMGhlWQ-t747.92",
                    "version": "v1",
                    "clause": "With S BERT embeddings they could create all the embeddings",
                    "facts": {"embedding_time": "five seconds"},
                }
            ]
        },
        _pinecone_manifest(),
    ),
    # Indexed but not among the top 3: no filter is recorded, so whether a filter or the ranking left it
    # out is open.
    Outside(
        "openllmetry-pinecone/not-returned",
        lambda: fmt.openllmetry_pinecone(PC_NOT_RETURNED),
        PC_NOT_RETURNED,
        {
            "required": [
                {
                    "doc_id": "pNvujJ1XyeQ-t568.0",
                    "version": "v1",
                    "clause": "TSDAE is a denoising auto-encoder",
                }
            ]
        },
        _pinecone_manifest(),
    ),
]
PINECONE_IDS = [c.name for c in PINECONE]


def test_openllmetry_pinecone_matches_are_the_documents_with_their_text(store: Path) -> None:
    record = _show(store, PC_RETURNED)
    # Pinecone's db.query.result events carry id, score and str(metadata): the chunk's text is the
    # metadata's "text". It was read as no content (retrieval_content_not_recorded, 3 of 3).
    (retrieval,) = record["retrievals"]
    assert retrieval["name"] == "pinecone.query"
    matches = _pinecone_matches()
    assert [(d["doc_id"], d["score"], d["content"]) for d in retrieval["documents"]] == [
        (m["id"], m["score"], m["metadata"]["text"]) for m in matches
    ]
    assert retrieval["documents"][0]["metadata"]["title"] == "Intro to Sentence Embeddings with Transformers"
    assert retrieval["top_k"] == 3
    assert "retrieval_content_not_recorded" not in {g["kind"] for g in record["gaps"]}
    # The completion's prompt holds the three chunks; its text is the answer.
    (call,) = record["model_calls"]
    ((prompt,),) = [call["input_messages"]]
    assert prompt["content"].startswith("Answer the question based on the context below.")
    assert all(m["metadata"]["text"] in prompt["content"] for m in matches)
    # The three spans are three roots (the replay made them under no parent): three runs, as a trace id
    # reused by other runs would hold, whose answers differ (the completion's, none) — the trace's is not
    # read; the completion's run read alone gives it.
    assert record["final_answer"] is None
    (completion,) = [run for run in record["runs"] if run["name"] == "openai.completion"]
    assert completion["final_answer"] == call["output_text"]
    assert completion["final_answer"].startswith(" You can use multilingual parallel data, semantic textual")
    assert record["runs"][0]["name"] == "openai.embeddings"  # its input is the question it embedded
    assert record["runs"][0]["input"] == (
        "Which training method should I use for sentence transformers when I only have pairs of related"
        " sentences?"
    )


# case -> (verdict and statuses with the manifest, what the first open stage misses). The three spans are
# three roots, nothing ties the query to the completion but the trace id (a reused one looks the same): the
# runs differ at retrieved (the query's returned the chunk, the others hold no retrieval). Read as one run,
# both were unconfirmed at used_by_model (the completion stopped at max_tokens; the answer not stating it).
PINECONE_VERDICTS: dict[str, tuple[str, list[str], str | None]] = {
    "openllmetry-pinecone/returned": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "a trace id of its own for each run",
    ),
    "openllmetry-pinecone/returned-unstated": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "a trace id of its own for each run",
    ),
    "openllmetry-pinecone/not-returned": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "tracejudge.retrieval.filter",
    ),
}


@pytest.mark.parametrize("case", PINECONE, ids=PINECONE_IDS)
def test_openllmetry_pinecone_triage(store: Path, tmp_path: Path, case: Outside) -> None:
    pinned = PINECONE_VERDICTS[case.name]
    _assert_pinned(_triage(store, tmp_path, case, manifest=True), pinned)


# ----------------------------------------------------------------------------- DSPy's RAG module

# openinference-instrumentation-dspy's test_rag_module (Arize-ai/openinference, VCR cassette of the real
# ColBERTv2 wiki17 search and OpenAI chat API) replayed under the instrumentation it was recorded with:
# dspy.Retrieve(k=3) returned three wiki17 abstracts, and ChainOfThought(BasicQA) was called with them as
# `context` — but BasicQA's only input field is `question`, so the ChatAdapter sent the question alone: the
# recorded chat request holds no passage. gpt-4 answered "Washington, D.C." from what it knew.
DSPY_RAG, DSPY_CONTEXT_ATTRIBUTES = "000000000000000000000000000d5901", "000000000000000000000000000d5903"
US_CAPITAL = "The capital of the United States is Washington, D.C."


def _dspy_manifest() -> list[dict[str, Any]]:
    """The wiki17 abstracts the search returned (ColBERTv2's pid is the document id), and one it did not
    return (its text made up here)."""
    (search,) = [
        i
        for i in yaml.safe_load((OUTSIDE / "dspy" / "test_rag_module.yaml").read_text())["interactions"]
        if i["request"]["method"] == "GET"
    ]
    returned = json.loads(search["response"]["body"]["string"])["topk"]
    monument = "Washington Monument | The Washington Monument is an obelisk on the National Mall."
    return [
        *(_entry(str(p["pid"]), "v1", p["long_text"]) for p in returned),
        _entry("5120021", "v1", monument),
    ]


DSPY = [
    # Returned at rank 1, and the model input recorded whole (system and user message) without it.
    Outside(
        "dspy/rag-context-dropped",
        lambda: fmt.dspy("test_rag_module"),
        DSPY_RAG,
        {"required": [{"doc_id": "1918771", "version": "v1", "clause": US_CAPITAL}]},
        _dspy_manifest(),
    ),
    # The same run recorded again under OpenInference's using_attributes: session, user, metadata, tags and a
    # prompt template with its variables on every span.
    Outside(
        "dspy/rag-context-attributes",
        lambda: fmt.dspy("test_context_attributes_are_instrumented"),
        DSPY_CONTEXT_ATTRIBUTES,
        {"required": [{"doc_id": "1918771", "version": "v1", "clause": US_CAPITAL}]},
        _dspy_manifest(),
    ),
    # Indexed, not among the three returned: no filter is recorded, so whether a filter or the ranking left
    # it out is open.
    Outside(
        "dspy/rag-not-returned",
        lambda: fmt.dspy("test_rag_module"),
        DSPY_RAG,
        {"required": [{"doc_id": "5120021", "version": "v1", "clause": "an obelisk on the National Mall"}]},
        _dspy_manifest(),
    ),
]
# The same instrumentation's test_react (its cassette of three gpt-4o-mini calls) replayed with dspy
# 2.6.23 and openinference-instrumentation-dspy 0.1.23, the versions of its recording:
# dspy.ReAct("question -> answer") with an `add` tool — the model asks add(2, 2), the tool returns 4 (a TOOL
# span `add.__call__`), the model finishes, and ChainOfThought extracts the answer "4" from the trajectory.
# No retrieval.
DSPY_REACT = "000000000000000000000000000d5902"
DSPY.append(
    Outside(
        "dspy/react-tool",
        lambda: fmt.dspy("test_react"),
        DSPY_REACT,
        {"required": [{"doc_id": "arithmetic", "version": "v1", "clause": "2 + 2 equals 4"}]},
        [_entry("arithmetic", "v1", "2 + 2 equals 4")],
    )
)
DSPY_IDS = [c.name for c in DSPY]
# case -> (verdict and statuses with the manifest, what the first open stage misses)
DSPY_VERDICTS: dict[str, tuple[str, list[str], str | None]] = {
    # in_context fails: the one model call's input was recorded whole and holds no passage.
    "dspy/rag-context-dropped": ("dropped_in_context", ["pass", "pass", "fail", "skipped"], None),
    # The same: nothing of the context attributes is read as the model's input or the index's filter.
    "dspy/rag-context-attributes": ("dropped_in_context", ["pass", "pass", "fail", "skipped"], None),
    # retrieved stays open: no filter or candidates recorded.
    "dspy/rag-not-returned": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "tracejudge.retrieval.filter",
    ),
    # retrieved stays open: the tool's result is no retrieval, and nothing marks where the clause came from.
    "dspy/react-tool": ("unconfirmed", ["pass", "unconfirmed", "skipped", "skipped"], "a retrieval span"),
}


def test_dspy_prediction_repr_is_read_as_its_answer_field(store: Path) -> None:
    record = _show(store, DSPY_RAG)
    # openinference-instrumentation-dspy 0.1.13 records a module's output as the Prediction's repr:
    # "Prediction(\n    context=[...],\n    answer='Washington, D.C.'\n)". It was read whole as the answer,
    # the three passages in it, and tied to no model call (in_context unconfirmed).
    assert record["final_answer"] == "Washington, D.C."
    (call,) = record["model_calls"]
    assert call["name"] == "LM.__call__"
    assert [m["role"] for m in call["input_messages"]] == ["system", "user"]
    assert not call["input_partial"]
    assert "[[ ## answer ## ]]\nWashington, D.C." in call["output_text"]
    # Retrieve.forward (texts) around ColBERTv2.__call__ (pid, text, score): one retrieval.
    (retrieval,) = record["retrievals"]
    assert len(retrieval["span_ids"]) == 2
    assert [d["doc_id"] for d in retrieval["documents"]] == ["1918771", "3377468", "953799"]
    prompt = " ".join(m["content"] for m in call["input_messages"])
    assert all(d["content"] not in prompt for d in retrieval["documents"])


def test_dspy_react_reads_the_question_the_tool_and_the_extracted_answer(store: Path) -> None:
    record = _show(store, DSPY_REACT)
    # ReAct.forward(**input_args): its input was read as the JSON of {"input_args": {"question": ...}}.
    assert record["input"] == "What is 2 + 2?"
    # Its output, the Prediction's repr (trajectory and answer), read as its answer field.
    assert record["final_answer"] == "4"
    assert [(t["name"], t["arguments"], t["result"]) for t in record["tool_calls"]] == [
        ("add.__call__", {"kwargs": {"x": 2, "y": 2}}, "4"),
        ("finish.__call__", {"kwargs": {}}, "Completed."),
    ]
    # Three LM calls; the trajectory (the tool's observation) reaches the later ones in the user message.
    _, second, third = record["model_calls"]
    assert "[[ ## observation_0 ## ]]\n4" in second["input_messages"][1]["content"]
    assert "[[ ## answer ## ]]\n4" in third["output_text"]
    assert record["retrievals"] == []


@pytest.mark.parametrize("case", DSPY, ids=DSPY_IDS)
def test_dspy_rag_triage(store: Path, tmp_path: Path, case: Outside) -> None:
    pinned = DSPY_VERDICTS[case.name]
    # The pids name documents without versions. Without the manifest the trace still shows the returned
    # passage carries the clause (so it was indexed and returned, and dropped); of one it did not return,
    # nothing shows it was indexed.
    bare = _triage(store, tmp_path, case, manifest=False)
    assert (bare["verdict"], bare["stages"][0]["status"]) == (
        ("dropped_in_context", "pass")
        if case.name in ("dspy/rag-context-dropped", "dspy/rag-context-attributes")
        else ("unconfirmed", "unconfirmed")
    )
    _assert_pinned(_triage(store, tmp_path, case, manifest=True), pinned)


# ----------------------------------------------------------------------------- Bedrock Knowledge Bases

# openinference-instrumentation-bedrock's own Knowledge Base tests (VCR cassettes of the real Bedrock Agent
# Runtime API) replayed under the release that added them: a knowledge base (SSGLURQ9A5) holding Lilian
# Weng's "LLM Powered Autonomous Agents" as one custom document (id 2222, every chunk located by it), searched
# with retrieve (five chunks, scores), asked through retrieve_and_generate (Claude 3 Haiku; the answer and the
# chunk it cites, twice), and looked up by an agent (invoke_agent: the lookup's five chunks in the prompt of
# its model invocation); and one PDF in S3 (VLDBJ96.pdf, on Telos) asked through retrieve_and_generate and its
# stream (nine chunks cited, no id but the S3 uri).
BR_RETRIEVE, BR_KB, BR_S3, BR_STREAM, BR_AGENT = (f"{0xBE00 + n:032x}" for n in range(1, 6))
STEP_BY_STEP = "think step by step"
SELF_REFLECTION = "Self-reflection is a vital aspect that allows autonomous agents to improve iteratively"
FIRST_CLASS = "Telos treats at- tributes as first-class citizens"


def _bedrock_chunks(name: str) -> list[str]:
    """The chunk texts a recorded response holds: retrieve's results, or each reference its citations
    cite."""
    (interaction,) = yaml.safe_load((OUTSIDE / "bedrock" / f"{name}.yaml").read_text())["interactions"]
    body = json.loads(interaction["response"]["body"]["string"])
    if "retrievalResults" in body:
        return [r["content"]["text"] for r in body["retrievalResults"]]
    return [r["content"]["text"] for c in body["citations"] for r in c["retrievedReferences"]]


def _weng_manifest() -> list[dict[str, Any]]:
    """Document 2222 as one version: the five chunks retrieve returned, and a passage none returned (the
    post's self-reflection section, its sentence written here)."""
    chunks = _bedrock_chunks("test_retrieve")
    return [_entry("2222", "v1", " ".join([*chunks, SELF_REFLECTION + "."]))]


def _telos_manifest() -> list[dict[str, Any]]:
    """The PDF as one version: the chunks cited (in order, once each)."""
    chunks = list(dict.fromkeys(_bedrock_chunks("test_retrieve_and_generate_with_external_s3_source")))
    return [_entry("VLDBJ96.pdf", "v1", " ".join(chunks))]


def _weng(clause: str, **kw: Any) -> dict[str, Any]:
    return {"required": [{"doc_id": "2222", "version": "v1", "clause": clause, **kw}]}


BEDROCK = [
    # retrieve alone: the chunk holding the clause returned at rank 1, no model call.
    Outside(
        "bedrock/retrieve",
        lambda: fmt.bedrock("test_retrieve"),
        BR_RETRIEVE,
        _weng(STEP_BY_STEP),
        _weng_manifest(),
    ),
    # The same document's passage no chunk returned holds: the document was returned, that passage not.
    Outside(
        "bedrock/retrieve-passage-not-returned",
        lambda: fmt.bedrock("test_retrieve"),
        BR_RETRIEVE,
        _weng(SELF_REFLECTION),
        _weng_manifest(),
    ),
    # retrieve_and_generate: the chunk cited holds the clause; the prompt the service built is recorded
    # nowhere.
    Outside(
        "bedrock/rag-kb",
        lambda: fmt.bedrock("test_retrieve_and_generate_with_knowledge_base"),
        BR_KB,
        _weng(STEP_BY_STEP),
        _weng_manifest(),
    ),
    # A chunk retrieve returns (rank 5) that the answer does not cite: the span records cited chunks only.
    Outside(
        "bedrock/rag-kb-uncited",
        lambda: fmt.bedrock("test_retrieve_and_generate_with_knowledge_base"),
        BR_KB,
        _weng("task type based filtration is needed"),
        _weng_manifest(),
    ),
    # The S3 source's chunks carry no id: identified by the manifest's content.
    Outside(
        "bedrock/rag-s3",
        lambda: fmt.bedrock("test_retrieve_and_generate_with_external_s3_source"),
        BR_S3,
        {"required": [{"doc_id": "VLDBJ96.pdf", "version": "v1", "clause": FIRST_CLASS}]},
        _telos_manifest(),
    ),
    Outside(
        "bedrock/rag-s3-stream",
        lambda: fmt.bedrock("test_retrieve_and_generate_stream"),
        BR_STREAM,
        {"required": [{"doc_id": "VLDBJ96.pdf", "version": "v1", "clause": FIRST_CLASS}]},
        _telos_manifest(),
    ),
    # The agent's knowledge-base lookup returned the chunk, its model invocation's prompt holds it, and the
    # answer states its fact.
    Outside(
        "bedrock/agent-kb",
        lambda: fmt.bedrock("test_knowledge_base_results"),
        BR_AGENT,
        _weng(STEP_BY_STEP, facts={"search": "breadth-first search (BFS)"}),
        _weng_manifest(),
    ),
    Outside(
        "bedrock/agent-kb-passage-not-returned",
        lambda: fmt.bedrock("test_knowledge_base_results"),
        BR_AGENT,
        _weng(SELF_REFLECTION),
        _weng_manifest(),
    ),
]
BEDROCK_IDS = [c.name for c in BEDROCK]
BEDROCK_BY_NAME = {c.name: c for c in BEDROCK}


_IN_CALL = "built the prompt inside the call"
# case -> (verdict and statuses with the manifest, what the first open stage misses)
BEDROCK_VERDICTS: dict[str, tuple[str, list[str], str | None]] = {
    # in_context stays open: no model call in the trace.
    "bedrock/retrieve": ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"], "a model (LLM) span"),
    # retrieved stays open: 2222 was returned (five chunks), none holding the passage, and which version of
    # 2222 the chunks are the trace does not say (nor does a chunk not returned make a rank or filter fault).
    "bedrock/retrieve-passage-not-returned": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "the version of 2222",
    ),
    # in_context stays open: the service built the prompt; the trace holds the question alone.
    "bedrock/rag-kb": ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"], _IN_CALL),
    # retrieved stays open: the span records the chunks cited, not every chunk retrieved.
    "bedrock/rag-kb-uncited": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "the version of 2222",
    ),
    # The chunks carry no id: the manifest's content names them (VLDBJ96.pdf@v1), then as rag-kb.
    "bedrock/rag-s3": ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"], _IN_CALL),
    "bedrock/rag-s3-stream": ("unconfirmed", ["pass", "pass", "unconfirmed", "skipped"], _IN_CALL),
    # The lookup returned the chunk (rank 1), the model invocation's prompt (its one input message) holds it,
    # and the answer states breadth-first search (BFS): the trace records every step.
    "bedrock/agent-kb": ("no_fault", ["pass", "pass", "pass", "pass"], None),
    "bedrock/agent-kb-passage-not-returned": (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
        "the version of 2222",
    ),
}


@pytest.mark.parametrize("case", BEDROCK, ids=BEDROCK_IDS)
def test_bedrock_knowledge_base_triage(store: Path, tmp_path: Path, case: Outside) -> None:
    _assert_pinned(_triage(store, tmp_path, case, manifest=True), BEDROCK_VERDICTS[case.name])


# ----------------------------------------------------------------------------- Marqo

# OpenLLMetry's Marqo test (VCR cassette of a real Marqo 2.8.1 server) replayed under the release that added
# it: two documents indexed (a travelogue of Marco Polo; NASA's Extravehicular Mobility Unit, article_591),
# then searched for "What is the best outfit to wear on the moon?" — both returned, the EMU first. The add and
# the search are two traces (the test makes each call under no parent); the search's is triaged.
MARQO_SEARCH = f"{0xD0D02:032x}"
EMU = (
    "The EMU is a spacesuit that provides environmental protection, mobility, life support, and"
    " communications for astronauts"
)
MARQO = [
    Outside(
        "marqo/search",
        lambda: fmt.marqo("test_marqo_search"),
        MARQO_SEARCH,
        {"required": [{"doc_id": "article_591", "version": "v1", "clause": "a spacesuit that provides"}]},
        [
            _entry("article_591", "v1", EMU),
            _entry("polo", "v1", "A 13th-century travelogue describing Polo's travels"),
        ],
    )
]
MARQO_IDS = [c.name for c in MARQO]


def test_marqo_search_results_are_read_as_the_documents_returned(store: Path, tmp_path: Path) -> None:
    record = _show(store, MARQO_SEARCH)
    (retrieval,) = record["retrievals"]
    # Marqo's result events hold the hit as Marqo returns it, unprefixed: its _id, _score and its own fields
    # (Title, Description) — read as the documents returned, best first, their fields the text.
    assert retrieval["name"] == "marqo.search"
    assert retrieval["query"] == "What is the best outfit to wear on the moon?"
    assert [(d["doc_id"], d["score"]) for d in retrieval["documents"]] == [
        ("article_591", 0.8302066018513117),
        ("53826c11-053d-48bb-b1b5-e7dd6d0565c0", 0.7665059356501492),
    ]
    assert retrieval["documents"][0]["content"] == f"Extravehicular Mobility Unit (EMU)\n{EMU}"
    assert retrieval["documents"][0]["metadata"] == {
        "Title": "Extravehicular Mobility Unit (EMU)",
        "Description": EMU,
    }
    assert "retrieval_content_not_recorded" not in {g["kind"] for g in record["gaps"]}
    # article_591 returned at rank 1 holding the clause; no model call in the trace.
    given = _triage(store, tmp_path, MARQO[0], manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "pass", "unconfirmed", "skipped"],
    )
    assert any("a model (LLM) span" in m for m in given["stages"][2]["missing"])


def test_a_marqo_hit_named_by_no_manifest_document_may_be_the_material(store: Path, tmp_path: Path) -> None:
    # The travelogue's _id is Marqo's own (a UUID the manifest does not list) and its text is not the
    # manifest's: asked about that document, "not returned" is never concluded.
    case = Outside(
        "marqo/search-polo",
        MARQO[0].request,
        MARQO_SEARCH,
        {"required": [{"doc_id": "polo", "version": "v1", "clause": "a 13th-century travelogue"}]},
        MARQO[0].manifest,
    )
    given = _triage(store, tmp_path, case, manifest=True)
    assert (given["verdict"], [s["status"] for s in given["stages"]]) == (
        "unconfirmed",
        ["pass", "unconfirmed", "skipped", "skipped"],
    )


def _without_metadata(spans: list[RawSpan]) -> list[RawSpan]:
    """The spans with no returned document's metadata (its location: the id 2222)."""
    return [
        span.model_copy(
            update={"attributes": {k: v for k, v in span.attributes.items() if not k.endswith(".metadata")}}
        )
        for span in spans
    ]


def test_a_version_returned_in_parts_without_the_clause_is_no_drop() -> None:
    # The agent's lookup returned five chunks of document 2222, none holding the passage the ticket names
    # (the manifest's text of 2222@v1 holds it apart from all five). Without their locations, the chunks'
    # texts name them 2222@v1 (the manifest's content): the version was returned, the clause in no model
    # input, and it read as dropped_in_context — although nothing returned ever held the clause.
    case = BEDROCK_BY_NAME["bedrock/agent-kb-passage-not-returned"]
    spans = _without_metadata(_spans(case))
    ticket = Ticket.model_validate({"trace_id": case.trace_id, **case.ticket})
    loc = localize(normalize(spans), ticket, [ManifestEntry.model_validate(e) for e in case.manifest])
    assert (loc.verdict, [s.status for s in loc.stages]) == (
        "unconfirmed",
        ["pass", "pass", "unconfirmed", "skipped"],
    )
    (in_context,) = [s for s in loc.stages if s.name == "in_context"]
    assert "in a part no returned text covers" in in_context.detail
    # The clause a returned chunk holds, missing from the model input, still reads as dropped: the DSPy RAG
    # module's passage (test_dspy_rag_triage), and this trace with the passage taken out of the prompt.
    held = BEDROCK_BY_NAME["bedrock/agent-kb"]
    assert _verdict(held, _without_metadata(_prompt_without(_spans(held), "think step by step"))) == (
        "dropped_in_context"
    )


def _prompt_without(spans: list[RawSpan], text: str) -> list[RawSpan]:
    """The spans with ``text`` taken out of the model invocation's prompt."""
    out = []
    for span in spans:
        attrs = {
            k: v.replace(text, "")
            if isinstance(v, str)
            and k.startswith(("llm.input_messages", "input.value"))
            and span.name == "LLM"
            else v
            for k, v in span.attributes.items()
        }
        out.append(span.model_copy(update={"attributes": attrs}))
    return out


# ----------------------------------------------------------------------------- removal property


def _spans(case: Outside) -> list[RawSpan]:
    return list(decode_json(json.dumps(case.request())).spans)


def _verdict(case: Outside, spans: list[RawSpan]) -> str:
    ticket = Ticket.model_validate({"trace_id": case.trace_id, **case.ticket})
    manifest = [ManifestEntry.model_validate(e) for e in case.manifest]
    loc = localize(normalize(spans), ticket, manifest)
    return loc.verdict + (f" ({loc.cause})" if loc.cause else "")


def _removals(spans: list[RawSpan]) -> list[tuple[str, list[RawSpan]]]:
    out = []
    for i, span in enumerate(spans):
        if len(spans) > 1:
            out.append((f"span {span.name}", spans[:i] + spans[i + 1 :]))
        for key in span.attributes:
            attrs = {k: v for k, v in span.attributes.items() if k != key}
            out.append(
                (
                    f"attr {span.name}:{key}",
                    [*spans[:i], span.model_copy(update={"attributes": attrs}), *spans[i + 1 :]],
                )
            )
        for j, event in enumerate(span.events):
            events = span.events[:j] + span.events[j + 1 :]
            out.append(
                (
                    f"event {span.name}:{event.name}",
                    [*spans[:i], span.model_copy(update={"events": events}), *spans[i + 1 :]],
                )
            )
    return out


def _variant(case: Outside, variant: str) -> Outside:
    """The case under its manifest as given, or with the required material never indexed, or not in
    effect until after the trace."""
    doc = case.ticket["required"][0]["doc_id"]
    change = {"never-indexed": {"indexed_at": None}, "not-yet": {"effective_from": "2030-01-01T00:00:00Z"}}
    entries = [e | change.get(variant, {}) if e["doc_id"] == doc else e for e in case.manifest]
    return Outside(f"{case.name}@{variant}", case.request, case.trace_id, case.ticket, entries)


VARIANTS = ("as-given", "never-indexed", "not-yet")


def test_a_manifest_the_trace_contradicts_gives_no_definite_verdict() -> None:
    varied = [_variant(case, variant) for case in TRULENS for variant in VARIANTS]
    verdicts = {case.name: _verdict(case, _spans(case)) for case in varied}
    assert verdicts == {
        "trulens/llama@as-given": "no_fault",
        # The manifest says page 3 was never indexed, the trace that the retriever returned it: the trace
        # wins (indexed passes on the retrieval), and the rest is recorded.
        "trulens/llama@never-indexed": "no_fault",
        "trulens/llama@not-yet": "basis_not_in_effect",
        "trulens/chain@as-given": "unconfirmed",
        "trulens/chain@never-indexed": "unconfirmed",
        "trulens/chain@not-yet": "basis_not_in_effect",
        "trulens/chain-unmarked-llm@as-given": "unconfirmed",
        "trulens/chain-unmarked-llm@never-indexed": "unconfirmed",
        "trulens/chain-unmarked-llm@not-yet": "basis_not_in_effect",
        "trulens/chain-not-returned@as-given": "unconfirmed",
        "trulens/chain-not-returned@never-indexed": "not_indexed",
        "trulens/chain-not-returned@not-yet": "basis_not_in_effect",
    }


_RETRIEVER = "langchain_core.vectorstores.base.VectorStoreRetriever._get_relevant_documents"
_WRONG_MANIFEST = (
    "the manifest says Figure 1's chunk was never indexed and only this one retrieval span shows it was"
    " returned (the manifest is wrong for this trace): without it the trace is one of a never-indexed"
    " document (DESIGN 5.5: indistinguishable from a real fault; cf. tests/localize/test_removal_property.py)"
)
_WRONG_MANIFEST_HOSTED = (
    "the manifest says paris was never indexed and only the response OpenInference recorded (output.value)"
    " shows the hosted file_search returned it (the manifest is wrong for this trace): without it the trace"
    " is one of a never-indexed document (DESIGN 5.5: indistinguishable from a real fault)"
)
_WRONG_MANIFEST_PINECONE = (
    "the manifest says the chunk was never indexed and only the Pinecone query span, or its one"
    " db.query.result event, shows it was returned (the manifest is wrong for this trace; the"
    " instrumentation records no result count to show an event was lost): without it the trace is one of a"
    " never-indexed document (DESIGN 5.5: indistinguishable from a real fault)"
)
_WRONG_MANIFEST_MARQO = (
    "the manifest says article_591 was never indexed and only the Marqo search span's result events show it"
    " was returned (its _id; the manifest is wrong for this trace; the instrumentation records no result"
    " count to show an event was lost): without the span, its events or its db.system (which marks the"
    " events as Marqo's hits), the trace is one of a never-indexed document (DESIGN 5.5: indistinguishable"
    " from a real fault)"
)
_WRONG_MANIFEST_DSPY = (
    "the manifest says the wiki17 abstract was never indexed and only the retrieval shows it was returned,"
    " its text naming the version (ColBERTv2 records no version; the manifest is wrong for this trace):"
    " without the retrieval's spans, or with their texts off or hidden, the trace is one whose retriever was"
    " not traced, or that returned the pid in a version the manifest does not contradict, and a"
    " never-indexed document is what the manifest then shows (DESIGN 5.5: indistinguishable from a real"
    " fault; the kinds of tests/localize/test_removal_property.py)"
)
_WRONG_MANIFEST_BEDROCK = (
    "the manifest says document 2222 was never indexed and only the text of a returned chunk holding the"
    " clause shows the version returned (Bedrock records no version; the chunks name 2222 without one):"
    " without that text (off, hidden, or cut before the clause), its span or the span's kind, the trace is"
    " one that returned 2222 in a version the manifest does not contradict, and a never-indexed document is"
    " what the manifest then shows (DESIGN 5.5: indistinguishable from a real fault; cf. the DSPy cases)"
)
_WRONG_MANIFEST_S3 = (
    "the manifest says VLDBJ96.pdf was never indexed and only the cited chunks' texts show it was returned"
    " (they carry no id of their own, and their S3 uri, read as their id, names no manifest document):"
    " without the texts the chunks are documents nothing identifies, and a never-indexed document is what"
    " the manifest then shows (DESIGN 5.5: indistinguishable from a real fault)"
)
_CONTENT_OFF = ("content documents", "content all", "redact documents", "redact all")
# (case, removed record) -> why the trace without it is indistinguishable from a real fault.
INDISTINGUISHABLE: dict[tuple[str, str], str] = {
    **{
        (f"bedrock/{name}@never-indexed", label): _WRONG_MANIFEST_BEDROCK
        for name, span in (("retrieve", "bedrock.retrieve"), ("agent-kb", "knowledge_base"))
        for label in (
            *_CONTENT_OFF,
            f"attr {span}:retrieval.documents.0.document.content",
            f"redact {span}:retrieval.documents.0.document.content",
            f"truncate {span}:retrieval.documents.0.document.content@128",
            f"attr {span}:openinference.span.kind",
            *([f"span {span}", "subtree orchestrationTrace"] if name == "agent-kb" else []),
        )
    },
    **{("bedrock/rag-kb@never-indexed", label): _WRONG_MANIFEST_BEDROCK for label in _CONTENT_OFF},
    **{
        (f"bedrock/{name}@never-indexed", label): _WRONG_MANIFEST_S3
        for name in ("rag-s3", "rag-s3-stream")
        for label in _CONTENT_OFF
    },
    **{
        (f"dspy/{name}@never-indexed", label): _WRONG_MANIFEST_DSPY
        for name in ("rag-context-dropped", "rag-context-attributes")
        for label in (
            "subtree Retrieve.forward",
            "content documents",
            "content all",
            "redact documents",
            "redact all",
        )
    },
    **{
        (f"openllmetry-pinecone/{name}@never-indexed", label): _WRONG_MANIFEST_PINECONE
        for name in ("returned", "returned-unstated")
        for label in ("span pinecone.query", "event pinecone.query:db.query.result")
    },
    **{
        ("marqo/search@never-indexed", label): _WRONG_MANIFEST_MARQO
        for label in (
            "span marqo.search",
            "batch 1 of 2 end times",
            "attr marqo.search:db.system",
            "event marqo.search:db.query.result",
        )
    },
    ("openai-file-search/results@never-indexed", "attr Response:output.value"): _WRONG_MANIFEST_HOSTED,
    ("trulens/chain-unmarked-llm@never-indexed", f"span {_RETRIEVER}"): _WRONG_MANIFEST,
    (
        "trulens/chain-unmarked-llm@never-indexed",
        f"attr {_RETRIEVER}:ai.observability.span_type",
    ): _WRONG_MANIFEST,
    (
        "trulens/chain-unmarked-llm@never-indexed",
        f"attr {_RETRIEVER}:ai.observability.retrieval.retrieved_contexts",
    ): _WRONG_MANIFEST,
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    "case",
    [*CASES, *TRULENS, *LOGFIRE, *VERCEL_TOOLS, *FILE_SEARCH_CASES, *PINECONE, *DSPY, *BEDROCK, *MARQO],
    ids=[
        *IDS,
        *TRULENS_IDS,
        *LOGFIRE_IDS,
        *VERCEL_TOOL_IDS,
        *FILE_SEARCH_IDS,
        *PINECONE_IDS,
        *DSPY_IDS,
        *BEDROCK_IDS,
        *MARQO_IDS,
    ],
)
def test_removing_any_record_leaves_the_verdict_or_makes_it_unconfirmed(case: Outside, variant: str) -> None:
    case = _variant(case, variant)
    spans = _spans(case)
    before = _verdict(case, spans)
    moved = [
        f"{label}: {before} -> {after}"
        for label, fewer in _removals(spans)
        if (after := _verdict(case, fewer)) not in (before, "unconfirmed")
        and (case.name, label) not in INDISTINGUISHABLE
    ]
    assert moved == []


# ----------------------------------------------------------------------------- bare numbers


def _chain_triage(required_facts: dict[str, Any], superseded_facts: dict[str, Any] | None) -> str:
    spans = _spans(TRULENS[1])
    ticket: dict[str, Any] = {
        "trace_id": CHAIN,
        "required": [
            {"doc_id": "attention/table-2", "version": "v1", "clause": BLEU, "facts": required_facts}
        ],
    }
    if superseded_facts is not None:
        ticket["superseded"] = [{"doc_id": "attention/table-2", "version": "v0", "facts": superseded_facts}]
    manifest = [ManifestEntry.model_validate(e) for e in _chain_manifest()]
    loc = localize(normalize(spans), Ticket.model_validate(ticket), manifest)
    return loc.verdict


@pytest.mark.parametrize(
    ("required_facts", "superseded_facts"),
    [({"score": 0}, None), ({"bleu": 28.4}, {"bleu": 0}), ({"bleu": 28.4}, {"bleu": "0"})],
)
def test_a_bare_number_the_answer_uses_for_something_else_states_no_fact(
    required_facts: dict[str, Any], superseded_facts: dict[str, Any] | None
) -> None:
    # FakeListLLM answered "This is a mocked response for prompt 0.": its 0 numbers the prompt; it says
    # nothing of a score or a BLEU. It was read as stating score = 0 (no_fault) or the superseded
    # BLEU 0 (ignored_by_model).
    assert _chain_triage(required_facts, superseded_facts) == "unconfirmed"


def test_a_bare_number_counts_when_the_answer_names_the_fact(mk: ModuleType) -> None:
    material = mk.material(facts={"retries": 3})
    named = localize(mk.task(answer="It retries 3 times before it gives up."), mk.ticket([material]))
    assert named.verdict == "no_fault"
    unnamed = localize(mk.task(answer="See step 3 of the runbook."), mk.ticket([material]))
    assert unnamed.verdict == "unconfirmed"
    # A unit written on either side is enough: 30,000 RMB states a cap whatever its key says.
    unit = localize(mk.task(answer="At most 30,000 RMB."), mk.ticket([mk.material(facts={"x": 30000})]))
    assert unit.verdict == "no_fault"


def test_a_bare_number_counts_when_the_answer_uses_a_word_the_clause_writes_beside_it(mk: ModuleType) -> None:
    # ticket draft names a fact after its sentence's first word ("6.1 Machine Translation ... BLEU score of
    # 28.4" gave machine_number: 28.4): the clause's words beside the value say what it is too.
    # The clause: "Prepayment shall not exceed 30,000 RMB".
    material = mk.material(facts={"first_number": 30000})
    named = localize(mk.task(answer="No: prepayments may not exceed 30000."), mk.ticket([material]))
    assert named.verdict == "no_fault"
    unnamed = localize(mk.task(answer="Ticket 30000 is closed."), mk.ticket([material]))
    assert unnamed.verdict == "unconfirmed"


@pytest.mark.parametrize(
    ("answer", "required", "superseded"),
    [
        # The answer states the required 5 with no word of retries, and a superseded timeout it rejects.
        ("Try 5 times; the old 30 s wait is gone.", {"retries": 5}, {"timeout": "30 s"}),
        # The answer states the required cap, and a bare 3 that may be the superseded retries.
        ("At most 30,000 RMB; step 3 of the runbook.", {"cap": "30,000 RMB"}, {"retries": 3}),
    ],
)
def test_a_bare_number_the_answer_may_state_keeps_the_other_reading_from_being_definite(
    mk: ModuleType, answer: str, required: dict[str, Any], superseded: dict[str, Any]
) -> None:
    # Before bare numbers needed naming, either 5 or 3 counted: both readings stood, unconfirmed. Not
    # counting it must not make the other reading definite (ignored_by_model or no_fault).
    ticket = mk.ticket(
        [mk.material(facts=required)], superseded=[Material(doc_id=mk.DOC, version="v1", facts=superseded)]
    )
    loc = localize(mk.task(answer=answer), ticket)
    assert loc.verdict == "unconfirmed"
    (used,) = [s for s in loc.stages if s.name == "used_by_model"]
    assert any("may state" in e.note for e in used.evidence)


# ----------------------------------------------------------------------------- unreadable prompt values


def _prompt_argument(spans: list[RawSpan], value: Callable[[str], str]) -> list[RawSpan]:
    """The spans with the generation's prompt value passed as its ``prompt`` argument, made by ``value``."""
    out = []
    for span in spans:
        attrs = dict(span.attributes)
        if attrs.get("ai.observability.span_type") == "generation":
            attrs["ai.observability.call.kwargs.prompt"] = value(
                str(attrs.pop("ai.observability.call.kwargs.input"))
            )
        out.append(span.model_copy(update={"attributes": attrs}))
    return out


def test_a_prompt_value_repr_that_cannot_be_read_is_not_searched_as_text() -> None:
    # A prompt value with a message it cannot read (content parts, not a string) was taken as the
    # prompt's text, the repr itself: its escaped line breaks hid a clause spanning one, and triage
    # concluded dropped_in_context although the prompt held it.
    case = Outside(
        "trulens/chain-line-break",
        TRULENS[1].request,
        CHAIN,
        {
            "required": [
                {"doc_id": "attention/table-4", "version": "v1", "clause": "Results are on Section 23 of WSJ"}
            ]
        },
        _chain_manifest(),
    )
    spans = _spans(case)
    assert _verdict(case, _prompt_argument(spans, lambda v: v)) == "unconfirmed"  # in_context passes
    unread = _prompt_argument(spans, lambda v: v[:-1] + ", AIMessage(content=[])]")
    assert _verdict(case, unread) == "unconfirmed"
    record = normalize(unread)
    (call,) = record.model_calls
    assert not call.input_recorded
    assert "attribute_unparseable" in {g.kind for g in record.gaps}
