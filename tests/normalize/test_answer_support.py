"""Over every recorded fixture: each model call the answer rule reads as continued (not a rival for the
answer, ``_answer.earlier_answers``) must have a recorded reply that supports it — a tool request (which
``_follows`` compares with the turn the later call re-sends) or the reply a retry repeated. A call whose reply
is not recorded at all is taken as continued when a later call re-sends its input and adds tool steps
(``_follows``: "nothing to compare"); nothing recorded says its reply was that tool request rather than an
answer.

The families read so are listed (``UNSUPPORTED``): the open part of the answer rule. Making them rivals
(``answer_uncertain``) moves their verdicts to ``unconfirmed`` and the removal property then finds losing the
rival's span gives back the definite verdict (a listed exception per case: 895b2d5 tried it on AgentOps and
OpenLLMetry's LangChain). What would support them is on other spans or attributes not read as the reply yet:
AgentOps' ``tool_call.<name>`` child span of the call (the request's id and arguments) and its
``gen_ai.completion.0.finish_reason = tool_calls``; OpenLLMetry's mistralai the same finish reason;
OpenLLMetry's LangChain the ``execute_task model`` parent's ``gen_ai.task.output`` (the AIMessage with its
tool calls); OpenLLMetry's Ollama nothing but ``gen_ai.completion.0.role``. A family that joins the list, or
leaves it, fails this test.
"""

from __future__ import annotations

from pathlib import Path

from tracejudge.normalize import normalize
from tracejudge.schema import ModelCall, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
RUNS = ("rag", "ignored", "filtered", "dropped", "never_indexed")

# fixture -> what the continued call's span records of its reply.
UNSUPPORTED = {
    **{
        f"agentops_{run}.pb": "role and finish reason (tool_calls); the request on a child span"
        for run in RUNS
    },
    **{
        f"langchain_agent_openllmetry_{run}.pb": "nothing; the request on the parent task span"
        for run in RUNS
    },
    **{f"mistral_openllmetry_objects_{run}.pb": "role and finish reason (tool_calls)" for run in RUNS},
    **{f"ollama_openllmetry_{app}_{run}.pb": "role alone" for app in ("tool", "stream") for run in RUNS},
}


def _supported(call: ModelCall, record: TaskRecord) -> bool:
    """Whether the call's recorded reply supports reading it as continued: it asked for a tool, or a later
    call repeated it (a retry)."""
    if any(message.tool_calls for message in call.output_messages):
        return True
    return call.output_text is not None and call.output_text == record.model_calls[-1].output_text


def _unsupported(record: TaskRecord) -> list[str]:
    """The calls read as continued (not among the calls that may have written the answer) without support."""
    if record.final_answer_span_id is None or not record.model_calls:
        return []
    return [
        call.span_id
        for call in record.model_calls[:-1]
        if call.span_id not in record.answering_calls and not _supported(call, record)
    ]


def test_every_call_read_as_continued_has_a_recorded_reply_that_supports_it() -> None:
    found = {}
    for path in sorted(TRACES.glob("*.pb")):
        calls = _unsupported(normalize(list(read_otlp_file(path))))
        if calls:
            found[path.name] = calls
    assert sorted(found) == sorted(UNSUPPORTED)
    # One call each: the first, whose tool request the second call re-sends.
    assert all(len(calls) == 1 for calls in found.values())
