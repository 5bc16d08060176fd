"""TruLens' ``ai.observability.*`` spans, hand-written around what its golden event tables record
(tests/fixtures/outside/trulens): what is read, and what is left unread rather than guessed."""

from __future__ import annotations

from typing import Any

import pytest

from tracejudge.normalize import normalize
from tracejudge.normalize._trulens import prompt_value_messages
from tracejudge.schema import RawSpan

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT = "00000000000000a0"
BASE = "ai.observability"


def _span(span_id: str, attrs: dict[str, Any], parent: str | None = ROOT) -> RawSpan:
    return RawSpan(
        trace_id=TRACE,
        span_id=span_id.rjust(16, "0"),
        parent_span_id=parent,
        name=f"span-{span_id}",
        start_time_unix_nano=1_780_000_000_000_000_000 + int(span_id, 16),
        end_time_unix_nano=1_780_000_000_100_000_000,
        attributes=attrs,
    )


def _root(**attrs: Any) -> RawSpan:
    return _span(
        "a0",
        {f"{BASE}.span_type": "record_root", f"{BASE}.record_root.input": "cap?", **attrs},
        parent=None,
    )


def _generation(arguments: dict[str, Any], output: str = "30,000 RMB") -> RawSpan:
    attrs = {f"{BASE}.call.kwargs.{k}": v for k, v in arguments.items()}
    return _span("b1", {f"{BASE}.span_type": "generation", f"{BASE}.call.return": output, **attrs})


def test_a_prompt_value_repr_is_read_as_python_not_as_its_escaped_text() -> None:
    text = (
        "messages=[SystemMessage(content='Rules:\\nno prepayment', additional_kwargs={}),"
        ' HumanMessage(content="don\'t\\tskip")]'
    )
    assert prompt_value_messages(text) == [
        {"type": "system", "content": "Rules:\nno prepayment"},
        {"type": "human", "content": "don't\tskip"},
    ]


@pytest.mark.parametrize(
    "text",
    [
        "messages=[HumanMessage(content='cut off",  # truncated by an attribute limit
        "messages=[HumanMessage(content=f'{x}')]",  # not a literal
        "messages=[HumanMessage(content=['a', 'b'])]",  # multimodal content blocks: not a text
        "messages=[Unknown(content='x')]",
        "messages=[HumanMessage(content='x'), 3]",
        "messages=[]",
        "text='no messages'",
        "messages=[__import__('os').system('true')]",
    ],
)
def test_anything_else_is_not_a_prompt_value(text: str) -> None:
    assert prompt_value_messages(text) is None


def test_an_unreadable_generation_input_is_not_recorded_and_says_why() -> None:
    record = normalize([_root(), _generation({"input": "messages=[HumanMessage(content='cut off"})])
    (call,) = record.model_calls
    assert (call.input_recorded, call.output_text) == (False, "30,000 RMB")
    assert any(g.kind == "attribute_unparseable" and "call.kwargs.input" in g.detail for g in record.gaps)


def test_a_prompt_string_is_the_model_input() -> None:
    record = normalize([_root(), _generation({"prompt": "Context: cap is 30,000 RMB\nQ: cap?"})])
    (call,) = record.model_calls
    assert call.input_text == "Context: cap is 30,000 RMB\nQ: cap?"


def test_retrieved_contexts_are_documents_in_order_and_one_string_is_not_split() -> None:
    contexts = {f"{BASE}.span_type": "retrieval", f"{BASE}.retrieval.query_text": "cap?"}
    listed = _span("c1", {**contexts, f"{BASE}.retrieval.retrieved_contexts": ("a, b", "c")})
    record = normalize([_root(), listed])
    ((docs, query),) = [(r.documents, r.query) for r in record.retrievals]
    assert ([d.content for d in docs], [d.position for d in docs], query) == (["a, b", "c"], [0, 1], "cap?")
    one = _span("c1", {**contexts, f"{BASE}.retrieval.retrieved_contexts": "a, b"})
    record = normalize([_root(), one])
    assert [r.documents_recorded for r in record.retrievals] == [False]
    assert any(g.kind == "attribute_unparseable" for g in record.gaps)


def test_the_record_root_holds_the_request_and_the_answer() -> None:
    record = normalize([_root(**{f"{BASE}.record_root.output": "No: the cap is 30,000 RMB."})])
    assert (record.input, record.final_answer) == ("cap?", "No: the cap is 30,000 RMB.")


def _call(
    span_id: str, function: str, attrs: dict[str, Any], *, span_type: str = "unknown", parent: str = ROOT
) -> RawSpan:
    return _span(
        span_id,
        {f"{BASE}.span_type": span_type, f"{BASE}.call.function": function, **attrs},
        parent=parent,
    )


@pytest.mark.parametrize(
    ("function", "model"),
    [
        ("llama_index.core.llms.mock.MockLLM.complete", True),
        ("llama_index.llms.openai.base.OpenAI.achat", True),
        ("langchain_core.language_models.llms.BaseLLM.invoke", True),
        ("langchain_openai.chat_models.base.ChatOpenAI.invoke", True),
        # Not an LLM's method, or not a framework's LLM class.
        ("llama_index.core.llms.mock.MockLLM.metadata", False),
        ("langchain_core.retrievers.BaseRetriever.invoke", False),
        ("myapp.llms.Helper.complete", False),
        ("complete", False),
    ],
)
def test_an_llm_method_trulens_leaves_unknown_is_the_model_call(function: str, model: bool) -> None:
    # TruLens' LlamaIndex app marks no LLM call "generation": MockLLM.complete is an "unknown" span whose
    # prompt is its first positional argument.
    record = normalize(
        [
            _root(),
            _call(
                "b1",
                function,
                {
                    f"{BASE}.call.kwargs.args": ["Context: cap 30,000 RMB"],
                    f"{BASE}.call.return": "30,000 RMB",
                },
            ),
        ]
    )
    assert [c.output_text for c in record.model_calls] == (["30,000 RMB"] if model else [])
    if model and function.endswith(".complete"):
        assert record.model_calls[0].input_text == "Context: cap 30,000 RMB"


def test_of_an_llm_method_around_a_generation_only_the_generation_is_the_model_call() -> None:
    # TruLens' LangChain app records FakeListLLM.invoke twice, an "unknown" span around the "generation".
    outer = _call("b1", "langchain_community.llms.fake.FakeListLLM.invoke", {f"{BASE}.call.return": "x"})
    inner = _call(
        "b2",
        "langchain_community.llms.fake.FakeListLLM.invoke",
        {f"{BASE}.call.kwargs.input": "cap?", f"{BASE}.call.return": "x"},
        span_type="generation",
        parent="00000000000000b1",
    )
    (call,) = normalize([_root(), outer, inner]).model_calls
    assert call.span_id == "00000000000000b2"


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("What is the cap?\nAnswer briefly.", "What is the cap?\nAnswer briefly."),  # a string passed as is
        ("text='Context: cap\\nQ: cap?'", "Context: cap\nQ: cap?"),  # a StringPromptValue
        ("[INST] cap? [/INST]", "[INST] cap? [/INST]"),  # a prompt may begin like a list
        ('{"question": "cap?"}', '{"question": "cap?"}'),  # JSON text is text
        ("[HumanMessage(content='cap?\\nAnswer')]", None),  # a message list's repr: escaped text
        ("[ChatMessage(role=<MessageRole.USER: 'user'>, blocks=[])]", None),  # LlamaIndex's
        ("content='cap?' additional_kwargs={}", None),  # one message
        ("{'question': 'cap?'}", None),  # a dict's repr
        ("<object.Prompt object at 0x10f0>", None),
    ],
)
def test_a_generation_input_is_a_plain_string_or_a_prompt_value_never_a_repr(
    value: str, read: str | None
) -> None:
    record = normalize([_root(), _generation({"input": value})])
    (call,) = record.model_calls
    assert (call.input_text or None) == read
    if read is None:
        assert any(g.kind == "attribute_unparseable" and "call.kwargs.input" in g.detail for g in record.gaps)


@pytest.mark.parametrize(
    ("value", "read"),
    [
        # str() of a chat model's AIMessage: its content, unescaped.
        (
            "content='It\\'s 30,000\\nRMB.' additional_kwargs={}"
            " response_metadata={'finish_reason': 'stop'} id='run-1'",
            "It's 30,000\nRMB.",
        ),
        ("content=[{'type': 'text', 'text': 'x'}] additional_kwargs={}", None),  # content blocks
        ("<generator object BaseChatModel.stream at 0x10f0>", None),  # a stream, not its output
        ("30,000 RMB", "30,000 RMB"),
    ],
)
def test_a_generation_output_is_its_text_an_ai_message_s_content_or_not_read(
    value: str, read: str | None
) -> None:
    record = normalize([_root(), _generation({"prompt": "cap?"}, output=value)])
    (call,) = record.model_calls
    assert call.output_text == read
    if read is None:
        assert not call.output_recorded
