"""Deterministic hard checks: pure functions of a task record (and the index manifest)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tracejudge.checks._numbers import FoundNumber, find_numbers, normalize_unit, number_after
from tracejudge.checks._parts import part_text
from tracejudge.schema import (
    CheckResult,
    CheckSpec,
    CheckType,
    CitesCheck,
    ContainsCheck,
    Document,
    JsonSchemaCheck,
    LengthCheck,
    ManifestEntry,
    NumberCheck,
    PermissionsCheck,
    RegexCheck,
    RetrievalCall,
    ScoreVerdict,
    TaskRecord,
    ToolCall,
    ToolCheck,
)

_MISSING = object()

Manifest = Sequence[ManifestEntry] | None


def _norm(text: str, case_sensitive: bool) -> str:
    flat = " ".join(text.split())
    return flat if case_sensitive else flat.casefold()


def _missing(spec: CheckSpec, what: str) -> CheckResult:
    return CheckResult(verdict="indeterminate", type=spec.type, detail=f"{what} was not recorded")


def _target(spec: CheckSpec, task: TaskRecord) -> str | None:
    return part_text(task, spec.target)


def _values(spec: ContainsCheck) -> list[str]:
    if spec.value is None:
        return []
    return [spec.value] if isinstance(spec.value, str) else list(spec.value)


def _contains(spec: ContainsCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    text = _target(spec, task)
    if text is None:
        return _missing(spec, f"the {spec.target}")
    hay = _norm(text, spec.case_sensitive)
    present = [v for v in _values(spec) if _norm(v, spec.case_sensitive) in hay]
    absent = [v for v in _values(spec) if v not in present]
    if spec.type == "contains":
        if absent:
            return CheckResult(verdict="fail", type=spec.type, detail=f"{spec.target} lacks {absent!r}")
        return CheckResult(verdict="pass", type=spec.type, detail=f"{spec.target} contains {present!r}")
    if present:
        return CheckResult(verdict="fail", type=spec.type, detail=f"{spec.target} contains {present!r}")
    return CheckResult(verdict="pass", type=spec.type, detail=f"{spec.target} has none of {absent!r}")


def _regex(spec: RegexCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    text = _target(spec, task)
    if text is None:
        return _missing(spec, f"the {spec.target}")
    flags = 0 if spec.case_sensitive else re.IGNORECASE
    m = re.search(spec.pattern or "", text, flags | re.MULTILINE)
    if m is None:
        return CheckResult(verdict="fail", type=spec.type, detail=f"no match for /{spec.pattern}/")
    return CheckResult(verdict="pass", type=spec.type, detail=f"matched {m.group(0)[:80]!r}")


def _dig(data: Any, path: str) -> Any:
    cur = data
    for key in path.split(".") if path else []:
        if isinstance(cur, Mapping) and key in cur:
            cur = cur[key]
        elif isinstance(cur, Sequence) and not isinstance(cur, str) and key.lstrip("-").isdigit():
            idx = int(key)
            if -len(cur) <= idx < len(cur):
                cur = cur[idx]
            else:
                return _MISSING
        else:
            return _MISSING
    return cur


def _metadata_reference(src: Mapping[str, Any], task: TaskRecord) -> tuple[Any, str] | str:
    return task.metadata.get(src["metadata"], _MISSING), f"trace metadata {src['metadata']!r}"


def _tool_reference(src: Mapping[str, Any], task: TaskRecord) -> tuple[Any, str] | str:
    calls = [t for t in task.tool_calls if t.name == src["tool"]]
    if not calls:
        return f"no call of tool {src['tool']!r} was recorded"
    # The last call is the one whose result the agent acted on.
    call = calls[-1]
    value = _dig({"arguments": call.arguments, "result": call.result}, src.get("path", "result"))
    return value, f"tool {src['tool']!r} {src.get('path', 'result')}"


_REFERENCE_SOURCES: Mapping[str, Callable[[Mapping[str, Any], TaskRecord], tuple[Any, str] | str]] = (
    MappingProxyType({"metadata": _metadata_reference, "tool": _tool_reference})
)
"""Where a number check's ``expected_from`` finds its reference, in order of precedence: (the recorded
value, where it was read) or why there is none."""


def _reference_number(value: Any, where: str) -> tuple[float | None, str]:
    """The recorded reference as one number, or why it is not one."""
    if value is _MISSING or value is None:
        return None, f"{where} was not recorded"
    if isinstance(value, bool):
        return None, f"{where} is not a number"
    if isinstance(value, int | float):
        return float(value), where
    nums = find_numbers(str(value))
    if len(nums) != 1:
        return None, f"{where} is not a single number: {str(value)[:60]!r}"
    return nums[0].value, where


def _reference(spec: NumberCheck, task: TaskRecord) -> tuple[float | None, str]:
    if spec.expected is not None:
        return spec.expected, "the rubric"
    src = spec.expected_from or {}
    source = next((read for key, read in _REFERENCE_SOURCES.items() if key in src), None)
    if source is None:
        return None, "expected_from names neither `tool` nor `metadata`"
    found = source(src, task)
    if isinstance(found, str):
        return None, found
    return _reference_number(*found)


_COMPARE: Mapping[str, Callable[[float, float, float], bool]] = MappingProxyType(
    {
        "eq": lambda a, b, tol: abs(a - b) <= tol,
        "ne": lambda a, b, tol: abs(a - b) > tol,
        "lt": lambda a, b, _tol: a < b,
        "le": lambda a, b, tol: a <= b + tol,
        "gt": lambda a, b, _tol: a > b,
        "ge": lambda a, b, tol: a >= b - tol,
    }
)
"""A number check's ``op``: found number ``a`` against reference ``b`` with tolerance ``tol``."""


def _pattern_numbers(spec: NumberCheck, text: str) -> list[FoundNumber]:
    """The numbers in the pattern's first group (or its whole match) at its first match."""
    m = re.search(spec.pattern or "", text, 0 if spec.case_sensitive else re.IGNORECASE)
    if m is None:
        return []
    return find_numbers(m.group(1) if m.groups() else m.group(0))


def _located_numbers(spec: NumberCheck, text: str) -> list[FoundNumber]:
    """The pattern's numbers, the numbers after ``near``, or every number in the text."""
    if spec.pattern:
        return _pattern_numbers(spec, text)
    if spec.near:
        return number_after(text, spec.near)
    return find_numbers(text)


def _number_candidates(spec: NumberCheck, text: str) -> list[FoundNumber]:
    """The numbers the check compares: the pattern's group, the number after ``near``, or every
    number in the text; with a ``unit``, those carrying it (else bare ones)."""
    candidates = _located_numbers(spec, text)
    unit = normalize_unit(spec.unit)
    if unit is None:
        return candidates
    candidates = [n for n in candidates if n.unit in (unit, None)]
    # A number with the asked unit beats a bare one.
    with_unit = [n for n in candidates if n.unit == unit]
    return with_unit or candidates


def _first_number(spec: NumberCheck, candidates: list[FoundNumber], ref: float, where: str) -> CheckResult:
    """A located number (``near`` or ``pattern``): the first one found is the answer's figure."""
    chosen = candidates[0]
    ok = _COMPARE[spec.op](chosen.value, ref, spec.tolerance)
    detail = f"found {chosen.text!r} = {chosen.value:g}; {spec.op} {ref:g} from {where}"
    return CheckResult(verdict="pass" if ok else "fail", type=spec.type, detail=detail)


def _no_number_equals(
    spec: NumberCheck, candidates: list[FoundNumber], ref: float, where: str
) -> CheckResult:
    """``ne`` over every number: any number equal to the reference fails."""
    op = _COMPARE[spec.op]
    bad = [n for n in candidates if not op(n.value, ref, spec.tolerance)]
    if bad:
        return CheckResult(verdict="fail", type=spec.type, detail=f"{bad[0].text!r} equals {ref:g}")
    return CheckResult(verdict="pass", type=spec.type, detail=f"no number equals {ref:g} ({where})")


def _some_number(spec: NumberCheck, candidates: list[FoundNumber], ref: float, where: str) -> CheckResult:
    """Any other op over every number: one number meeting it passes."""
    op = _COMPARE[spec.op]
    hits = [n for n in candidates if op(n.value, ref, spec.tolerance)]
    if hits:
        return CheckResult(
            verdict="pass", type=spec.type, detail=f"found {hits[0].text!r}; {spec.op} {ref:g} from {where}"
        )
    seen = ", ".join(n.text for n in candidates[:5])
    return CheckResult(
        verdict="fail", type=spec.type, detail=f"no number {spec.op} {ref:g} ({where}); saw {seen}"
    )


def _number(spec: NumberCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    text = _target(spec, task)
    if text is None:
        return _missing(spec, f"the {spec.target}")
    ref, where = _reference(spec, task)
    if ref is None:
        return CheckResult(verdict="indeterminate", type=spec.type, detail=f"no reference value: {where}")
    candidates = _number_candidates(spec, text)
    if not candidates:
        scope = f" after {spec.near!r}" if spec.near else ""
        return CheckResult(verdict="fail", type=spec.type, detail=f"no number{scope} in the {spec.target}")
    if spec.near or spec.pattern:
        return _first_number(spec, candidates, ref, where)
    if spec.op == "ne":
        return _no_number_equals(spec, candidates, ref, where)
    return _some_number(spec, candidates, ref, where)


def _cites(spec: CitesCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    text = _target(spec, task)
    if text is None:
        return _missing(spec, f"the {spec.target}")
    low = text.casefold()
    doc = (spec.doc_id or "").casefold()
    positions = [m.start() for m in re.finditer(re.escape(doc), low)]
    if not positions:
        return CheckResult(verdict="fail", type=spec.type, detail=f"does not cite {spec.doc_id}")
    if spec.version is None:
        return CheckResult(verdict="pass", type=spec.type, detail=f"cites {spec.doc_id}")
    ver = re.escape(spec.version.casefold())
    # "C-17 v2", "C-17@v2", "C-17 (version v2)": the version must follow the id closely.
    near = re.compile(rf"^[^\n]{{0,24}}?(?<![\w.]){ver}(?!\w|\.\d)")
    for pos in positions:
        if near.search(low[pos + len(doc) :]):
            return CheckResult(verdict="pass", type=spec.type, detail=f"cites {spec.doc_id} {spec.version}")
    return CheckResult(
        verdict="fail", type=spec.type, detail=f"cites {spec.doc_id} but not version {spec.version}"
    )


def _cond(value: Any, cond: Any) -> bool:
    if isinstance(cond, Mapping) and cond and all(str(k).startswith("$") for k in cond):
        return all(_op(value, str(k), v) for k, v in cond.items())
    if isinstance(cond, int | float) and not isinstance(cond, bool):
        num = _as_number(value)
        return num is not None and abs(num - float(cond)) <= 1e-9
    return bool(value == cond)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        nums = find_numbers(value)
        return nums[0].value if len(nums) == 1 else None
    return None


_ORDER: Mapping[str, Callable[[float, float], bool]] = MappingProxyType(
    {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }
)


def _ordered(order: Callable[[float, float], bool], value: Any, arg: Any) -> bool:
    a, b = _as_number(value), _as_number(arg)
    return a is not None and b is not None and order(a, b)


_ARGUMENT_OPS: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType(
    {
        "$exists": lambda _value, arg: bool(arg),
        "$eq": lambda value, arg: _cond(value, arg),
        "$ne": lambda value, arg: not _cond(value, arg),
        **{name: functools.partial(_ordered, order) for name, order in _ORDER.items()},
        "$in": lambda value, arg: any(_cond(value, x) for x in arg),
        "$nin": lambda value, arg: not any(_cond(value, x) for x in arg),
        "$contains": lambda value, arg: str(arg).casefold() in str(value).casefold(),
        "$regex": lambda value, arg: re.search(str(arg), str(value)) is not None,
    }
)
"""A tool-argument condition's operators (``{"$gt": 5}``), on a recorded value and the argument."""


def _op(value: Any, op: str, arg: Any) -> bool:
    if value is _MISSING:
        return op == "$exists" and not arg
    fn = _ARGUMENT_OPS.get(op)
    if fn is None:
        raise ValueError(f"unknown argument operator {op!r}")
    return fn(value, arg)


def _matches(call: ToolCall, conditions: Mapping[str, Any] | None) -> bool:
    if not conditions:
        return True
    args = call.arguments if call.arguments is not None else {}
    return all(_cond(_dig(args, key), cond) for key, cond in conditions.items())


_TOOL_OUTCOMES: Mapping[tuple[str, bool], tuple[ScoreVerdict, str]] = MappingProxyType(
    {
        ("tool_called", True): ("pass", "{tool} called{with_args}"),
        ("tool_called", False): ("fail", "{tool} not called{with_args}{other_calls}"),
        ("tool_not_called", True): ("fail", "{tool} was called{with_args}"),
        ("tool_not_called", False): ("pass", "{tool} not called{with_args}"),
    }
)
"""(check type, a matching call was recorded) -> (verdict, detail)."""


def _tool(spec: ToolCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    calls = [t for t in task.tool_calls if t.name == spec.tool]
    hits = [t for t in calls if _matches(t, spec.arguments)]
    verdict, detail = _TOOL_OUTCOMES[spec.type, bool(hits)]
    return CheckResult(
        verdict=verdict,
        type=spec.type,
        detail=detail.format(
            tool=spec.tool,
            with_args=f" with {spec.arguments}" if spec.arguments else "",
            other_calls=f" ({len(calls)} call(s) with other arguments)" if calls else "",
        ),
        evidence=tuple(t.span_id for t in hits),
    )


def _json_schema(spec: JsonSchemaCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    import json

    from tracejudge.checks._schema import validate_json

    text = _target(spec, task)
    if text is None:
        return _missing(spec, f"the {spec.target}")
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(stripped)
    except ValueError as exc:
        return CheckResult(verdict="fail", type=spec.type, detail=f"{spec.target} is not JSON: {exc}")
    errors = validate_json(data, spec.json_schema or {})
    if errors:
        return CheckResult(verdict="fail", type=spec.type, detail="; ".join(errors[:3]))
    return CheckResult(verdict="pass", type=spec.type, detail="valid against the schema")


def _length(spec: LengthCheck, task: TaskRecord, _manifest: Manifest) -> CheckResult:
    text = _target(spec, task)
    if text is None:
        return _missing(spec, f"the {spec.target}")
    n = len(text.split()) if spec.count == "words" else len(text)
    if spec.min is not None and n < spec.min:
        return CheckResult(verdict="fail", type=spec.type, detail=f"{n} {spec.count} < min {spec.min}")
    if spec.max is not None and n > spec.max:
        return CheckResult(verdict="fail", type=spec.type, detail=f"{n} {spec.count} > max {spec.max}")
    return CheckResult(verdict="pass", type=spec.type, detail=f"{n} {spec.count}")


@dataclass(frozen=True)
class _AclIndex:
    """The manifest's entries by (document, version) and by document (every version)."""

    by_key: dict[tuple[str, str | None], ManifestEntry]
    by_doc: dict[str, list[ManifestEntry]]

    @classmethod
    def of(cls, manifest: Sequence[ManifestEntry]) -> _AclIndex:
        by_key: dict[tuple[str, str | None], ManifestEntry] = {}
        by_doc: dict[str, list[ManifestEntry]] = {}
        for e in manifest:
            by_key[(e.doc_id, e.version)] = e
            by_doc.setdefault(e.doc_id, []).append(e)
        return cls(by_key, by_doc)

    def entries(self, doc_id: str, version: str | None) -> list[ManifestEntry]:
        """The entry of that version, else every version of the document (none when unlisted)."""
        entry = self.by_key.get((doc_id, version))
        return [entry] if entry else self.by_doc.get(doc_id, [])


@dataclass
class _PermissionTally:
    """Reads retrievals one by one against the manifest's ACLs. A retrieval or document that makes the
    check undecidable stops it at once (:meth:`retrieval` returns that result); the rest is tallied."""

    spec: PermissionsCheck
    index: _AclIndex
    violations: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    checked: int = 0

    def _indeterminate(self, detail: str) -> CheckResult:
        return CheckResult(verdict="indeterminate", type=self.spec.type, detail=detail)

    def retrieval(self, r: RetrievalCall) -> CheckResult | None:
        principal = r.principal or self.spec.principal
        if not r.documents_recorded:
            return self._indeterminate(f"retrieval {r.span_id} did not record its documents")
        for d in r.documents:
            stop = self.document(r, d, principal)
            if stop is not None:
                return stop
        return None

    def document(self, r: RetrievalCall, d: Document, principal: str | None) -> CheckResult | None:
        if d.doc_id is None:
            self.unknown.append("<document without id>")
            return None
        label = f"{d.doc_id}@{d.version}" if d.version else str(d.doc_id)
        entries = self.index.entries(d.doc_id, d.version)
        if not entries:
            self.unknown.append(label)
            return None
        self.checked += 1
        acls = [e.acl for e in entries if e.acl is not None]
        if not acls:
            return None
        if principal is None:
            return self._indeterminate(
                f"retrieval {r.span_id} recorded no principal (tracejudge.retrieval.principal)"
            )
        # With the version unknown every manifest version must allow the principal.
        if any(principal not in a for a in acls):
            self.violations.append(f"{label} read by {principal!r}")
            self.evidence.append(r.span_id)
        return None

    def result(self) -> CheckResult:
        """Any unauthorized read fails; else a document missing from the manifest leaves it undecided."""
        if self.violations:
            return CheckResult(
                verdict="fail",
                type=self.spec.type,
                detail="unauthorized read: " + ", ".join(self.violations),
                evidence=tuple(dict.fromkeys(self.evidence)),
            )
        if self.unknown:
            return self._indeterminate(
                "not in the manifest, so its ACL is unknown: " + ", ".join(self.unknown[:5])
            )
        return CheckResult(
            verdict="pass", type=self.spec.type, detail=f"{self.checked} retrieved document(s) allowed"
        )


def _permissions(spec: PermissionsCheck, task: TaskRecord, manifest: Manifest) -> CheckResult:
    if manifest is None:
        return CheckResult(
            verdict="indeterminate", type=spec.type, detail="no index manifest given (--manifest)"
        )
    if not task.retrievals:
        return CheckResult(verdict="pass", type=spec.type, detail="no retrieval was recorded")
    tally = _PermissionTally(spec, _AclIndex.of(manifest))
    for r in task.retrievals:
        stop = tally.retrieval(r)
        if stop is not None:
            return stop
    return tally.result()


CheckFn = Callable[[Any, TaskRecord, Manifest], CheckResult]
"""``check(spec, task, manifest)``: one check type's decision; ``spec`` is that type's model."""

CHECKS: Mapping[CheckType, CheckFn] = MappingProxyType(
    {
        "contains": _contains,
        "not_contains": _contains,
        "regex": _regex,
        "number": _number,
        "cites": _cites,
        "tool_called": _tool,
        "tool_not_called": _tool,
        "json_schema": _json_schema,
        "length": _length,
        "within_permissions": _permissions,
    }
)
"""Which function decides each check type (a test holds it to every :data:`CheckType`)."""


def run_check(spec: CheckSpec, task: TaskRecord, *, manifest: Manifest = None) -> CheckResult:
    """Decide one hard check on one task record. Missing evidence is ``indeterminate``, never a pass."""
    check = CHECKS.get(spec.type)
    if check is None:
        raise NotImplementedError(
            f"no function decides {spec.type!r} checks: add one to CHECKS in tracejudge/checks/_checks.py"
        )
    return check(spec, task, manifest)


def applies(spec: CheckSpec, category: str) -> bool:
    """Whether a check applies to an item of this category."""
    return spec.categories is None or category in spec.categories


def run_checks(
    specs: Sequence[CheckSpec],
    task: TaskRecord,
    *,
    category: str = "uncategorized",
    manifest: Sequence[ManifestEntry] | None = None,
) -> dict[str, CheckResult]:
    """Every applicable check, by name. A check that raises becomes indeterminate with the reason."""
    out: dict[str, CheckResult] = {}
    for spec in specs:
        if not applies(spec, category):
            continue
        try:
            out[spec.name] = run_check(spec, task, manifest=manifest)
        except (ValueError, TypeError, re.error) as exc:
            out[spec.name] = CheckResult(
                verdict="indeterminate", type=spec.type, detail=f"check error: {exc}"
            )
    return out
