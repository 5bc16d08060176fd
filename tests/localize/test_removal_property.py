"""Removing records never makes a verdict more definite in another direction (DESIGN 5.5).

Over every recorded trace in the repository — the fixtures of tests/fixtures/traces (under no
manifest and the manifests their tests use), the procurement example's scenarios with their
tickets and manifest, and the DSPy-shaped traces of test_identification — take one record away (a
span, an attribute, an event: log records reach a trace as span events) and triage again: the
verdict stays or becomes ``unconfirmed``. The few removals that leave a trace indistinguishable
from a real fault are listed in ``INDISTINGUISHABLE`` with the reason.

``make test`` draws a bounded number of removals (``TRACEJUDGE_REMOVAL_EXAMPLES``, default 1000);
``python tests/localize/test_removal_property.py`` tries every single removal and prints violations.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.localize import conftest as mk
from tracejudge._demo import load_example
from tracejudge.localize import load_manifest, load_ticket, localize
from tracejudge.normalize import normalize
from tracejudge.schema import ManifestEntry, RawSpan, Ticket
from tracejudge.store import open_store
from tracejudge.testing.openai_server import ScriptedOpenAIServer
from tracejudge_collectors.otel import decode_protobuf, iter_otlp_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "procurement"
EXAMPLES = int(os.environ.get("TRACEJUDGE_REMOVAL_EXAMPLES", "1000"))

_MANIFEST_DOCUMENTS = (
    "the manifest given puts v2 in a region the recorded filter excludes, and only the recorded"
    " documents showed it was returned anyway (the manifest is wrong for this trace): without them"
    " the trace is a filter fault whose retrieval did not record its documents"
)
# (case, removed record) -> why the trace without it is indistinguishable from a real fault.
INDISTINGUISHABLE: dict[tuple[str, str], str] = {
    ("langchain_openllmetry_rag.pb", "attr ChatOpenAI.chat:gen_ai.system_instructions"): (
        "the retrieved context was sent as the system instructions: a chat without them is a chat"
        " whose application sent no context at all, which is a real drop"
    ),
    ("langchain_openllmetry_rag.pb@CN", "attr ChatOpenAI.chat:gen_ai.system_instructions"): "as above",
    ("langchain_openllmetry_rag.pb@EU", "attr ChatOpenAI.chat:gen_ai.system_instructions"): "as above",
    ("genai_agent.json@EU", "attr retrieval contracts-index:gen_ai.retrieval.documents"): _MANIFEST_DOCUMENTS,
    ("langfuse_sdk.pb@EU", "attr contract-retriever:langfuse.observation.output"): _MANIFEST_DOCUMENTS,
    ("openinference_rag.pb@CN", "attr retrieve:tracejudge.retrieval.candidates"): (
        "the recorded candidates say the filter excluded the material while the manifest says the"
        " filter admits it; without the candidates the records consistently show a ranking cut"
    ),
}


@dataclass(frozen=True)
class Case:
    name: str
    spans: tuple[RawSpan, ...]
    ticket: Ticket
    manifest: tuple[ManifestEntry, ...] | None


@dataclass(frozen=True)
class Removal:
    kind: Literal["span", "attr", "event"]
    span: int
    key: str | int = ""

    def label(self, case: Case) -> str:
        span = case.spans[self.span]
        if self.kind == "span":
            return f"span {span.name}"
        if self.kind == "attr":
            return f"attr {span.name}:{self.key}"
        assert isinstance(self.key, int)
        return f"event {span.name}:{span.events[self.key].name}"

    def apply(self, case: Case) -> list[RawSpan]:
        spans = list(case.spans)
        span = spans[self.span]
        if self.kind == "span":
            del spans[self.span]
        elif self.kind == "attr":
            attrs = {k: v for k, v in span.attributes.items() if k != self.key}
            spans[self.span] = span.model_copy(update={"attributes": attrs})
        else:
            events = [e for i, e in enumerate(span.events) if i != self.key]
            spans[self.span] = span.model_copy(update={"events": events})
        return spans


def _recorded() -> list[Path]:
    """The recorded traces (an OTLP/JSON file may hold a log request beside the trace request)."""
    return sorted(p for p in mk.RECORDED.iterdir() if p.suffix in (".pb", ".json"))


def _spans(path: Path) -> tuple[RawSpan, ...]:
    """A recorded trace's spans, its log records merged in by a real store (as ``collect file`` does)."""
    results = list(iter_otlp_file(path))
    spans = [s for r in results for s in r.spans]
    events = [e for r in results for e in r.log_events]
    if not events:
        return tuple(spans)
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{Path(folder) / 'store.db'}")
        try:
            store.put_spans(spans)
            store.put_log_events(events)
            return tuple(store.get_spans(spans[0].trace_id))
        finally:
            store.close()


def _fixture_cases() -> Iterator[Case]:
    manifests = {"": None, "@CN": mk.recorded_manifest("CN"), "@EU": mk.recorded_manifest("EU")}
    for path in _recorded():
        spans = _spans(path)
        for suffix, entries in manifests.items():
            yield Case(path.name + suffix, spans, mk.ticket(), None if entries is None else tuple(entries))


def _procurement_cases() -> Iterator[Case]:
    example = load_example(EXAMPLE)
    manifest = tuple(load_manifest(EXAMPLE / "manifest.jsonl"))
    with ScriptedOpenAIServer(example.model_rules()) as model:
        for scenario in example.load_scenarios(EXAMPLE):
            exporter = InMemorySpanExporter()
            example.run_scenarios([scenario], openai_base_url=model.base_url, exporter=exporter, base=EXAMPLE)
            encoded = encode_spans(exporter.get_finished_spans()).SerializeToString()
            spans = tuple(decode_protobuf(encoded).spans)
            yield Case(f"procurement/{scenario.name}", spans, load_ticket(scenario.ticket_path), manifest)


def _dspy_cases() -> Iterator[Case]:
    from tests.localize import test_identification as ident

    outer = [{"content": mk.V2_TEXT}, {"content": ident.OTHER_TEXT}]
    inner = [
        {"id": "C-17/attachment@v2", "content": mk.V2_TEXT, "score": 23.1},
        {"id": "C-12/contract@v1", "content": ident.OTHER_TEXT, "score": 11.4},
    ]
    for name, manifest in (("ids", ident.manifest(mk)), ("content", ident.manifest(mk, content=mk.V2_TEXT))):
        record_spans = ident.dspy_spans(mk, outer=outer, inner=inner if name == "ids" else None)
        yield Case(f"dspy/{name}", tuple(record_spans), mk.ticket(), tuple(manifest))


@functools.cache
def corpus() -> tuple[Case, ...]:
    return (*_fixture_cases(), *_procurement_cases(), *_dspy_cases())


def verdict(case: Case, spans: list[RawSpan]) -> str:
    loc = localize(normalize(spans), case.ticket, case.manifest)
    return loc.verdict + (f" ({loc.cause})" if loc.cause else "")


@functools.cache
def baseline(index: int) -> str:
    case = corpus()[index]
    return verdict(case, list(case.spans))


def removals(case: Case) -> list[Removal]:
    out: list[Removal] = []
    if len(case.spans) > 1:  # a trace with no span is no trace
        out.extend(Removal("span", i) for i in range(len(case.spans)))
    for i, span in enumerate(case.spans):
        out.extend(Removal("attr", i, key) for key in span.attributes)
        out.extend(Removal("event", i, j) for j in range(len(span.events)))
    return out


def violation(index: int, removal: Removal) -> str | None:
    """None when the removal keeps the property (or is listed); else what went wrong."""
    case = corpus()[index]
    before = baseline(index)
    after = verdict(case, removal.apply(case))
    if after in (before, "unconfirmed"):
        return None
    label = removal.label(case)
    if (case.name, label) in INDISTINGUISHABLE:
        return None
    return f"{case.name}: {before} -> {after} after removing {label}"


def test_the_corpus_covers_every_recorded_trace_and_the_example() -> None:
    names = {case.name for case in corpus()}
    recorded = {p.name for p in _recorded()}
    assert recorded <= names
    assert sum(name.startswith("procurement/") for name in names) == len(
        list((EXAMPLE / "tickets").iterdir())
    )
    # The baselines are the verdicts the example's scenarios promise.
    assert baseline(next(i for i, c in enumerate(corpus()) if c.name == "procurement/ranked-out")) == (
        "not_retrieved (rank)"
    )


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_removing_a_record_leaves_the_verdict_or_makes_it_unconfirmed(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(corpus()) - 1), label="case")
    options = removals(corpus()[index])
    removal = data.draw(st.sampled_from(options), label="removal")
    assert violation(index, removal) is None


@pytest.mark.parametrize(("case_name", "label"), list(INDISTINGUISHABLE))
def test_each_listed_exception_is_still_a_change_of_verdict(case_name: str, label: str) -> None:
    # A listed removal that no longer changes the verdict must leave the list: it stays short.
    index = next(i for i, c in enumerate(corpus()) if c.name == case_name)
    case = corpus()[index]
    (removal,) = [r for r in removals(case) if r.label(case) == label]
    after = verdict(case, removal.apply(case))
    assert after not in (baseline(index), "unconfirmed")


def main() -> int:
    """Try every single removal of every case; print each violation."""
    found = 0
    for index, case in enumerate(corpus()):
        for removal in removals(case):
            problem = violation(index, removal)
            if problem is not None:
                found += 1
                print(problem)
    print(f"{found} violations over {len(corpus())} cases")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
