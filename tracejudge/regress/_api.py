"""One library function per ``regress`` command: they read files and the store, call the pure stages,
and write the suite. The CLI only parses, calls one of these, and renders."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, get_args

from tracejudge._bundled import is_bundled
from tracejudge._errors import InputError, StoreDamageError, damaged_reason
from tracejudge._inputfile import read_input, safe_load_yaml
from tracejudge.regress._anonymize import anonymize_samples, verify_anonymized
from tracejudge.regress._build import TicketExtras, build_from_feedback, build_sample, merge_duplicates
from tracejudge.regress._hygiene import HygieneOptions, check_suite
from tracejudge.regress._push import push_suite
from tracejudge.regress._suite import RUNS_DIR, load_suite, sample_files, write_sample
from tracejudge.schema import (
    AnonymizeReport,
    BuildReport,
    BuildSkip,
    HygieneReport,
    ManifestEntry,
    Sample,
    SampleKind,
)
from tracejudge.store import Store
from tracejudge.write import DatasetWriter, WriteReport, open_dataset_writer

_KINDS = get_args(SampleKind)
_TICKET_HINT = 'fix the ticket; see "File formats" in the README'


def _is_kind(value: Any) -> bool:
    return value in _KINDS


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, str) for t in value)


def _is_date(value: Any) -> bool:
    return isinstance(value, date | datetime)


def _is_mapping(value: Any) -> bool:
    return isinstance(value, dict)


# The ticket keys only ``regress build`` reads: (key, default when absent or empty, test, what is wrong,
# hint), checked in this order. ``{value!r}`` in what is wrong is the key's value.
_EXTRA_KEYS: tuple[tuple[str, Any, Callable[[Any], bool], str, str], ...] = (
    (
        "kind",
        None,
        _is_kind,
        "{value!r} is not one of " + ", ".join(_KINDS),
        "fix or remove `kind` in the ticket",
    ),
    ("forbidden_tools", [], _is_names, "must be a list of tool names", "e.g. [submit_payment]"),
    ("verified_at", None, _is_date, "{value!r} is not a date", "e.g. 2026-11-20"),
    ("tags", {}, _is_mapping, "must be a mapping", "e.g. {risk: high}"),
)


def _extras(path: Path) -> TicketExtras:
    """The keys of a ticket that only ``regress build`` reads (``kind``, ``forbidden_tools``, ...)."""
    data, _ = safe_load_yaml(read_input(path, "ticket", "--tickets"), source=str(path), hint=_TICKET_HINT)
    if not isinstance(data, dict):
        return TicketExtras()
    values: dict[str, Any] = {}
    for key, default, valid, problem, hint in _EXTRA_KEYS:
        value = values[key] = data.get(key) if default is None else data.get(key) or default
        if value is not None and not valid(value):
            raise InputError(f"{path}: {key}: {problem.format(value=value)}", hint=hint)
    return TicketExtras(
        kind=values["kind"],
        forbidden_tools=tuple(values["forbidden_tools"]),
        verified_at=values["verified_at"],
        tags={str(k): str(v) for k, v in values["tags"].items()},
    )


# The Langfuse collector keeps a pulled trace's scores here, refreshed by ``collect langfuse --feedback``
# / ``--queue``; ``langfuse.scores`` on the root span holds them as of the pull.
_LANGFUSE_MARKER = "langfuse.trace:"


def _kept_scores(store: Store, trace_id: str) -> list[Any]:
    raw = store.get_meta(_LANGFUSE_MARKER + trace_id.lower())
    if raw is not None:
        try:
            kept = json.loads(raw).get("scores")
        except (ValueError, AttributeError):
            kept = None
        if isinstance(kept, list):
            return kept
    out: list[Any] = []
    for span in store.get_spans(trace_id):
        attr = span.attributes.get("langfuse.scores")
        if isinstance(attr, str):
            try:
                attr = json.loads(attr)
            except ValueError:
                continue
        if isinstance(attr, list):
            out += attr
    return out


def _scores(store: Store, trace_id: str, name: str | None, queue: str | None) -> list[dict[str, Any]]:
    """Feedback scores the Langfuse collector keeps for a trace: those named ``name`` and, with
    ``queue``, made in that annotation queue."""
    return [
        s
        for s in _kept_scores(store, trace_id)
        if isinstance(s, dict)
        and (name is None or s.get("name") == name)
        and (queue is None or s.get("queue_id") == queue)
    ]


def _verdict_scores(scores: Sequence[dict[str, Any]], *, queue: str | None) -> list[dict[str, Any]]:
    """The scores that become samples when no score name is asked for. In an annotation queue a
    reviewer's free-text (TEXT) scores are notes on the verdict, not verdicts: they fill in the
    comment of the trace's other scores."""
    if queue is None:
        return list(scores)
    notes = _reviewer_notes(scores)
    verdicts = [s for s in scores if s.get("data_type") != "TEXT"]
    if not notes:
        return verdicts
    return [s if s.get("comment") else {**s, "comment": notes} for s in verdicts]


def _reviewer_notes(scores: Sequence[dict[str, Any]]) -> str:
    """The non-empty TEXT scores' values, one a line."""
    return "\n".join(str(s["value"]) for s in scores if s.get("data_type") == "TEXT" and s.get("value"))


def _write(out: Path, samples: Sequence[Sample]) -> tuple[list[str], list[str]]:
    existing = {p.stem for p in sample_files(out)} if out.is_dir() else set()
    written, kept = [], []
    for s in samples:
        if s.id in existing:
            kept.append(str(out / f"{s.id}.yaml"))
        else:
            written.append(str(write_sample(out, s)))
    return written, kept


@dataclass(frozen=True)
class _Builder:
    """What every sample of one ``regress build`` is built from and with."""

    store: Store
    manifest: Sequence[ManifestEntry]
    rubric: str | None
    acceptance_share: float

    def from_ticket(self, path: Path, allow_draft: bool) -> Sample | BuildSkip:
        """The sample of one ticket file, or why there is none."""
        from tracejudge.localize import load_ticket, localize
        from tracejudge.normalize import normalize

        ticket = load_ticket(path)
        extras = _extras(path)
        if not ticket.trace_id:
            return BuildSkip(source=str(path), reason="the ticket names no trace_id")
        try:
            spans = self.store.get_spans(ticket.trace_id.lower())
        except StoreDamageError as exc:
            return BuildSkip(source=str(path), reason=exc.reason)
        if not spans:
            return BuildSkip(
                source=str(path), reason=f"no spans stored for trace {ticket.trace_id}; collect it first"
            )
        task = normalize(spans)
        loc = localize(task, ticket, self.manifest)
        sample = build_sample(
            task, ticket, loc, self.manifest, extras=extras, rubric=self.rubric,
            acceptance_share=self.acceptance_share,
        )  # fmt: skip
        if ticket.status != "draft":
            return sample
        _refuse_draft(path, sample, allow_draft)
        return _drafted(sample, split=sample.split)

    def from_tickets(self, paths: Sequence[Path], allow_draft: bool) -> tuple[list[Sample], list[BuildSkip]]:
        """The samples of ticket files, and the tickets that make none."""
        built = [self.from_ticket(path, allow_draft) for path in paths]
        return [b for b in built if isinstance(b, Sample)], [b for b in built if isinstance(b, BuildSkip)]

    def from_feedback(
        self, name: str | None, queue: str | None, threshold: float
    ) -> tuple[list[Sample], list[BuildSkip]]:
        """One sample per stored Langfuse score named ``name`` and/or made in annotation queue ``queue``;
        and the traces that do not read back (a damaged store), skipped so that the rest still build."""
        from tracejudge.normalize import normalize

        samples: list[Sample] = []
        skipped: list[BuildSkip] = []
        for trace_id in self.store.iter_trace_ids():
            try:
                scores = _scores(self.store, trace_id, name, queue)
                if name is None:
                    scores = _verdict_scores(scores, queue=queue)
                if not scores:
                    continue
                task = normalize(self.store.get_spans(trace_id))
            except StoreDamageError as exc:
                skipped.append(BuildSkip(source=trace_id, reason=exc.reason))
                continue
            samples += [
                build_from_feedback(
                    task, score, self.manifest, threshold=threshold, acceptance_share=self.acceptance_share
                )
                for score in scores
            ]
        return samples, skipped


def _no_feedback(name: str | None, queue: str | None) -> BuildSkip:
    """The skip reported when no stored trace carries a score that was asked for."""
    wanted = " in ".join(
        w
        for w in (
            f"langfuse score {name!r}" if name else "langfuse scores",
            f"annotation queue {queue!r}" if queue else "",
        )
        if w
    )
    return BuildSkip(
        source=wanted,
        reason="no stored trace carries a score that matches; run `tracejudge collect langfuse`"
        " (it keeps each trace's scores as of its pull)",
    )


def build_suite(
    store: Store,
    out: Path,
    *,
    tickets: Sequence[Path] = (),
    langfuse_feedback: str | None = None,
    langfuse_queue: str | None = None,
    manifest: Sequence[ManifestEntry] = (),
    positive_threshold: float = 1.0,
    acceptance_share: float = 0.5,
    rubric: str | None = None,
    allow_draft: bool = False,
    from_sweep: bool = False,
    since: datetime | None = None,
    until: datetime | None = None,
) -> BuildReport:
    """Triage each ticket against its stored trace and write one sample per distinct problem; or turn
    stored Langfuse feedback scores into samples: those named ``langfuse_feedback`` and/or the results
    of the annotation queue ``langfuse_queue`` (the reviewer is who verified, the score time when).
    Existing sample files are kept as they are.

    A draft ticket (``status: draft``) whose sample falls in the acceptance split is refused unless
    ``allow_draft``. ``from_sweep`` turns every trace ``triage --sweep`` flags in [since, until) into a
    candidate failure sample from its draft ticket: split debug, tagged ``basis: draft`` until verified."""
    if not (tickets or langfuse_feedback or langfuse_queue or from_sweep):
        raise InputError(
            "nothing to build from",
            hint="pass --ticket FILE..., --langfuse-feedback SCORE_NAME or --langfuse-queue QUEUE_ID",
        )
    builder = _Builder(store, manifest, rubric, acceptance_share)
    samples, skipped = builder.from_tickets(tickets, allow_draft)
    if from_sweep:
        swept, lost = _sweep_samples(store, manifest, since, until, rubric, acceptance_share)
        samples += swept
        skipped += lost
    if langfuse_feedback or langfuse_queue:
        scored, lost = builder.from_feedback(langfuse_feedback, langfuse_queue, positive_threshold)
        samples += scored
        skipped += lost
        if not scored:
            skipped.append(_no_feedback(langfuse_feedback, langfuse_queue))
    return _report(out, merge_duplicates(samples), skipped)


def _report(out: Path, unique: Sequence[Sample], skipped: Sequence[BuildSkip]) -> BuildReport:
    """Write the new samples and say what was written, kept, merged and skipped."""
    written, kept = _write(out, unique)
    return BuildReport(
        out=str(out),
        written=tuple(written),
        kept=tuple(kept),
        merged={s.id: list(s.source.also) for s in unique if s.source.also},
        skipped=tuple(skipped),
        kinds=dict(Counter(s.kind for s in unique)),
    )


def runs_folder(suite: Path, runs: Path | None = None) -> tuple[Path, str | None]:
    """Where ``regress run`` keeps a suite's run records, and a note when that is not what was asked.

    ``--runs DIR`` wins; otherwise ``SUITE/runs``, except for a suite that ships with tracejudge (the
    bundled examples, in a checkout or an installed package): tracejudge never writes there, so its
    runs go to ``./.tracejudge/runs/<example>-<suite>/`` (the note says so)."""
    if runs is not None:
        return runs, None
    if is_bundled(suite):
        resolved = suite.resolve()
        out = Path(".tracejudge") / "runs" / f"{resolved.parent.name}-{resolved.name}"
        return out, (
            f"{suite} ships with tracejudge and is never written to: runs are kept in {out} "
            "(pass --runs DIR to choose)"
        )
    return suite / RUNS_DIR, None


def _refuse_draft(path: Path, sample: Sample, allow: bool) -> None:
    if sample.split == "acceptance" and not allow:
        raise InputError(
            f"{path}: the ticket is a draft (status: draft) and its sample {sample.id} falls in the"
            " acceptance split, which must rest on verified feedback",
            hint="have a person check the ticket and set status: verified, or pass --allow-draft to build"
            " it anyway",
        )


def _drafted(sample: Sample, *, split: Any) -> Sample:
    """A sample resting on a draft ticket: tagged so, until a person verifies its basis."""
    return sample.model_copy(update={"split": split, "tags": {**sample.tags, "basis": "draft"}})


def _sweep_samples(
    store: Store,
    manifest: Sequence[ManifestEntry],
    since: datetime | None,
    until: datetime | None,
    rubric: str | None,
    acceptance_share: float,
) -> tuple[list[Sample], list[BuildSkip]]:
    """Candidate failure samples from the traces a sweep flags (debug split: their basis is a draft), and
    the stored traces that do not read back (a damaged store: the sweep reads the rest)."""
    from tracejudge.localize import localize
    from tracejudge.normalize import normalize
    from tracejudge.schema import Ticket
    from tracejudge.sweep import iter_sweep

    out: list[Sample] = []
    lost: list[str] = []
    for flag in iter_sweep(store, manifest, since=since, until=until, unreadable=lost.append):
        if isinstance(flag, int):
            continue
        ticket = Ticket.model_validate(flag.ticket)
        if not ticket.required or not ticket.required[0].version:
            continue  # what applied is left for a person: nothing to build on yet
        task = normalize(store.get_spans(flag.trace_id))
        loc = localize(task, ticket, manifest)
        sample = build_sample(
            task, ticket, loc, manifest, extras=TicketExtras(kind="failure"), rubric=rubric,
            acceptance_share=acceptance_share,
        )  # fmt: skip
        out.append(_drafted(sample, split="debug"))
    return out, [_unreadable(trace_id) for trace_id in lost]


def _unreadable(trace_id: str) -> BuildSkip:
    return BuildSkip(source=trace_id, reason=damaged_reason("the trace's stored spans do not read back"))


def check_suite_path(
    path: Path, options: HygieneOptions | None = None, *, runs_dir: Path | None = None
) -> HygieneReport:
    """``regress check``: load (validating) the suite and its runs, apply every hygiene rule."""
    suite = load_suite(path, runs_dir=runs_dir)
    return check_suite(str(path), suite.samples, suite.runs(), options)


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def _check_anonymize_paths(path: Path, out: Path, mapping_file: Path | None) -> None:
    """The anonymized suite goes to a new folder apart from the suite, the mapping outside both."""
    if _inside(out, path) or _inside(path, out):
        raise InputError(
            f"--out {out} overlaps the suite {path}", hint="write the anonymized suite to a new folder"
        )
    if mapping_file is not None and (_inside(mapping_file, out) or _inside(mapping_file, path)):
        raise InputError(
            f"--mapping {mapping_file} is inside a suite folder",
            hint="keep the mapping out of the suite: write it somewhere private",
        )
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out} exists and is not empty", hint="pass a new folder as --out")


def anonymize_suite(
    path: Path, out: Path, *, mapping_file: Path | None = None, identifiers: Iterable[str] = ()
) -> AnonymizeReport:
    """``regress anonymize``: write the pseudonymized samples to ``out`` (runs are not copied: they
    hold real answers), verify each sample's triage verdict and hard checks are unchanged, and write
    the mapping only to ``mapping_file``, which must be outside both suites."""
    suite = load_suite(path)
    _check_anonymize_paths(path, out, mapping_file)
    originals = [s.sample for s in suite.samples]
    anonymized, mapping = anonymize_samples(originals, identifiers=identifiers)
    checks = [verify_anonymized(b, a) for b, a in zip(originals, anonymized, strict=True)]
    out.mkdir(parents=True, exist_ok=True)
    for s in anonymized:
        write_sample(out, s)
    if mapping_file is not None:
        mapping_file.parent.mkdir(parents=True, exist_ok=True)
        mapping_file.write_text(json.dumps(mapping, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return AnonymizeReport(
        out=str(out),
        samples=len(anonymized),
        replaced={k: len(v) for k, v in mapping.items()},
        verified=tuple(checks),
        mapping_file=str(mapping_file) if mapping_file else None,
    )


def push_suite_path(
    path: Path, dataset: str, writer: DatasetWriter | None = None, *, target: str = "langfuse"
) -> WriteReport:
    """``regress push``: every sample as a dataset item (retired ones archived), into ``dataset`` of
    ``target`` (a ``write.TARGETS`` entry that takes datasets). The suite is loaded first, so a broken
    sample is reported before the backend is contacted. ``writer`` overrides the target's own (it is
    not closed here)."""
    suite = load_suite(path)
    if writer is not None:
        return push_suite(writer, dataset, suite.samples, suite=suite.name)
    with open_dataset_writer(target) as own:
        return push_suite(own, dataset, suite.samples, suite=suite.name)


def iter_samples(path: Path) -> Iterator[Sample]:
    """The samples of a suite folder, validated."""
    for s in load_suite(path).samples:
        yield s.sample


def copy_suite(src: Path, dst: Path) -> None:
    """Copy a suite's sample files (not its runs)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sample_files(src):
        shutil.copy2(f, dst / f.name)
