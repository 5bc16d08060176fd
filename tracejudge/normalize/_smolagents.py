"""smolagents under openinference-instrumentation-smolagents (its spans: scope
``openinference.instrumentation.smolagents``), and BeeAI's ``RequirementAgent`` under
openinference-instrumentation-beeai (scope ``openinference.instrumentation.beeai``), which answers the same
way with ``final_answer(response=...)``.

A smolagents agent answers by calling its ``final_answer`` tool: the model call that wrote the answer
outputs only that tool call, ``final_answer(answer=...)``, and the agent's root span records the answer
as its output. That call's output *is* the answer, so it is read as the call's output text (beside the
tool call), and the call is the one whose input the clause must have reached. Tool results reach the
next model call as messages of role ``tool-response`` (``Observation:\\n...``), read by OpenInference.
"""

from __future__ import annotations

from tracejudge.normalize._convention import ModelIO, NoRecords
from tracejudge.normalize._openinference import messages
from tracejudge.normalize._values import as_str, maybe_json
from tracejudge.normalize._view import SpanView
from tracejudge.schema import Message

SCOPE = "openinference.instrumentation.smolagents"
FINAL_ANSWER = "final_answer"
# scope -> the final_answer tool's argument holding the answer
ANSWER_ARGUMENT = {SCOPE: "answer", "openinference.instrumentation.beeai": "response"}


def _answer(message: Message, argument: str) -> str | None:
    for call in message.tool_calls:
        if call.get("name") == FINAL_ANSWER:
            arguments = maybe_json(call.get("arguments"))
            answer = arguments.get(argument) if isinstance(arguments, dict) else arguments
            return as_str(answer)
    return None


class Smolagents(NoRecords):
    """smolagents: a ``final_answer`` tool call is the model's answer."""

    name = "smolagents"

    def output_messages(self, view: SpanView) -> ModelIO | None:
        argument = ANSWER_ARGUMENT.get(view.raw.scope_name)
        if argument is None:
            return None
        found = messages(view, "llm.output_messages")
        if not found or not any(m.content is None and _answer(m, argument) for m in found):
            return None
        out = [
            m.model_copy(update={"content": _answer(m, argument)})
            if m.content is None and _answer(m, argument)
            else m
            for m in found
        ]
        return ModelIO(messages=tuple(out))


CONVENTION = Smolagents()
