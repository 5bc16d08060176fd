"""What normalize reads from agent frameworks' own tracing: Google ADK 1.x (``gcp.vertex.agent.*``; ADK 2
writes OTel GenAI), Strands (content blocks in span events), Semantic Kernel (messages as OTLP log
records), CrewAI (the crew root's ``CrewOutput``) and AutoGen (a tool span without its result).

Fixtures: tests/fixtures/traces/{adk,adk_legacy,strands,semantic_kernel,crewai,autogen,autogen_openinference}_
{rag,ignored,filtered,dropped}.pb
(Semantic Kernel: .json, spans and log records), re-recorded with record_<framework>.py (side venvs;
see each docstring).
Every app is the one of _policy.py: one ``search_documents`` tool over the policy corpus, v2 then v1 for
the question (filtered: v1 and an unrelated agreement), the model asked for the search, then answering.

Before this round each of them read as model calls without input or output (ADK, Semantic Kernel), or
without output and with empty tool results (Strands), or with the ``CrewOutput`` JSON as the answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracejudge.normalize import normalize
from tracejudge.normalize._agno import function_result
from tracejudge.schema import RawSpan, TaskRecord
from tracejudge.store import open_store
from tracejudge_collectors.otel import iter_otlp_file, read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWERS = {"rag": RIGHT, "ignored": STALE, "filtered": STALE, "dropped": STALE}
# the search result's first document per run: v2 ranks first; the filter leaves v1 first; the budget
# of the dropped run orders by id and version (v1, then v2 cut before its clause)
FIRST = {"rag": "v2", "ignored": "v2", "filtered": "v1", "dropped": "v1"}
TOOLS = {"semantic_kernel": "Contracts-search_documents"}


def spans_of(name: str, tmp_path: Path) -> list[RawSpan]:
    """The trace's spans; a Semantic Kernel file's log records merged into them by a real store (as
    ``tracejudge collect file`` stores them)."""
    path = TRACES / f"{name}.pb"
    if path.exists():
        return list(read_otlp_file(path))
    results = list(iter_otlp_file(TRACES / f"{name}.json"))
    spans = [s for r in results for s in r.spans]
    events = [e for r in results for e in r.log_events]
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.put_spans(spans)
    assert store.put_log_events(events) == len(events) > 0
    return store.get_spans(spans[0].trace_id)


def load(framework: str, run: str, tmp_path: Path) -> TaskRecord:
    return normalize(spans_of(f"{framework}_{run}", tmp_path))


@pytest.mark.parametrize(
    "framework",
    [
        "adk",
        "strands",
        "semantic_kernel",
        "crewai",
        "autogen_openinference",
        "agno_openinference",
        "agno_openllmetry",
        "agent_framework",
    ],
)
@pytest.mark.parametrize("run", list(ANSWERS))
def test_model_calls_tool_result_and_answer(framework: str, run: str, tmp_path: Path) -> None:
    record = load(framework, run, tmp_path)
    assert record.final_answer == ANSWERS[run]
    assert QUESTION in (record.input or "")
    first, last = record.model_calls[0], record.model_calls[-1]
    assert QUESTION in first.input_text
    # the first call asks for the search (an output of tool calls only), the last answers
    assert [c["name"] for m in first.output_messages for c in m.tool_calls] == [
        TOOLS.get(framework, "search_documents")
    ]
    assert first.output_recorded
    assert last.output_text == ANSWERS[run]
    # the tool's result reached the last model call: v1's clause always, v2's only without a fault
    assert CLAUSE_V1 in last.input_text
    assert (CLAUSE_V2 in last.input_text) == (run in ("rag", "ignored"))
    # the tool call holds the documents the search returned, with their ids and text
    [tool] = record.tool_calls
    assert tool.name == TOOLS.get(framework, "search_documents")
    assert tool.call_id
    assert tool.arguments["query"] == "prepayment per order"
    result = tool.result["documents"] if isinstance(tool.result, dict) else tool.result
    assert (result[0]["doc_id"], result[0]["version"]) == ("C-17/attachment", FIRST[run])
    assert all(d["content"] for d in result)


@pytest.mark.parametrize("run", list(ANSWERS))
def test_autogen_own_tracing_records_no_tool_result(run: str, tmp_path: Path) -> None:
    # AutoGen's execute_tool span has the tool's name and call id only: the documents are in the
    # trace only as the model input's tool message, which is not read as what the tool returned (a
    # framework may cut or rewrite a result on its way to the model).
    record = load("autogen", run, tmp_path)
    [tool] = record.tool_calls
    assert (tool.name, tool.arguments, tool.result) == ("search_documents", None, None)
    assert CLAUSE_V1 in record.model_calls[-1].input_text
    assert record.final_answer == ANSWERS[run]


def test_adk_1_reads_gemini_contents_with_the_function_response_as_a_tool_message(tmp_path: Path) -> None:
    record = load("adk_legacy", "rag", tmp_path)
    last = record.model_calls[-1]
    assert [m.role for m in last.input_messages] == ["system", "user", "assistant", "tool"]
    assert last.input_messages[2].tool_calls[0]["arguments"] == {"query": "prepayment per order"}
    assert CLAUSE_V2 in (last.input_messages[3].content or "")


def test_strands_tool_result_blocks_reach_the_model_input(tmp_path: Path) -> None:
    record = load("strands", "rag", tmp_path)
    last = record.model_calls[-1]
    assert [m.role for m in last.input_messages] == ["system", "user", "assistant", "tool"]
    assert last.input_messages[2].tool_calls[0]["name"] == "search_documents"
    assert CLAUSE_V2 in (last.input_messages[3].content or "")


def test_semantic_kernel_without_its_log_records_records_no_messages() -> None:
    # The spans alone (the log records not collected): the model input is missing, not empty.
    [trace_request, _] = iter_otlp_file(TRACES / "semantic_kernel_rag.json")
    record = normalize(trace_request.spans)
    assert not any(m.input_recorded for m in record.model_calls)
    assert {g.kind for g in record.gaps} >= {"model_input_not_recorded", "model_output_not_recorded"}


def test_crewai_answer_is_the_crew_outputs_raw_text(tmp_path: Path) -> None:
    record = load("crewai", "rag", tmp_path)
    root = next(s for s in record.spans if s.parent_span_id is None)
    assert root.name.endswith(".kickoff")
    assert (record.final_answer, record.final_answer_span_id) == (RIGHT, root.span_id)


@pytest.mark.parametrize("mode", ["otel", "otel_nospan", "openinference"])
def test_litellm_model_call_under_every_recording(mode: str, tmp_path: Path) -> None:
    # otel_nospan: LiteLLM's otel callback inside the app's span without USE_OTEL_LITELLM_REQUEST_SPAN
    # exports only raw_gen_ai_request, the provider's request and response as Python reprs.
    record = load(f"litellm_{mode}", "rag", tmp_path)
    [call] = record.model_calls
    assert CLAUSE_V1 in call.input_text
    assert CLAUSE_V2 in call.input_text
    assert [m.role for m in call.input_messages] == ["system", "user"]
    assert call.output_text == RIGHT == record.final_answer
    if mode != "openinference":
        # with the request span, raw_gen_ai_request is below litellm_request: the innermost is read
        assert {n.span_id: n.name for n in record.spans}[call.span_id] == "raw_gen_ai_request"
    # the app's GenAI retrieval span: chunk ids and scores, no text (the manifest's ids identify them)
    [retrieval] = record.retrievals
    assert [d.raw_id for d in retrieval.documents] == ["chunk-042", "chunk-041"]


def test_crewai_without_the_openai_instrumentation_names_it(tmp_path: Path) -> None:
    spans = [
        s for s in spans_of("crewai_rag", tmp_path) if s.scope_name == "openinference.instrumentation.crewai"
    ]
    [gap] = [g for g in normalize(spans).gaps if g.kind == "no_model_span"]
    assert "openinference-instrumentation-openai" in gap.detail


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("status='success' result='[1]' error=None", "[1]"),
        (
            "status='success' result=[{'doc_id': 'a=b', 'n': (1, 2)}] error=None images=None",
            [{"doc_id": "a=b", "n": (1, 2)}],
        ),
        ("status='success' result=\"it's\\nfine\" error=None", "it's\nfine"),
        ("status='success' result='last'", "last"),
        ("status='failure' result=None error='index unavailable'", None),
        ("status='success' result=Document(id='x') error=None", None),
        ("status='success' result='unterminated", None),
        ("[1, 2]", None),
    ],
)
def test_agno_openllmetry_tool_output_is_the_result_of_a_function_execution_result(
    text: str, result: object
) -> None:
    # OpenLLMetry's Agno tool span records str(FunctionExecutionResult): the tool's own return value is
    # its ``result`` field, a Python literal; a failure, or a result that is no literal, gives nothing.
    assert function_result(text) == result
