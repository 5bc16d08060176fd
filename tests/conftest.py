"""Fixtures shared across the test tree."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tracejudge.schema import RawSpan
from tracejudge.testing.openai_server import Rule

ROOT = Path(__file__).resolve().parents[1]
RESTAURANT = ROOT / "examples" / "restaurant"


def load_module(path: Path, name: str) -> ModuleType:
    """Import an example's script (the examples are folders, not packages) under ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses in the module look themselves up there
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Restaurant:
    """The restaurant scoring example: its traces, the scripted judge's rules, rubric and manifest."""

    spans: list[RawSpan]
    rules: list[Rule]
    rubric: Path
    manifest: Path

    def score_args(self, store_url: str, *extra: str) -> list[str]:
        """CLI arguments that score the example's traces in a store."""
        return [
            "--store",
            store_url,
            "score",
            "--rubric",
            str(self.rubric),
            "--manifest",
            str(self.manifest),
            *extra,
        ]


@pytest.fixture(scope="session")
def restaurant() -> Restaurant:
    module = load_module(RESTAURANT / "traces.py", "restaurant_traces")
    rules = [Rule(reply=r["reply"], any_message=re.escape(r["match"])) for r in module.judge_rules()]
    return Restaurant(
        spans=list(module.all_spans()),
        rules=rules,
        rubric=RESTAURANT / "rubric.yaml",
        manifest=RESTAURANT / "manifest.jsonl",
    )
