"""The READMEs' walks on the procurement example, run literally in an empty folder as a user would:
the by-hand regression build (examples/procurement/README.md) and the MCP session (README.md).

The commands are read from the READMEs themselves, so a walk that stops working, or a README that
drifts from what works, fails here. ``tracejudge demo`` runs twice for the module (about 15 s each):
as the by-hand build runs it, and as ``make demo`` does, into its own store."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_README = ROOT / "examples" / "procurement" / "README.md"
README = ROOT / "README.md"


def sh_blocks(readme: Path) -> list[str]:
    """Every fenced ``sh`` block of a README."""
    return re.findall(r"```sh\n(.*?)```", readme.read_text("utf-8"), re.S)


def commands(block: str) -> list[list[str]]:
    """The commands of an ``sh`` block: continuation lines joined, ``#`` comments dropped."""
    joined = block.replace("\\\n", " ")
    words = [shlex.split(line, comments=True) for line in joined.splitlines()]
    return [w for w in words if w]


def tracejudge(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tracejudge ARGS`` in ``cwd``, as the installed console script runs it."""
    assert args[0] == "tracejudge", args
    return subprocess.run(
        [sys.executable, "-m", "tracejudge", *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def by_hand_build() -> list[list[str]]:
    """The example README's by-hand build: the ``sh`` block that builds a suite from the demo's files."""
    (block,) = [b for b in sh_blocks(EXAMPLE_README) if "regress build" in b]
    return commands(block)


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty folder after the walk's first command, ``tracejudge demo``."""
    first = by_hand_build()[0]
    assert first == ["tracejudge", "demo"]
    cwd = tmp_path_factory.mktemp("user")
    done = tracejudge(first, cwd)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "9 of 9 scenarios got their expected verdict" in done.stdout
    return cwd


def test_the_by_hand_build_from_the_demos_files_passes_regress_check(after_demo: Path) -> None:
    steps = by_hand_build()
    assert [s[:3] for s in steps[1:]] == [
        ["tracejudge", "regress", "build"],
        ["tracejudge", "regress", "check"],
    ]
    for step in steps[1:]:
        done = tracejudge(step, after_demo)
        assert done.returncode == 0, (step, done.stderr + done.stdout)
    assert "no violations" in done.stdout
    kinds = sorted(
        yaml.safe_load(p.read_text("utf-8"))["kind"] for p in (after_demo / "suite").glob("*.yaml")
    )
    assert kinds.count("success") == 2
    assert kinds.count("failure") == 7
    # The same sample ids as the committed suite, built the same way.
    assert {p.name for p in (after_demo / "suite").glob("*.yaml")} == {
        p.name for p in (EXAMPLE_README.parent / "suite").glob("*.yaml")
    }


def test_from_the_tickets_alone_regress_check_refuses_the_suite_on_balance(after_demo: Path) -> None:
    # What the README says happens without the feedback tickets: the balance rule is right to refuse.
    build = next(s for s in by_hand_build() if s[1:3] == ["regress", "build"])
    pairs = [i for i, a in enumerate(build) if a == "--ticket" and "feedback" in build[i + 1]]
    tickets_only = [a for i, a in enumerate(build) if i not in pairs and i - 1 not in pairs]
    tickets_only[tickets_only.index("--out") + 1] = "tickets-only/"
    assert not any("feedback" in a for a in tickets_only)
    assert tracejudge(tickets_only, after_demo).returncode == 0
    check = tracejudge(["tracejudge", "regress", "check", "tickets-only/"], after_demo)
    assert check.returncode == 1
    assert "balance" in check.stdout


def _mcp_session_paths() -> dict[str, str]:
    """What README.md's MCP session names: the --tickets folder, the ticket resource, the triage
    arguments; and the client block's arguments."""
    text = README.read_text("utf-8")
    section = text[text.index("A session on the procurement example") :]
    session = section[: section.index("## File formats")]
    (config,) = [b for b in re.findall(r"```json\n(.*?)```", text, re.S) if "mcpServers" in b]
    triage = re.search(r'triage (\{"ticket".*?\})', session, re.S)
    assert triage is not None
    return {
        "tickets": re.findall(r'"--tickets", "([^"]+)"', session)[0],
        "resource": re.findall(r"read_resource (ticket://\S+)", session)[0],
        "triage": triage.group(1),
        "args": json.dumps(json.loads(config)["mcpServers"]["tracejudge"]["args"]),
    }


def test_the_readme_mcp_session_works_where_tracejudge_demo_ran(after_demo: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    named = _mcp_session_paths()
    args: list[str] = json.loads(named["args"])
    args[args.index("--tickets") + 1] = named["tickets"]  # "start the server there as above with …"
    triage_args: dict[str, str] = json.loads(named["triage"])
    # Every file the session names exists in the user's folder, none in a checkout's examples/.
    assert not any("examples/" in v for v in (named["tickets"], *triage_args.values()))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tracejudge", *args], cwd=str(after_demo)
    )

    async def go() -> tuple[Any, Any, Any]:
        async with Client(params) as c:
            ticket = await c.read_resource(named["resource"])
            trace_id = yaml.safe_load(ticket.contents[0].text)["trace_id"]
            shown = await c.call_tool("show_trace", {"trace_id": trace_id[:8]})
            triaged = await c.call_tool("triage", triage_args)
            return ticket, shown, triaged

    ticket, shown, triaged = asyncio.run(go())
    assert "Prepayment shall not exceed 30,000 RMB" in ticket.contents[0].text
    assert not shown.is_error, shown.content[0].text
    assert "50,000 RMB" in json.loads(shown.content[0].text)["final_answer"]
    assert not triaged.is_error, triaged.content[0].text
    result = json.loads(triaged.content[0].text)
    assert result["verdict"] == "ignored_by_model"
    assert [s["status"] for s in result["stages"]] == ["pass", "pass", "pass", "fail"]


@pytest.fixture(scope="module")
def after_make_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty folder after the example README's ``make demo`` equivalent (its own store)."""
    (block,) = [b for b in sh_blocks(EXAMPLE_README) if "make demo" in b]
    (demo,) = [c for c in commands(block) if c[0] == "tracejudge"]
    cwd = tmp_path_factory.mktemp("checkout-less")
    done = tracejudge(demo, cwd)
    assert done.returncode == 0, done.stderr + done.stdout
    return cwd


def _json(step: list[str], cwd: Path) -> Any:
    done = tracejudge([*step, "--json"], cwd)
    assert done.returncode == 0, (step, done.stderr + done.stdout)
    return json.loads(done.stdout)


def test_looking_at_a_trace_sweeping_and_drafting_work_on_the_demos_files(after_make_demo: Path) -> None:
    (look,) = [b for b in sh_blocks(EXAMPLE_README) if "traces show" in b]
    (sweep,) = [b for b in sh_blocks(EXAMPLE_README) if "--sweep" in b]
    show, triage = commands(look)
    assert _json(show, after_make_demo)["final_answer"]
    assert _json(triage, after_make_demo)["verdict"] == "dropped_in_context"
    swept, draft = commands(sweep)
    assert len(_json(swept, after_make_demo)["flagged"]) == 6  # as the README says
    drafted = _json(draft, after_make_demo)["ticket"]
    assert drafted["status"] == "draft"
    assert drafted["required"][0]["facts"] == {"prepayment_rmb": 30000}
