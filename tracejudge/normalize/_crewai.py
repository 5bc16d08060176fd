"""CrewAI under openinference-instrumentation-crewai.

The crew's root span (``Crew_<id>.kickoff``, with ``crew_key`` / ``crew_id``) records as
``output.value`` the whole ``CrewOutput`` (``{"raw", "pydantic", "json_dict", "tasks_output",
"token_usage"}``): the answer the user got is its ``raw`` text, not the object. The request is the
tasks' descriptions (``crew_tasks``), with ``crew_inputs`` interpolated by CrewAI before the model
sees them. Model calls are recorded by the OpenAI client's instrumentation
(openinference-instrumentation-openai), tools as TOOL spans with ``output.value`` the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracejudge.normalize._convention import NoRecords
from tracejudge.normalize._values import REDACTED, as_str, maybe_json
from tracejudge.normalize._view import SpanView


def is_crew_root(view: SpanView) -> bool:
    return "crew_key" in view.attrs and view.raw.name.endswith(".kickoff")


class CrewAI(NoRecords):
    """CrewAI: the crew root's ``CrewOutput.raw`` is the answer; its tasks' descriptions the request."""

    name = "crewai"

    def task_input(self, root: SpanView, views: Sequence[SpanView]) -> str | None:  # noqa: ARG002
        if not is_crew_root(root):
            return None
        tasks = maybe_json(root.attrs.get("crew_tasks"))
        if not isinstance(tasks, list):
            return None
        texts = [as_str(t.get("description")) for t in tasks if isinstance(t, dict)]
        return "\n".join(t for t in texts if t) or None

    def final_answer(self, root: SpanView, views: Sequence[SpanView]) -> tuple[str, str] | None:  # noqa: ARG002
        if not is_crew_root(root):
            return None
        value = root.attrs.get("output.value")
        if value is None or value == REDACTED:
            return None
        output = maybe_json(value)
        raw = as_str(output.get("raw")) if isinstance(output, dict) else None
        return (raw, root.span_id) if raw else None


CONVENTION = CrewAI()
