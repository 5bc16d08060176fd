"""What normalize reads from a search under OpenLLMetry's vector-store instrumentations, recorded offline over
real in-process clients (tests/fixtures/traces/record_{chroma,milvus,qdrant,lancedb}.py, the app of
_vectorstore.py): Chroma's ``EphemeralClient``, Milvus Lite, Qdrant's ``:memory:`` mode, an embedded LanceDB.

Each run is a ``procurement_rag.workflow`` (traceloop-sdk's decorator attributes) around a ``retrieve.task``
(its input the query, its output the texts returned) around the store's own span, then ``openai.chat``. Chroma
and Milvus record what the search returned (ids, metadata, text) and its filter; Qdrant and LanceDB record
neither: their retrieval's documents are the task's output, and without that task nothing says what came back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracejudge.localize._filter import evaluate_filter
from tracejudge.normalize import normalize
from tracejudge.normalize._hints import producer
from tracejudge.normalize._vectorstores import milvus_filter
from tracejudge.schema import RawSpan, RetrievalCall, TaskRecord
from tracejudge_collectors.otel import read_otlp_file

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
QUERY = "prepayment per order"
V1 = (
    "Contract C-17 with supplier Hengda, attachment v1 (2025). "
    "Prepayment shall not exceed 50,000 RMB per order."
)
V2 = "Attachment v2, effective 2026-03-01, replaces v1. Prepayment shall not exceed 30,000 RMB per order."
C09 = "Framework agreement C-09 with Lianfa: deliveries are due within ten days."
# run -> the texts returned, in rank order: v2 then v1; with the filter region == CN, v1 then C-09
RETURNED = {"rag": [V2, V1], "filtered": [V1, C09], "never_indexed": [V1, C09]}
# store -> (its span, top_k recorded, the filter of the filtered run as recorded and as read)
STORES: dict[str, tuple[str, int | None, tuple[str, Any] | None]] = {
    "chroma": ("chroma.query", 2, ("{'region': 'CN'}", {"region": "CN"})),
    "milvus": ("milvus.search", 2, ('region == "CN"', {"region": {"$eq": "CN"}})),
    "qdrant": ("qdrant.query_points", 2, None),
    "lancedb": ("lancedb.search", None, None),
    # The same store searched by the query's text (record_lancedb.py --text).
    "lancedb_text": ("lancedb.search", None, None),
}
# store -> the retriever's id of each returned document, where the store's span records them
CHUNK_IDS = {
    "chroma": {V1: "chunk-041", V2: "chunk-042", C09: "chunk-044"},
    "milvus": {V1: "chunk-041", V2: "chunk-042", C09: "chunk-044"},
}


def spans_of(store: str, run: str) -> list[RawSpan]:
    return list(read_otlp_file(TRACES / f"{store}_{run}.pb"))


def without_task(spans: list[RawSpan]) -> list[RawSpan]:
    """The trace of the same app without traceloop's @task on its retrieve function: the store's span
    directly under the workflow."""
    (task,) = [s for s in spans if s.name == "retrieve.task"]
    return [
        s.model_copy(update={"parent_span_id": task.parent_span_id})
        if s.parent_span_id == task.span_id
        else s
        for s in spans
        if s is not task
    ]


def the_retrieval(record: TaskRecord) -> RetrievalCall:
    (call,) = record.retrievals
    return call


@pytest.mark.parametrize("run", list(RETURNED))
@pytest.mark.parametrize("store", list(STORES))
def test_the_search_is_one_retrieval_with_its_query_top_k_and_documents(store: str, run: str) -> None:
    name, top_k, _ = STORES[store]
    record = normalize(spans_of(store, run))
    call = the_retrieval(record)
    assert (call.name, call.query, call.top_k, call.documents_recorded) == (name, QUERY, top_k, True)
    assert [d.content for d in call.documents] == RETURNED[run]
    ids = CHUNK_IDS.get(store)
    if ids is not None:  # the store's own record: ids and metadata
        assert [d.raw_id for d in call.documents] == [ids[text] for text in RETURNED[run]]
        assert all(d.doc_id is not None and d.metadata["region"] for d in call.documents)
    else:  # the task's output: the texts alone
        assert all(d.raw_id is None and d.doc_id is None for d in call.documents)
    assert not [g for g in record.gaps if g.kind.startswith("retrieval")]


@pytest.mark.parametrize("store", list(STORES))
def test_the_filter_is_read_where_the_store_records_it(store: str) -> None:
    _, _, recorded = STORES[store]
    call = the_retrieval(normalize(spans_of(store, "filtered")))
    if recorded is None:
        assert (call.filter, call.filter_raw) == (None, None)
    else:
        assert (call.filter_raw, call.filter) == recorded
    # Without a filter nothing is recorded, so the run without one reads no filter either.
    assert the_retrieval(normalize(spans_of(store, "rag"))).filter_raw is None


def test_lancedb_writes_its_query_vector_where_milvus_writes_a_filter_and_it_is_not_read_as_one() -> None:
    spans = spans_of("lancedb", "filtered")
    (search,) = [s for s in spans if s.name == "lancedb.search"]
    vector = search.attributes["db.milvus.search.filter"]
    assert isinstance(vector, str)
    assert vector.startswith("[0.0, ")
    call = the_retrieval(normalize(spans))
    assert (call.filter, call.filter_raw) == (None, None)


@pytest.mark.parametrize("run", list(RETURNED))
def test_lancedb_writes_a_text_query_where_milvus_writes_a_filter_and_it_is_read_as_the_query(
    run: str,
) -> None:
    # Searched by text, LanceDB's span holds the text under db.milvus.search.filter: the search's query, which
    # the store's span alone now gives (it was the task's input only). A vector there is no query.
    spans = without_task(spans_of("lancedb_text", run))
    (search,) = [s for s in spans if s.name == "lancedb.search"]
    assert search.attributes["db.milvus.search.filter"] == QUERY
    call = the_retrieval(normalize(spans))
    assert (call.query, call.filter, call.filter_raw) == (QUERY, None, None)
    assert the_retrieval(normalize(without_task(spans_of("lancedb", run)))).query is None


@pytest.mark.parametrize("store", ["chroma", "milvus"])
def test_a_distance_is_not_read_as_a_score(store: str) -> None:
    # Chroma's and Milvus' result events record a distance and not its metric: Chroma's cosine distance is
    # nearer when lower, Milvus' COSINE one a similarity (nearer when higher). Read as a score it would say
    # the wrong document ranked higher half the time: no document has one, the order is the rank.
    spans = spans_of(store, "rag")
    distances = [k for s in spans for e in s.events for k in e.attributes if k.endswith(".distance")]
    assert len(distances) == len(RETURNED["rag"])
    call = the_retrieval(normalize(spans))
    assert [(d.position, d.score) for d in call.documents] == [(0, None), (1, None)]


@pytest.mark.parametrize("store", ["qdrant", "lancedb"])
def test_a_store_that_records_no_result_says_so_and_what_records_it(store: str) -> None:
    spans = without_task(spans_of(store, "rag"))
    assert {producer(s) for s in spans if s.name == STORES[store][0]} == {store}
    record = normalize(spans)
    call = the_retrieval(record)
    assert (call.documents, call.documents_recorded, call.query) == ((), False, None)
    (gap,) = [g for g in record.gaps if g.kind == "retrieval_documents_not_recorded"]
    assert gap.span_id == call.span_id
    assert f"opentelemetry-instrumentation-{store}" in gap.switch
    assert "traceloop.entity.output" in gap.switch
    assert "tracejudge.retrieval.filter" in gap.switch
    # Not the content switch: TRACELOOP_TRACE_CONTENT was on; the instrumentation records no result anyway.
    assert "TRACELOOP_TRACE_CONTENT" not in gap.detail


@pytest.mark.parametrize("store", ["chroma", "milvus"])
def test_a_store_that_records_its_results_needs_no_task(store: str) -> None:
    call = the_retrieval(normalize(without_task(spans_of(store, "rag"))))
    assert [d.content for d in call.documents] == RETURNED["rag"]
    assert [(d.doc_id, d.version) for d in call.documents] == [
        ("C-17/attachment", "v2"),
        ("C-17/attachment", "v1"),
    ]
    assert call.documents_recorded
    assert call.query is None  # the query text was the task's


def test_qdrant_scroll_lists_points_and_is_no_search() -> None:
    spans = spans_of("qdrant", "rag")
    (search,) = [s for s in spans if s.name == "qdrant.query_points"]
    scroll = search.model_copy(update={"name": "qdrant.scroll"})
    record = normalize([scroll if s is search else s for s in spans])
    assert [c.name for c in record.retrievals] == []


# --- Milvus boolean expressions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "read"),
    [
        ('region == "CN"', {"region": {"$eq": "CN"}}),
        ("region == 'CN'", {"region": {"$eq": "CN"}}),
        ('region != "EU" AND year >= 2025', {"$and": [{"region": {"$ne": "EU"}}, {"year": {"$gte": 2025}}]}),
        (
            'region in ["CN", "EU"] || score < 0.5',
            {"$or": [{"region": {"$in": ["CN", "EU"]}}, {"score": {"$lt": 0.5}}]},
        ),
        ('version not in ["v1"]', {"version": {"$nin": ["v1"]}}),
        ("not (draft == true)", {"$not": {"draft": {"$eq": True}}}),
        (
            "a == 1 and (b == 2 or !(c > -3.5e1))",
            {"$and": [{"a": {"$eq": 1}}, {"$or": [{"b": {"$eq": 2}}, {"$not": {"c": {"$gt": -35.0}}}]}]},
        ),
    ],
)
def test_a_milvus_expression_reads_as_operators(expression: str, read: Any) -> None:
    assert milvus_filter(expression) == read


@pytest.mark.parametrize(
    "expression",
    [
        'title like "Contract%"',  # no equivalent in the replay
        'json_contains(tags, "cn")',
        'meta["region"] == "CN"',  # a JSON path: the manifest's metadata has no such key
        "price * 2 > 10",
        "a == b",  # a field compared with a field
        'region == "CN" and',
        '(region == "CN"',
        "",
        'region == "CN")',
    ],
)
def test_a_milvus_expression_the_replay_cannot_follow_is_kept_as_text_only(expression: str) -> None:
    assert milvus_filter(expression) is None


# each field with values of its own type (Milvus refuses a string field compared with a number)
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "region": st.sampled_from(["CN", "EU", 'a "quoted" one']),
    "version": st.sampled_from(["v1", "v2"]),
    "year": st.integers(2020, 2030),
}


def _leaf() -> st.SearchStrategy[tuple[str, Any]]:
    def comparisons(field: str) -> st.SearchStrategy[tuple[str, str, Any]]:
        values = _FIELDS[field]
        compare = st.tuples(st.just(field), st.sampled_from(["==", "!=", ">", ">=", "<", "<="]), values)
        listed = st.tuples(
            st.just(field), st.sampled_from(["in", "not in"]), st.lists(values, min_size=1, max_size=3)
        )
        return st.one_of(compare, listed)

    return (
        st.sampled_from(list(_FIELDS))
        .flatmap(comparisons)
        .map(lambda t: (f"{t[0]} {t[1]} {_literal(t[2])}", t))
    )


def _literal(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return '"' + value.replace('"', '\\"') + '"' if isinstance(value, str) else str(value)


def _holds(node: Any, metadata: dict[str, Any]) -> bool:
    """What Milvus answers for an expression tree over a document's fields (every field present)."""
    kind = node[0]
    if kind in ("and", "or"):
        parts = [_holds(n, metadata) for n in node[1]]
        return all(parts) if kind == "and" else any(parts)
    if kind == "not":
        return not _holds(node[1], metadata)
    field, op, value = node
    actual = metadata[field]
    if op in ("in", "not in"):
        return (actual in value) == (op == "in")
    if op in ("==", "!="):
        return (actual == value) == (op == "==")
    return {">": actual > value, ">=": actual >= value, "<": actual < value, "<=": actual <= value}[op]


def _expressions() -> st.SearchStrategy[tuple[str, Any]]:
    def extend(inner: st.SearchStrategy[tuple[str, Any]]) -> st.SearchStrategy[tuple[str, Any]]:
        joined = st.tuples(
            st.sampled_from(["and", "or", "&&", "||"]), st.lists(inner, min_size=2, max_size=3)
        ).map(
            lambda t: (
                "(" + f" {t[0]} ".join(text for text, _ in t[1]) + ")",
                ("and" if t[0] in ("and", "&&") else "or", [tree for _, tree in t[1]]),
            )
        )
        negated = inner.map(lambda t: (f"not ({t[0]})", ("not", t[1])))
        return st.one_of(joined, negated)

    return st.recursive(_leaf(), extend, max_leaves=6)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    expression=_expressions(),
    metadata=st.fixed_dictionaries(
        {
            "region": st.sampled_from(["CN", "EU"]),
            "version": st.sampled_from(["v1", "v2"]),
            "year": st.integers(2020, 2030),
        }
    ),
)
def test_a_translated_expression_passes_the_documents_milvus_passes(
    expression: tuple[str, Any], metadata: dict[str, Any]
) -> None:
    text, tree = expression
    assert evaluate_filter(milvus_filter(text), metadata) is _holds(tree, metadata)


def test_langchain_over_chroma_is_one_retrieval_and_the_filter_is_chromas() -> None:
    spans = spans_of("langchain_chroma", "filtered")
    call = the_retrieval(normalize(spans))
    names = {s.span_id: s.name for s in spans}
    assert [names[i] for i in call.span_ids] == ["vector_db_retrieve VectorStoreRetriever", "chroma.query"]
    assert (call.query, call.top_k, call.filter) == (QUERY, 2, {"region": "CN"})
    assert [(d.raw_id, d.doc_id, d.version, d.content) for d in call.documents] == [
        ("chunk-041", "C-17/attachment", "v1", V1),
        ("chunk-044", "C-09/framework", "v1", C09),
    ]
    # LangChain's span alone (the Chroma instrumentation not installed): the documents, no filter, no ids.
    alone = the_retrieval(
        normalize([s for s in spans if s.scope_name != "opentelemetry.instrumentation.chromadb"])
    )
    assert (alone.filter, alone.top_k) == (None, None)
    assert [(d.raw_id, d.doc_id, d.content) for d in alone.documents] == [
        (None, "C-17/attachment", V1),
        (None, "C-09/framework", C09),
    ]


@pytest.mark.parametrize("run", list(RETURNED))
def test_llamaindex_over_qdrant_is_one_retrieval_with_the_retrievers_nodes(run: str) -> None:
    spans = spans_of("llamaindex_qdrant", run)
    record = normalize(spans)
    call = the_retrieval(record)
    names = {s.span_id: s.name for s in spans}
    assert "qdrant.query_points" in [
        names[i] for i in call.span_ids
    ]  # inside the retriever: no call of its own
    assert (call.query, call.top_k, call.filter, call.documents_recorded) == (QUERY, 2, None, True)
    assert [d.content for d in call.documents] == RETURNED[run]
    assert all(d.doc_id is not None and d.version is not None for d in call.documents)
    assert not [g for g in record.gaps if g.kind.startswith("retrieval")]
