"""``regress build`` with draft tickets (refused in the acceptance split unless --allow-draft) and with
--sweep (candidate failure samples from flagged traces, debug split, tagged basis: draft)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.sweep.sweep_data import EXAMPLE
from tracejudge._errors import InputError
from tracejudge.regress import build_suite, load_suite
from tracejudge.sweep import sweep


def _draft_files(store: Any, manifest: Any, folder: Path) -> list[Path]:
    """The sweep's draft tickets written as files, as `ticket draft --out` would."""
    from tracejudge.sweep import draft_ticket_for

    folder.mkdir()
    return [
        Path(draft_ticket_for(store, f.trace_id, manifest, out=folder / f"{f.trace_id}.yaml").out or "")
        for f in sweep(store, manifest).flagged
    ]


def test_draft_tickets_in_acceptance_are_refused_unless_allowed(
    procurement: Any, procurement_manifest: Any, tmp_path: Path
) -> None:
    store, _ = procurement
    files = _draft_files(store, procurement_manifest, tmp_path / "drafts")
    # Every flagged trace is about C-17's attachment: one group, so one split for all of them.
    probe = build_suite(
        store,
        tmp_path / "probe",
        tickets=files,
        manifest=procurement_manifest,
        allow_draft=True,
        acceptance_share=1.0,
    )
    samples = [s.sample for s in load_suite(tmp_path / "probe").samples]
    assert samples
    assert probe.written
    assert {s.split for s in samples} == {"acceptance"}
    assert {s.tags["basis"] for s in samples} == {"draft"}
    with pytest.raises(InputError, match="status: draft") as err:
        build_suite(
            store, tmp_path / "refused", tickets=files, manifest=procurement_manifest, acceptance_share=1.0
        )
    assert "--allow-draft" in str(err.value)
    assert not (tmp_path / "refused").exists()
    # In the debug split a draft is fine.
    build_suite(store, tmp_path / "debug", tickets=files, manifest=procurement_manifest, acceptance_share=0.0)
    assert {s.sample.split for s in load_suite(tmp_path / "debug").samples} == {"debug"}


def test_regress_build_refusal_names_the_option(
    procurement: Any, procurement_manifest: Any, tmp_path: Path
) -> None:
    from tracejudge.cli import cli

    store, _ = procurement
    files = _draft_files(store, procurement_manifest, tmp_path / "drafts")
    # Where the default 50/50 split puts these samples' group decides whether there is anything to refuse.
    build_suite(store, tmp_path / "probe", tickets=files, manifest=procurement_manifest, allow_draft=True)
    (split,) = {s.sample.split for s in load_suite(tmp_path / "probe").samples}
    args = [
        "--store",
        f"sqlite:///{store.path}",
        "regress",
        "build",
        "--manifest",
        str(EXAMPLE / "manifest.jsonl"),
    ]
    for f in files:
        args += ["--ticket", str(f)]
    res = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "s")])
    if split == "acceptance":
        assert res.exit_code == 2
        assert "--allow-draft" in res.output
    else:
        assert res.exit_code == 0, res.output
    allowed = CliRunner().invoke(cli, [*args, "--allow-draft", "--out", str(tmp_path / "s2")])
    assert allowed.exit_code == 0, allowed.output
    assert list((tmp_path / "s2").glob("*.yaml"))


def test_regress_build_sweep_makes_candidate_failure_samples(
    procurement: Any, procurement_manifest: Any, tmp_path: Path
) -> None:
    store, _ = procurement
    flagged = {f.trace_id for f in sweep(store, procurement_manifest).flagged}
    report = build_suite(store, tmp_path / "suite", manifest=procurement_manifest, from_sweep=True)
    samples = [s.sample for s in load_suite(tmp_path / "suite").samples]
    covered = {s.source.trace_id for s in samples} | {t for s in samples for t in s.source.also}
    assert covered == flagged
    assert report.written
    for s in samples:
        assert (s.kind, s.split, s.tags["basis"]) == ("failure", "debug", "draft")
        assert [(m.doc_id, m.version) for m in s.basis.required] == [("C-17/attachment", "v2")]
        assert [(m.doc_id, m.version) for m in s.basis.superseded] == [("C-17/attachment", "v1")]
