"""Regression samples as Langfuse dataset items: deterministic ids, so pushing twice changes nothing."""

from __future__ import annotations

from collections.abc import Sequence

from tracejudge.regress._suite import LoadedSample
from tracejudge.schema import Sample
from tracejudge.write import DatasetItemRecord, DatasetWriter, WriteReport


def dataset_item(sample: Sample, *, suite: str, sample_hash: str) -> DatasetItemRecord:
    """One sample as a dataset item: the input the agent receives, the expected behaviour, and the
    sample's kind, group, split and version in metadata. Retired samples are archived, not deleted."""
    return DatasetItemRecord(
        key=sample.id,
        input=sample.input.model_dump(mode="json"),
        expected_output=sample.expected.model_dump(mode="json", by_alias=True),
        metadata={
            "suite": suite,
            "sample_hash": sample_hash,
            "kind": sample.kind,
            "group": sample.group,
            "split": sample.split,
            "tags": dict(sample.tags),
            "ticket": sample.source.ticket,
            "observed_verdict": sample.observed.verdict,
        },
        source_trace_id=sample.source.trace_id,
        source_observation_id=sample.source.observation_id,
        status="ACTIVE" if sample.status == "active" else "ARCHIVED",
    )


def push_suite(
    writer: DatasetWriter, dataset: str, samples: Sequence[LoadedSample], *, suite: str
) -> WriteReport:
    """Upsert every sample of a suite into a dataset."""
    items = [dataset_item(s.sample, suite=suite, sample_hash=s.hash) for s in samples]
    return writer.write_dataset_items(dataset, items)
