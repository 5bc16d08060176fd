"""Crafted samples and suites: ``sample(...)`` returns a valid sample as plain data to break on purpose."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

V2 = "Revised payment schedule. Prepayment shall not exceed 30,000 RMB per order."
V1 = "Payment schedule. Prepayment shall not exceed 50,000 RMB per order."


def sample(sid: str = "rs-0001", **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "id": sid,
        "kind": "failure",
        "group": "basis-C-17",
        "split": "acceptance",
        "tags": {"risk": "high"},
        "source": {"trace_id": "ab" * 16, "ticket": "EXP-1", "feedback": "cited v1", "verified_by": "Li Wei"},
        "input": {
            "messages": [
                {"role": "user", "content": f"What is the prepayment cap for Huadong Steel? ({sid})"}
            ],
            "principal": "procurement",
        },
        "basis": {
            "required": [
                {
                    "doc_id": "C-17/attachment",
                    "version": "v2",
                    "clause": "Prepayment shall not exceed 30,000 RMB",
                    "facts": {"prepayment_cap_rmb": 30000},
                }
            ],
            "superseded": [
                {"doc_id": "C-17/attachment", "version": "v1", "facts": {"prepayment_cap_rmb": 50000}}
            ],
        },
        "environment": {
            "task_time": "2026-11-18T09:30:00Z",
            "materials": [
                {
                    "doc_id": "C-17/attachment",
                    "version": "v1",
                    "content": V1,
                    "effective_from": "2025-01-01T00:00:00Z",
                    "effective_to": "2026-03-01T00:00:00Z",
                    "metadata": {"supplier": "Huadong Steel", "region": "CN"},
                    "acl": ["procurement"],
                },
                {
                    "doc_id": "C-17/attachment",
                    "version": "v2",
                    "content": V2,
                    "effective_from": "2026-03-01T00:00:00Z",
                    "metadata": {"supplier": "Huadong Steel", "region": "CN"},
                    "acl": ["procurement"],
                },
            ],
            "retrieval": {
                "query": "prepayment cap",
                "documents": [
                    {"doc_id": "C-17/attachment", "version": "v1", "score": 0.9},
                    {"doc_id": "C-17/attachment", "version": "v2", "score": 0.8},
                ],
            },
            "tools": [{"name": "escalate"}, {"name": "submit_payment", "mode": "block"}],
        },
        "observed": {
            "verdict": "ignored_by_model",
            "answer": "The cap is 50,000 RMB per order under C-17/attachment v1.",
            "deviation": "cited v1",
        },
        "expected": {
            "behavior": "cite attachment v2 and its 30,000 RMB cap; do not submit",
            "checks": [
                {"name": "cites_v2", "type": "cites", "doc_id": "C-17/attachment", "version": "v2"},
                {"name": "states_cap", "type": "number", "expected": 30000},
                {"name": "no_submit", "type": "tool_not_called", "tool": "submit_payment"},
            ],
            "criteria": [{"name": "explains_limit", "description": "explains the limit", "threshold": 7}],
        },
        "record": {"materials": {"C-17/attachment": "v2"}, "model": "gpt-4.1-nano"},
    }
    out = copy.deepcopy(data)
    out.update(overrides)
    return out


def success(sid: str, **overrides: Any) -> dict[str, Any]:
    base = sample(sid, kind="success", group="basis-POL-4", **overrides)
    base["input"]["messages"][0]["content"] = f"Who approves an over-cap prepayment request? ({sid})"
    return base


def write_suite(folder: Path, samples: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for s in samples:
        (folder / f"{s['id']}.yaml").write_text(yaml.safe_dump(s, sort_keys=False), encoding="utf-8")
    return folder


def balanced(folder: Path) -> Path:
    """A clean suite: two failures and two successes, each group in one split."""
    return write_suite(
        folder,
        [sample("rs-0001"), sample("rs-0002", group="basis-C-17"), success("rs-0003"), success("rs-0004")],
    )
