"""Scripted judge replies for the calibration example, so it runs offline against the local
OpenAI-compatible server (``tracejudge.testing.openai_server``) through the real ``openai`` client.

The correctness judge agrees with the labels except on q20, where it is lenient; the support-bot
judge passes only the answers that offer a next step (three good ones and the bad q15)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tracejudge.testing.openai_server import Rule

HERE = Path(__file__).resolve().parent
NEXT_STEP = {"q06", "q08", "q10", "q15"}


def items() -> list[dict[str, Any]]:
    """The labelled items (first rater)."""
    lines = (HERE / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    return [d for d in map(json.loads, lines) if "id" in d]


def _reply(criteria: dict[str, tuple[float, str]], overall: str) -> dict[str, Any]:
    return {
        "criteria": {k: {"reasoning": why, "score": s} for k, (s, why) in criteria.items()},
        "reasoning": overall,
    }


def correctness_reply(item: dict[str, Any]) -> dict[str, Any]:
    if item["id"] == "q20":
        return _reply(
            {"correctness": (7, "The answer says payment is possible, which is helpful.")}, "Acceptable."
        )
    if item["label"] == "pass":
        return _reply({"correctness": (9, "The answer is correct and accurate.")}, "Correct.")
    return _reply({"correctness": (2, "The answer is wrong: it states an incorrect fact.")}, "Incorrect.")


def support_reply(item: dict[str, Any]) -> dict[str, Any]:
    if item["id"] in NEXT_STEP:
        step = (8, "The reply tells the customer what to do next.")
    else:
        step = (2, "The reply gives no next step and no offer of further help.")
    return _reply({"next_step": step, "tone": (8, "Polite and clear.")}, "See the criteria.")


def rules() -> list[Rule]:
    """One rule per item and rubric, matched on the rubric's criterion name and the item's question."""
    out = []
    for item in items():
        q = re.escape(item["input"])
        out.append(Rule(reply=correctness_reply(item), any_message=rf"- correctness:.*{q}"))
        out.append(Rule(reply=support_reply(item), any_message=rf"- next_step:.*{q}"))
    return out


def main() -> None:
    """Calibrate both rubrics against the labels, offline."""
    import os
    import tempfile

    from click.testing import CliRunner

    from tracejudge.cli import cli
    from tracejudge.testing.openai_server import ScriptedOpenAIServer

    with ScriptedOpenAIServer(rules()) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        os.environ.setdefault("OPENAI_API_KEY", "unused")
        store = f"sqlite:///{tmp}/calibration.db"
        for rubric in ("rubric-support.yaml", "rubric-correctness.yaml"):
            result = CliRunner().invoke(
                cli,
                [
                    "--store",
                    store,
                    "calibrate",
                    "--rubric",
                    str(HERE / rubric),
                    "--labels",
                    str(HERE / "labels.jsonl"),
                ],
            )
            print(result.output)
            if result.exception and not isinstance(result.exception, SystemExit):
                raise result.exception


if __name__ == "__main__":
    main()
