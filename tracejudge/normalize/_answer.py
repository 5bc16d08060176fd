"""Whether the last model call's reply is the answer, when no convention records the answer.

An application often calls the model after it has answered: a title for the conversation, follow-up
suggestions, a summary for memory, a guardrail, a grader or an eval. The last call's reply is then no
answer the user got, and a verdict read from it (``ignored_by_model`` from a judge reading a title,
``no_fault`` from a summary restating a value) would rest on the wrong text (DESIGN 5.5).

The last call's reply is read as the answer only when no earlier call of the trace may have given it. An
earlier call gave no answer when a later call continues it: the later call's recorded input re-sends every
message the earlier call was sent, in order, and adds only tool steps (assistant messages asking for tools
and the messages carrying their results) — the agent went on with the same request. Sent again with
nothing added, the later call is a retry only when the earlier returned before it was sent and either failed
(status error) or replied the same: an input asked twice that got two different replies (a self-consistency
re-ask, a reply the application rejected and asked again for) gave the application both, and which one the
user got is not recorded; calls that overlap in time are two answers to one request, either of which the user
may have got.

Anything else — an earlier reply the later calls do not continue (the last call reads the answer back, as
a title or grader prompt does, or sends other instructions), a tool request whose result no recorded call
read (the call that read it and answered is missing), a reply not recorded whose tool request the later call
re-sends is another call's recorded reply (``_follows``), an input not recorded whole, calls that overlap —
leaves the answer open: the ``answer_uncertain`` gap names the calls that may have given it, and no check
reads an answer from the trace.

Which call is last is read from the spans' times, and the retry rule above compares them too: both rest on
clocks agreeing. Spans from one process share a clock; a span recorded elsewhere (another service, a host
whose clock is off, an exporter that rewrites times) may not, and shifted by seconds or hours it can put a
draft last. The trace shows it: a span that starts before its parent starts, or ends after it ends. When such
a span lies on the tree path between a call and the last one (below the spans they share), their order is
not known, and that call may have given the answer unless the last call's input continues it by what it
re-sends (the order the messages show; not a retry, which is told by times).

A call that returned several choices (OpenAI ``n``, recorded as several output messages with text) gave
the application several replies: which one the user got is not recorded, and no reply of it is read as the
answer (``choices``).

Nor is the text of a last call that also asked for a tool (``tool_requests``): OpenAI's content beside
tool_calls, Anthropic's text block before a tool_use block, a choice asking for a tool beside one with text
(``n`` not recorded). Frameworks send such text ahead of the tool ("Let me check the cap: …"), run the tool
and call the model again with its result; that call answered, and a trace without it (an uninstrumented
client, a lost span) shows only the preamble. The reading is safe only where the tool ran inside the call:
a tool the API hosts (a Responses API ``file_search_call``, ``web_search_call``, …), whose item comes before
the text the model wrote with its result. The hosted item is told by its name (Logfire's reading drops the
``_call``: ``file_search``, told hosted only by the item type it keeps beside it): a tool request whose name
is not recorded may be any tool, and leaves the answer open.

Some instrumentations record an assistant turn's role and text but never its tool calls (OpenLLMetry's
mistralai: a turn that asked for a tool and wrote nothing is its role alone). Such a turn right before a tool
result is the request that result answers (a chat API takes a tool result only after one): it is read as a
tool request whose name, arguments and id were not recorded (``unrecorded_requests``) — a tool step, which
continues the call before it where nothing recorded contradicts it, and is the same as no other request.

Some record a reply's tool requests beside the call's output, where the rule reads them (``_replied``):
AgentOps' ``tool_call.<name>`` span under the call, the ``AIMessage`` the LangGraph node that called the
model returned (OpenLLMetry's LangChain, told the call's by its response id). A request read there is
compared with the turn the later call re-sends, as one of the output is. Others record only that the reply
asked for a tool, or wrote no text: a finish reason ``tool_calls`` beside no text (OpenLLMetry's mistralai),
a reply recorded by its role alone beside a recorded input (OpenLLMetry's Ollama, which records a reply's
content whenever it has any) — no request to compare, and no answer.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise
from typing import Any

from tracejudge.schema import Message, ModelCall

__all__ = [
    "RECORD_ANSWER",
    "SKEW_TOLERANCE_NS",
    "choices",
    "continued",
    "earlier_answers",
    "out_of_order",
    "tool_requests",
    "unrecorded_requests",
]

# What would settle which reply the user got: the application recording it where the conventions read it.
RECORD_ANSWER = (
    "the reply the user got, as the root span's output (OpenInference output.value, GenAI"
    " gen_ai.output.messages on the agent span, the Langfuse trace output)"
)
_ASSISTANT = frozenset({"assistant", "model", "ai", "bot"})
_SYSTEM = frozenset({"system", "developer"})
_TOOL = frozenset({"tool", "function", "ipython"})

# The tools OpenAI's API runs inside a call, as the Responses API names their output items (OpenInference
# records an item's type as the tool's name): the call's text comes after their results, and is its reply.
_HOSTED = frozenset(
    {
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
    }
)

# How far a span may start before its parent, or end after it, with clocks that agree. Recorded traces of
# one process show up to about 0.6 ms (an instrumentation ending a span from a callback after its parent
# returned: atomic-agents' chat span ends 0.1 ms past its parent), and Langfuse keeps times to the
# millisecond. 10 ms is well past both; the skews that reorder calls are seconds or hours.
SKEW_TOLERANCE_NS = 10_000_000

# A tool request as compared: its name, its arguments (JSON, keys sorted) and its id, None where not recorded
# — and, when neither is, a token equal to nothing else (which request it was is not known).
_Request = tuple[object, ...]
# One item of what a call was sent: a role (or "system" / "prompt"), the text, the tools it asked for.
_Item = tuple[str, str, tuple[_Request, ...]]


def earlier_answers(
    models: Sequence[ModelCall],
    times: Mapping[str, tuple[int, int]],
    unordered: Mapping[str, str] | None = None,
    failed: Collection[str] = (),
    replied: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> list[ModelCall]:
    """The model calls before the last one (in start order) that may have given the answer the user got
    instead of it: those no later call continues, and those whose order against the last one the trace's
    times cannot tell (``unordered``, from ``out_of_order``) that the last call does not continue by what it
    re-sends; empty when the last call's reply is the answer. ``times``: each span's start and end (Unix
    nanoseconds, 0 when not recorded); ``failed``: the calls whose span says they failed (status error);
    ``replied``: the tool requests of a call's reply that its output does not record but other records of
    the trace do (``_replied.replied_requests``; ``{}`` for a request whose details were not recorded)."""
    sent = _Sent(models)
    last = models[-1] if models else None
    unordered = {} if unordered is None else unordered  # asked only of a call a later one continues
    replies = _Replies(models, {} if replied is None else replied)
    sizes = [_size(call) for call in models]
    reach = _reach(models, sizes, times)
    return [
        call
        for i, call in enumerate(models[:-1])
        if not (
            _may_be_continued(sizes[i], reach[i + 1], times.get(call.span_id, (0, 0))[1])
            and any(_continues(later, call, sent, times, failed, replies) for later in models[i + 1 :])
        )
        or (
            call.span_id in unordered
            and last is not None
            and not _continues(last, call, sent, {}, (), replies)
        )
    ]


class _Sent(dict[str, "list[_Item] | None"]):
    """What each call was sent (``_items``), worked out when first compared."""

    def __init__(self, models: Sequence[ModelCall]) -> None:
        super().__init__()
        self._calls = {call.span_id: call for call in models}

    def __missing__(self, span: str) -> list[_Item] | None:
        items = self[span] = _items(self._calls[span])
        return items


# How many items ``_items`` reads of a call, and how many of them are not instructions (``_unsystem``); None
# when its input is not recorded whole.
_Size = tuple[int, int] | None
# What the calls from one on were sent at most: the most items, the most not instructions, the latest start
# (ns) — of those whose input is recorded whole.
_Reach = tuple[int, int, int]


def _size(call: ModelCall) -> _Size:
    """The call's ``_Size``, counted (no item is built)."""
    if not call.input_recorded or call.input_redacted or call.input_partial:
        return None
    messages = call.input_messages
    size = len(messages) or 1  # a completion's prompt
    instructions = len([message for message in messages if message.role.casefold() in _SYSTEM])
    return size + (1 if call.system_instructions else 0), size - instructions


def _reach(
    models: Sequence[ModelCall], sizes: Sequence[_Size], times: Mapping[str, tuple[int, int]]
) -> list[_Reach]:
    """``_Reach`` of ``models[i:]`` for each i (and of none, last); ``sizes``: each call's ``_Size``."""
    out: list[_Reach] = [(-1, -1, -1)]
    for call, size in zip(reversed(models), reversed(sizes), strict=True):
        most = out[-1]
        if size is not None:
            start = times.get(call.span_id, (0, 0))[0]
            most = (max(most[0], size[0]), max(most[1], size[1]), max(most[2], start))
        out.append(most)
    return out[::-1]


def _may_be_continued(size: _Size, later: _Reach, ended: int) -> bool:
    """False when no call ``later`` tells of can continue a call of ``size`` that ended at ``ended`` (ns; 0
    when not recorded): ``_continues`` is false for each, as a call continuing it re-sends all it was sent
    and adds to it, with or without the instructions, or re-sends it alone (a retry) after it returned.
    Calls sending one input over and over with no end time recorded (a load test's, a self-consistency
    loop's) are so not compared pair by pair."""
    if size is None:
        return False
    most, unsystemed, latest = later
    return most > size[0] or unsystemed > size[1] or (most == size[0] and 0 < ended <= latest)


def choices(call: ModelCall) -> int:
    """How many replies the call returned: its output messages with text (one per choice)."""
    return sum(1 for message in call.output_messages if message.content)


def tool_requests(call: ModelCall) -> list[str]:
    """The tools the call's reply asks the application to run, by name ("" for one whose name is not
    recorded): every tool request of its output, in any message or choice, but those of tools the API ran
    inside the call (``_HOSTED``)."""
    return [
        str(request.get("name") or "")
        for message in call.output_messages
        for request in message.tool_calls
        if not _hosted(request)
    ]


def _hosted(request: Mapping[str, Any]) -> bool:
    """Whether the request is a tool the API ran inside the call: named by its output item's type
    (OpenInference), or named without ``_call`` (as Logfire names ``file_search_call`` ``file_search``) where
    the request keeps the item's type (``type``, read from the item itself: a function tool may bear the
    name)."""
    name = request.get("name")
    if name in _HOSTED:
        return True
    kind = request.get("type")
    return kind in _HOSTED and isinstance(name, str) and f"{name}_call" == kind


def out_of_order(
    models: Sequence[ModelCall],
    parents: Mapping[str, str | None],
    times: Mapping[str, tuple[int, int]],
) -> dict[str, str]:
    """The calls (span id) whose order against the last one (in start order) rests on times the trace shows
    are skewed, each with a span outside its parent's time range on the tree path between the two.
    ``parents``: each span's parent (None for a root); ``times`` as for ``earlier_answers``."""
    if len(models) < 2:
        return {}
    skewed = {
        span for span, parent in parents.items() if parent is not None and _outside(span, parent, times)
    }
    if not skewed:
        return {}
    last = _path(models[-1].span_id, parents)
    out: dict[str, str] = {}
    for call in models[:-1]:
        mine = _path(call.span_id, parents)
        shared = set(mine).intersection(last)
        # The spans below the ones both calls share: their times order the two calls.
        between = [span for span in (*mine, *last) if span not in shared and span in skewed]
        if between:
            out[call.span_id] = between[0]
    return out


def _path(span: str, parents: Mapping[str, str | None]) -> list[str]:
    """The span and its ancestors, nearest first (a loop, which normalize cuts, ends the walk)."""
    out: list[str] = []
    seen: set[str] = set()
    current: str | None = span
    while current is not None and current not in seen:
        seen.add(current)
        out.append(current)
        current = parents.get(current)
    return out


def _outside(span: str, parent: str, times: Mapping[str, tuple[int, int]]) -> bool:
    """Whether the span starts before its parent starts or ends after it ends, past the tolerance (a time
    not recorded, 0, shows nothing)."""
    start, end = times.get(span, (0, 0))
    p_start, p_end = times.get(parent, (0, 0))
    early = start > 0 and p_start > 0 and p_start - start > SKEW_TOLERANCE_NS
    late = end > 0 and p_end > 0 and end - p_end > SKEW_TOLERANCE_NS
    return early or late


def continued(
    models: Sequence[ModelCall], answering: ModelCall, times: Mapping[str, tuple[int, int]]
) -> list[ModelCall]:
    """``answering`` and the earlier calls it continues, directly or through calls between (in start order):
    the calls whose input went on into its input. ``times`` as for ``earlier_answers``."""
    at = next(i for i, call in enumerate(models) if call is answering)
    sent = {call.span_id: _items(call) for call in models[: at + 1]}
    replies = _Replies(models[: at + 1], {})
    chain = [answering]
    for call in reversed(models[:at]):
        if any(_continues(later, call, sent, times, (), replies) for later in chain):
            chain.append(call)
    return chain[::-1]


def _continues(
    later: ModelCall,
    earlier: ModelCall,
    sent: Mapping[str, list[_Item] | None],
    times: Mapping[str, tuple[int, int]],
    failed: Collection[str],
    replies: _Replies,
) -> bool:
    """Whether ``later`` was sent all ``earlier`` was, in order, and only tool steps besides (or, when
    nothing besides, retried ``earlier``: sent after it returned, which failed or replied the same). With
    tool steps added the instructions may differ: an agent handed the run, its tool steps and all, to another
    agent."""
    was, resent = sent[earlier.span_id], sent[later.span_id]
    if was is None or resent is None:
        return False
    if _same(resent[: len(was)], was):
        added = resent[len(was) :]
        if added:
            return _tool_steps(added) and _follows(earlier, added, replies, sent)
        ended = times.get(earlier.span_id, (0, 0))[1]
        started = times.get(later.span_id, (0, 0))[0]
        return 0 < ended <= started and (earlier.span_id in failed or _same_reply(earlier, later))
    was, resent = _unsystem(was), _unsystem(resent)
    added = resent[len(was) :]
    return (
        _same(resent[: len(was)], was)
        and bool(added)
        and _tool_steps(added)
        and _follows(earlier, added, replies, sent)
    )


class _Replies:
    """The tool requests each call's reply made, as recorded: its output's, else those other records of the
    trace hold (``elsewhere``: ``earlier_answers``' ``replied``, read when first asked)."""

    def __init__(
        self, models: Sequence[ModelCall], elsewhere: Mapping[str, Sequence[Mapping[str, Any]]]
    ) -> None:
        self._models = models
        self._elsewhere = elsewhere

    def said(self, call: ModelCall) -> bool:
        """Whether a record beside the call's output says its reply asked for tools, or wrote no text."""
        return bool(self._elsewhere.get(call.span_id, ()))

    def asked(self, call: ModelCall) -> list[tuple[_Request, ...]]:
        """The requests of each choice of the call's reply whose details are recorded (empty: none are)."""
        asked = [tuple(_request(r) for r in m.tool_calls) for m in call.output_messages if m.tool_calls]
        if asked:
            return asked
        # A request recorded elsewhere by none of its details ({}) has nothing to compare.
        elsewhere = [request for request in self._elsewhere.get(call.span_id, ()) if request]
        return [tuple(_request(r) for r in elsewhere)] if elsewhere else []

    def claimed(
        self, tools: tuple[_Request, ...], earlier: ModelCall, sent: Mapping[str, list[_Item] | None]
    ) -> bool:
        """Whether another call sent what ``earlier`` was sent (``sent``: ``_items`` of each) recorded a
        reply that made these requests."""
        was = sent[earlier.span_id]
        return any(
            call.span_id != earlier.span_id
            and _gave(tools, self.asked(call))
            and (items := sent[call.span_id]) is not None
            and was is not None
            and _same(items, was)
            for call in self._models
        )


def _gave(tools: tuple[_Request, ...], asked: list[tuple[_Request, ...]]) -> bool:
    """Whether a turn asking for ``tools`` is a reply that asked for ``asked`` (per choice): the same
    requests, of one choice or of all."""
    if not asked:
        return False
    every = tuple(r for requests in asked for r in requests)
    return any(_same_requests(tools, requests) for requests in (*asked, every))


def _follows(
    earlier: ModelCall, added: list[_Item], replies: _Replies, sent: Mapping[str, list[_Item] | None]
) -> bool:
    """Whether tool steps added after ``earlier``'s input begin with its reply, where both are recorded: the
    assistant turn re-sent first asks for the tools ``earlier``'s reply asked for — the same requests (names,
    and arguments and ids where both record them), of one choice or of all. A turn asking the same tool with
    other arguments is another call's: the later call continues another conversation. The reply's requests
    are its output's, else those other records of the trace hold (``_Replies``: AgentOps' request spans under
    the call, the message the LangGraph node that called it returned).

    Nothing to compare, the re-sent turn is taken for the reply: a reply recorded only as having asked for
    tools (its finish reason; OpenLLMetry's Ollama records one with no text by its role alone), steps that
    re-send no request first (OpenLIT records the result alone), and a reply no record holds at all — unless
    another call's recorded reply is that turn. A reply no record holds is read so though nothing says it was
    a request rather than an answer: the later call re-sends the earlier's input with a request right after
    it, a turn only a reply to that input gives; when another call sent the same input recorded that reply
    (in parallel, or again after it), the earlier's reply may have been an answer, and it is a rival. Made a
    rival with no such call, it would be undone by losing its span — the trace without it reads the last
    call's reply (a definite verdict from an open one, which the removal property found on AgentOps' and
    OpenLLMetry's LangChain recordings before their requests were read here)."""
    role, _, tools = added[0]
    if role != "assistant":
        return True
    asked = replies.asked(earlier)
    if asked:
        return _gave(tools, asked)
    return replies.said(earlier) or not replies.claimed(tools, earlier, sent)


def _same_reply(earlier: ModelCall, later: ModelCall) -> bool:
    """Whether both calls' replies were recorded and are the same (text and tool requests, every choice):
    then either is the one the user got. A reply not recorded may have been another."""
    return (
        earlier.output_recorded
        and later.output_recorded
        and earlier.output_text == later.output_text
        and _same(
            [_item(m, ids=False) for m in earlier.output_messages],
            [_item(m, ids=False) for m in later.output_messages],
        )
    )


def _unsystem(items: list[_Item]) -> list[_Item]:
    return [item for item in items if item[0] not in _SYSTEM]


def _items(call: ModelCall) -> list[_Item] | None:
    """What the call was sent, item by item; None when its input was not recorded whole (not recorded,
    redacted, a message without its content, a value cut short): it cannot be told what it continues."""
    if not call.input_recorded or call.input_redacted or call.input_partial:
        return None
    items: list[_Item] = []
    if call.system_instructions:
        items.append(("system", call.system_instructions, ()))
    unrecorded = unrecorded_requests(call.input_messages)
    items.extend(
        _unrecorded_request() if i in unrecorded else _item(message)
        for i, message in enumerate(call.input_messages)
    )
    if not call.input_messages:  # a completion's prompt, recorded as text only
        items.append(("prompt", call.input_text, ()))
    return items


def unrecorded_requests(messages: Sequence[Message]) -> frozenset[int]:
    """Positions of the assistant turns recorded by role alone (no text, no tool call, nothing redacted)
    right before a tool result: tool requests whose details were not recorded (the instrumentation records
    no tool call), not turns that lost their content."""
    return frozenset(
        i
        for i, (message, after) in enumerate(pairwise(messages))
        if message.role.casefold() in _ASSISTANT
        and not message.content
        and not message.tool_calls
        and not message.redacted
        and not message.unread
        and after.role.casefold() in _TOOL
    )


def _unrecorded_request() -> _Item:
    """An assistant turn asking for a tool not recorded: a request equal to no other (``_request``)."""
    return "assistant", "", (("", object()),)


def _item(message: Message, ids: bool = True) -> _Item:
    """The message as compared; ``ids``: whether its tool requests' ids count (two replies asking the same
    are told apart by their arguments: each reply's requests get ids of their own)."""
    role = message.role.casefold()
    role = "assistant" if role in _ASSISTANT else role
    tools = tuple(_request(request, ids) for request in message.tool_calls)
    # Texts compare as recorded: a call re-sending a message, recorded by the same instrumentation, records
    # it alike (and comparing refers to the strings the records hold, copying none).
    return role, message.content or "", tools


def _same(items: Sequence[_Item], others: Sequence[_Item]) -> bool:
    """Whether the items are the same, one by one (``_same_requests`` for their tool requests)."""
    if items == others:  # most: equal as they stand (a request recorded with nothing to compare never is)
        return True
    return len(items) == len(others) and all(
        item == other or (item[:2] == other[:2] and _same_requests(item[2], other[2]))
        for item, other in zip(items, others, strict=True)
    )


def _same_requests(requests: tuple[_Request, ...], others: tuple[_Request, ...]) -> bool:
    """Whether two turns' tool requests are the same, one by one: of one name, and their arguments and ids
    agree where both record them, one of the two at least (a name alone does not tell two requests apart)."""
    return len(requests) == len(others) and all(
        a[0] == b[0]
        and len(a) == len(b) == 3
        and ((a[1] is not None and b[1] is not None) or (a[2] is not None and b[2] is not None))
        and (a[1] is None or b[1] is None or a[1] == b[1])
        and (a[2] is None or b[2] is None or a[2] == b[2])
        for a, b in zip(requests, others, strict=True)
    )


def _request(request: Mapping[str, Any], ids: bool = True) -> _Request:
    """The tool request as compared (``_Request``): two requests of one name are the same only when what is
    recorded of both — arguments, ids — agrees and something is (names alone do not tell two calls apart)."""
    name = str(request.get("name") or "")
    arguments = request.get("arguments")
    args = (
        None if arguments is None or arguments == "" else json.dumps(arguments, sort_keys=True, default=str)
    )
    ident = (str(request.get("id") or "") or None) if ids else None
    if args is None and ident is None:
        return (name, object())
    return (name, args, ident)


def _tool_steps(added: list[_Item]) -> bool:
    """Whether the items are tool steps only: assistant messages asking for tools and the messages carrying
    tool results (a ``tool`` message — OpenLIT records it without the request before it —, or a user
    message after a request, as pydantic-ai and smolagents send results) — never an assistant reply
    without a tool request, nor instructions or a user message before any request."""
    asked = False
    for role, _, tools in added:
        if role == "assistant":
            if not tools:
                return False
            asked = True
        elif role not in _TOOL and (not asked or role in _SYSTEM or role == "prompt"):
            return False
    return True
