"""Fixtures shared across the test tree."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tracejudge.schema import RawSpan
from tracejudge.testing.openai_server import Rule

ROOT = Path(__file__).resolve().parents[1]
RESTAURANT = ROOT / "examples" / "restaurant"

# The openai client's classes whose methods OpenLLMetry's OpenAI instrumentation wraps.
_OPENAI_WRAPPED = (
    "openai.resources.chat.completions.completions",
    "openai.resources.completions",
    "openai.resources.embeddings",
    "openai.resources.images",
    "openai.resources.responses.responses",
    "openai.resources.beta.assistants",
    "openai.resources.beta.threads.messages",
    "openai.resources.beta.threads.runs.runs",
    "openai.resources.beta.realtime.realtime",
)


def unwrap_openllmetry_openai() -> None:
    """Undo what OpenLLMetry's OpenAI instrumentation (opentelemetry-instrumentation-openai 0.62) leaves when
    uninstrumented: every openai method it wrapped stays wrapped (its unwrap names the openai modules of
    old), so each later call in the process got a span from the tracer provider that instrumented it, one
    the later recording's exporter never sees — its spans had a parent not received."""
    if "opentelemetry.instrumentation.openai" not in sys.modules:
        return
    for name in _OPENAI_WRAPPED:
        module = sys.modules.get(name)
        for cls in vars(module).values() if module is not None else ():
            if not isinstance(cls, type) or cls.__module__ != name:
                continue
            for attr, value in list(vars(cls).items()):
                wrapper = getattr(value, "_self_wrapper", None)
                if getattr(wrapper, "__module__", "").startswith("opentelemetry.instrumentation.openai"):
                    setattr(cls, attr, value.__wrapped__)


@pytest.fixture(autouse=True)
def _no_openllmetry_wrapper_outlives_its_test() -> Iterator[None]:
    """No test's OpenLLMetry recording reaches into the next one's (:func:`unwrap_openllmetry_openai`)."""
    yield
    unwrap_openllmetry_openai()


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
