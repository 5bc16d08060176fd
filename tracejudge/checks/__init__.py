"""Deterministic hard checks, decided by code against a trusted reference (DESIGN 2, 5.6)."""

from tracejudge.checks._checks import CHECKS, CheckFn, applies, run_check, run_checks
from tracejudge.checks._manifest import read_manifest
from tracejudge.checks._numbers import FoundNumber, find_numbers, normalize_unit, parse_number
from tracejudge.checks._parts import evaluated_span, part_data, part_text, task_category
from tracejudge.checks._schema import check_schema, validate_json

__all__ = [
    "CHECKS",
    "CheckFn",
    "FoundNumber",
    "applies",
    "check_schema",
    "evaluated_span",
    "find_numbers",
    "normalize_unit",
    "parse_number",
    "part_data",
    "part_text",
    "read_manifest",
    "run_check",
    "run_checks",
    "task_category",
    "validate_json",
]
