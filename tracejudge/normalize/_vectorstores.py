"""What OpenLLMetry's vector-store instrumentations record of a search, where it differs store by store.

Seen on real clients traced offline (tests/fixtures/traces/record_{chroma,qdrant,lancedb,milvus}.py):

- ``opentelemetry-instrumentation-qdrant`` 0.62 names a span after the client method (``qdrant.query_points``,
  ``qdrant.search`` …) with ``db.system = Qdrant`` and no ``db.operation``: the method is read from the span
  name (:func:`named_search`). It records the collection and ``db.vector.query.top_k`` only — no filter, no
  query and nothing of the points returned.
- ``opentelemetry-instrumentation-lancedb`` 0.62 wraps ``LanceTable.search``, which builds the query and
  returns before ``where``/``limit``/``to_list`` run it; it writes ``str(query)`` — the query vector or text —
  under ``db.milvus.search.filter`` (:func:`milvus_filter_text` reads that key for Milvus only;
  :func:`lancedb_query` reads a text there as the search's query, never a vector's or an object's repr).
- ``opentelemetry-instrumentation-milvus`` 0.60 records the search's ``filter`` (a Milvus boolean expression,
  :func:`milvus_filter`), its ``limit``, and one ``db.search.result`` event per hit whose ``entity`` is
  ``str()`` of the output fields (read as the document's metadata; its ``text`` as the content).
- ``opentelemetry-instrumentation-chromadb`` 0.62 records ``where`` as ``str(dict)`` and one
  ``db.query.result`` event per result with the document's text (read in ``_openllmetry.py``).
- ``opentelemetry-instrumentation-marqo`` 0.23 (seen on its own recorded test, replayed:
  tests/fixtures/outside/marqo) records the query as ``db.marqo.search.query`` (:func:`marqo_query`) and one
  ``db.query.result`` event per hit holding the hit as Marqo returns it, unprefixed: ``_id``, ``_score`` and
  the document's own fields (:func:`marqo_hit`: the fields are its metadata and, joined, its text).

Chroma's and Milvus' result events record a ``distance``, not a score, and not the metric it was measured by:
Chroma's cosine distance is nearer when lower, Milvus' COSINE "distance" is a similarity (nearer when higher),
its L2 a distance again. Which way is nearer cannot be read from the span, so a distance is not read as a
document's score (nothing orders or explains a ranking by it); the documents' order is the rank.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from typing import Any

from tracejudge.normalize._values import REDACTED, as_str
from tracejudge.normalize._view import SpanView

__all__ = ["lancedb_query", "marqo_hit", "marqo_query", "milvus_filter", "milvus_filter_text", "named_search"]

# db.system (lower-cased) -> the client methods that search, for instrumentations that record the method
# only in the span name ("<system>.<method>"). Qdrant's scroll lists points without a query: not a search.
_NAMED_SEARCHES: dict[str, frozenset[str]] = {
    "qdrant": frozenset(
        {
            "search",
            "search_batch",
            "search_groups",
            "query",
            "query_points",
            "query_batch",
            "query_batch_points",
            "query_points_groups",
            "discover",
            "discover_batch",
            "recommend",
            "recommend_batch",
            "recommend_groups",
        }
    ),
}


def named_search(view: SpanView) -> bool:
    """A vector-store span with no ``db.operation`` whose name is ``<db.system>.<a search method>``."""
    system = view.attrs.get("db.system")
    if not isinstance(system, str) or "db.operation" in view.attrs:
        return False
    methods = _NAMED_SEARCHES.get(system.lower())
    prefix, _, method = view.raw.name.partition(".")
    return methods is not None and prefix.lower() == system.lower() and method in methods


def milvus_filter_text(view: SpanView) -> str | None:
    """``db.milvus.search.filter`` of a Milvus span (LanceDB's instrumentation writes its query there)."""
    system = view.attrs.get("db.system")
    if not isinstance(system, str) or system.lower() != "milvus":
        return None
    return as_str(view.attrs.get("db.milvus.search.filter"))


# A repr that is no query text: a vector (a list's, a tuple's, numpy's "[0.  0.57 ...]", pyarrow's), an
# object's ("<PIL.Image.Image ...>") or a constructor's ("MatchQuery(query='…', column='text')").
_NUMBER = r"(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|\.\.\.)"
_VECTOR = re.compile(rf"[\s\[\](),]*(?:{_NUMBER}[\s\[\](),]*)+", re.IGNORECASE)
_OBJECT = re.compile(r"<.*>|[A-Za-z_][\w.]*\(.*\)", re.DOTALL)


def lancedb_query(view: SpanView) -> str | None:
    """The text a LanceDB search ran with: ``db.milvus.search.filter`` of a LanceDB span (the instrumentation
    writes ``str(query)`` there) when it is text; None for a vector's or an object's repr, and for any other
    span."""
    system = view.attrs.get("db.system")
    if not isinstance(system, str) or system.lower() != "lancedb":
        return None
    text = as_str(view.attrs.get("db.milvus.search.filter"))
    if not text or text == REDACTED or _VECTOR.fullmatch(text) or _OBJECT.fullmatch(text.strip()):
        return None
    return text


def _is_marqo(view: SpanView) -> bool:
    system = view.attrs.get("db.system")
    return isinstance(system, str) and system.lower() == "marqo"


def marqo_query(view: SpanView) -> str | None:
    """``db.marqo.search.query`` of a Marqo search span; None for any other span."""
    return as_str(view.attrs.get("db.marqo.search.query")) if _is_marqo(view) else None


_MARQO_ID, _MARQO_SCORE = "_id", "_score"


def marqo_hit(view: SpanView, attributes: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any]] | None:
    """A Marqo hit recorded as a result event's attributes: its ``_id``, its ``_score`` and its own fields
    (those Marqo does not add, whose names do not open with ``_``: ``_highlights``, ``_tensor_facets`` …);
    None for any other event."""
    if not _is_marqo(view) or _MARQO_ID not in attributes:
        return None
    fields = {k: v for k, v in attributes.items() if not k.startswith("_")}
    return attributes[_MARQO_ID], attributes.get(_MARQO_SCORE), fields


# --- Milvus boolean expressions -> $-operators ---------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
      | (?P<op>==|!=|>=|<=|>|<|&&|\|\||!|\(|\)|\[|\]|,)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_COMPARE = {"==": "$eq", "!=": "$ne", ">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte"}
_AND = ("and", "&&")
_OR = ("or", "||")
_NOT = ("not", "!")
_KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false"})


class _Unsupported(Exception):
    """An expression using what the replay has no equivalent for (``like``, JSON paths, arithmetic …)."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = 0
    while at < len(text.rstrip()):
        found = _TOKEN.match(text, at)
        if found is None or found.end() == at:
            raise _Unsupported(text[at:])
        kind = found.lastgroup or ""
        value = found.group(kind)
        out.append((kind, value.lower() if kind == "word" and value.lower() in _KEYWORDS else value))
        at = found.end()
    return out


class _Parser:
    """A recursive-descent reading of the expression subset a metadata filter uses: comparisons of a field
    with a literal, ``[not] in [...]``, ``and``/``or``/``not`` and parentheses."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise _Unsupported("unexpected end")
        self.at += 1
        return self.tokens[self.at - 1]

    def expect(self, value: str) -> None:
        if self.take()[1] != value:
            raise _Unsupported(value)

    def expression(self) -> Any:
        return self.joined(_OR, "$or", lambda: self.joined(_AND, "$and", self.negation))

    def joined(self, words: tuple[str, str], operator: str, part: Callable[[], Any]) -> Any:
        """Parts joined by one of ``words`` (``and``/``&&``, ``or``/``||``): one part alone, else the
        ``$and``/``$or`` of them."""
        parts = [part()]
        while self.peek() in words:
            self.take()
            parts.append(part())
        return parts[0] if len(parts) == 1 else {operator: parts}

    def negation(self) -> Any:
        if self.peek() in _NOT:
            self.take()
            return {"$not": self.negation()}
        if self.peek() == "(":
            self.take()
            inner = self.expression()
            self.expect(")")
            return inner
        return self.comparison()

    def comparison(self) -> Any:
        kind, field = self.take()
        if kind != "word" or field in _KEYWORDS:
            raise _Unsupported(field)
        operator = self.take()[1]
        if operator == "not":
            self.expect("in")
            return {field: {"$nin": self.listing()}}
        if operator == "in":
            return {field: {"$in": self.listing()}}
        if operator not in _COMPARE:
            raise _Unsupported(operator)
        return {field: {_COMPARE[operator]: self.literal()}}

    def listing(self) -> list[Any]:
        self.expect("[")
        items = [self.literal()]
        while self.peek() == ",":
            self.take()
            items.append(self.literal())
        self.expect("]")
        return items

    def literal(self) -> Any:
        kind, value = self.take()
        if kind == "string":
            return ast.literal_eval(value)
        if kind == "number":
            return float(value) if any(c in value for c in ".eE") else int(value)
        if value in ("true", "false"):
            return value == "true"
        raise _Unsupported(value)


def milvus_filter(expression: str) -> Any | None:
    """A Milvus boolean expression (``region == "CN" and year >= 2025``) as ``$``-operators, or None when it
    uses what has no equivalent here (``like``, ``json_contains``, a JSON path, arithmetic, a field compared
    with a field): such a filter stays raw text, which the replay answers "cannot tell"."""
    try:
        parser = _Parser(_tokens(expression))
        parsed = parser.expression()
    except (_Unsupported, ValueError, SyntaxError):
        return None
    return parsed if parser.at == len(parser.tokens) else None
