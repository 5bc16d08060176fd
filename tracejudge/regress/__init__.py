"""Regression samples from verified feedback: build, keep clean, anonymize, push, replay (DESIGN 5.8).

The stages are pure (``build_sample``, ``check_suite``, ``anonymize_samples``); the ``*_suite`` /
``*_path`` functions read and write suite folders for the CLI; ``run_suite`` replays a suite against a
Python callable or an HTTP endpoint.
"""

from tracejudge.regress._anonymize import anonymize_samples, observed_task, sample_verdicts, verify_anonymized
from tracejudge.regress._api import (
    anonymize_suite,
    build_suite,
    check_suite_path,
    copy_suite,
    iter_samples,
    push_suite_path,
)
from tracejudge.regress._build import (
    ESCALATE_TOOL,
    TicketExtras,
    available,
    basis_complete,
    build_from_feedback,
    build_sample,
    expected_for,
    fingerprint,
    group_of,
    is_positive,
    merge_duplicates,
    sample_id,
    split_of,
)
from tracejudge.regress._hygiene import HygieneOptions, check_suite
from tracejudge.regress._push import dataset_item, push_suite
from tracejudge.regress._replay import (
    HttpTarget,
    ReplayContext,
    ReplayOptions,
    Target,
    ToolBox,
    compare_outcome,
    load_target,
    outcome_of,
    run_suite,
    run_suite_async,
)
from tracejudge.regress._suite import (
    RUNS_DIR,
    LoadedSample,
    Suite,
    dump_sample,
    load_runs,
    load_suite,
    parse_sample,
    sample_files,
    sample_hash,
    write_run,
    write_sample,
)

__all__ = [
    "ESCALATE_TOOL",
    "RUNS_DIR",
    "HttpTarget",
    "HygieneOptions",
    "LoadedSample",
    "ReplayContext",
    "ReplayOptions",
    "Suite",
    "Target",
    "TicketExtras",
    "ToolBox",
    "anonymize_samples",
    "anonymize_suite",
    "available",
    "basis_complete",
    "build_from_feedback",
    "build_sample",
    "build_suite",
    "check_suite",
    "check_suite_path",
    "compare_outcome",
    "copy_suite",
    "dataset_item",
    "dump_sample",
    "expected_for",
    "fingerprint",
    "group_of",
    "is_positive",
    "iter_samples",
    "load_runs",
    "load_suite",
    "load_target",
    "merge_duplicates",
    "observed_task",
    "outcome_of",
    "parse_sample",
    "push_suite",
    "push_suite_path",
    "run_suite",
    "run_suite_async",
    "sample_files",
    "sample_hash",
    "sample_id",
    "sample_verdicts",
    "split_of",
    "verify_anonymized",
    "write_run",
    "write_sample",
]
