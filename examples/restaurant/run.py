"""Score the restaurant battery offline: traces into a store, the scripted judge server on loopback,
then ``tracejudge score`` with the rubric and manifest.

    python examples/restaurant/run.py [--store PATH] [--json] [extra score options...]
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from traces import all_spans, judge_rules  # noqa: E402

from tracejudge.cli import cli  # noqa: E402
from tracejudge.store import SqliteStore  # noqa: E402
from tracejudge.testing.openai_server import Rule, ScriptedOpenAIServer  # noqa: E402


def scripted_server() -> ScriptedOpenAIServer:
    rules = [Rule(reply=r["reply"], any_message=re.escape(r["match"])) for r in judge_rules()]
    return ScriptedOpenAIServer(rules)


def main(argv: list[str]) -> int:
    store_path = Path(tempfile.mkdtemp(prefix="tracejudge-restaurant-")) / "tracejudge.db"
    if argv[:1] == ["--store"]:
        store_path, argv = Path(argv[1]), argv[2:]
    store = SqliteStore(store_path)
    store.put_spans(all_spans())
    store.close()
    with scripted_server() as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url
        args = [
            "--store",
            str(store_path),
            "score",
            "--rubric",
            str(HERE / "rubric.yaml"),
            "--manifest",
            str(HERE / "manifest.jsonl"),
            *argv,
        ]
        try:
            cli.main(args, prog_name="tracejudge", standalone_mode=False)
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
