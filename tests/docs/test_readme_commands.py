"""README.md's commands and file formats, held to the code so the front door cannot drift.

- every ``tracejudge …`` command line in the README's ``sh`` blocks names a real command and only
  options that command has (the at-scale and procurement tests run some of them; this checks all);
- every ``make TARGET`` it names is a Makefile target, and every benchmark command of the
  *Benchmarks* table is a script taking the options the table gives it;
- what ``make demo`` prints, as the README shows it, is what ``tracejudge demo`` prints;
- the ticket, manifest and rubric the README shows parse with the readers the commands use, and
  every field the README names is one those readers read (a misspelt or renamed field fails here
  even where the reader ignores unknown keys);
- the calibration labels and regression sample fields it lists are the records', and its MCP tool
  table is the server's tools with their arguments, each beside a real command;
- every ``TRACEJUDGE_*`` variable it names is read by some code, and the store schema its *Beyond
  DESIGN* section states is the one this version writes (a schema bump updates the README with it).

The README is read as it is: a changed command, option, field or demo line fails here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from tracejudge.cli import cli
from tracejudge.judge import load_rubric
from tracejudge.localize import load_manifest, load_ticket
from tracejudge.schema import ManifestEntry, Ticket

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _text() -> str:
    return README.read_text("utf-8")


def _section(title: str) -> str:
    """The README's text under a heading, up to the next heading of the same or a higher level."""
    text = _text()
    level = title.split(" ", 1)[0]
    start = text.index(f"\n{title}\n")
    rest = text[start + len(title) + 2 :]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def _blocks(lang: str, text: str | None = None) -> list[str]:
    """Every fenced block of a language, indented ones (inside a list item) dedented."""
    found = re.findall(rf"^( *)```{lang}\n(.*?)^\1```", text or _text(), re.S | re.M)
    return ["\n".join(line[len(indent) :] for line in body.splitlines()) for indent, body in found]


def _command_lines() -> list[list[str]]:
    """The README's sh commands as words: continuations joined, comments, redirections and
    pipelines' later parts dropped; ``…`` in a placeholder id kept as a word."""
    commands = []
    for block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for stop in ("&", ">", "|", "&&", ";"):
                if stop in words:
                    words = words[: words.index(stop)]
            if words:
                commands.append(words)
    return commands


def _tracejudge_commands() -> list[list[str]]:
    return [w[1:] for w in _command_lines() if w[0] == "tracejudge"]


def _options(command: click.Command) -> dict[str, click.Parameter]:
    return {
        opt: param
        for param in command.params
        if isinstance(param, click.Option)
        for opt in (*param.opts, *param.secondary_opts)
    }


def _resolve(words: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The command ``tracejudge WORDS`` runs, the command path, and the words after it (the root
    group's own options, e.g. ``--store URL``, taken before the first command)."""
    command: click.Command = cli
    path: list[str] = []
    rest = list(words)
    root_options = _options(cli)
    while rest:
        word = rest[0]
        if word.startswith("-") and command is cli:
            option = root_options.get(word.split("=", 1)[0])
            assert option is not None, (
                f"tracejudge has no option {word} (README: tracejudge {' '.join(words)})"
            )
            takes_value = not option.is_flag and "=" not in word
            rest = rest[2:] if takes_value else rest[1:]
            continue
        if not isinstance(command, click.Group):
            break
        sub = command.get_command(click.Context(command), word)
        if sub is None:
            if word.startswith("-") and command.invoke_without_command:
                break  # a group that runs itself (`calibrate --rubric …`): its options follow
            raise AssertionError(
                f"no command {' '.join([*path, word])!r} (README: tracejudge {' '.join(words)})"
            )
        command, path, rest = sub, [*path, word], rest[1:]
    return command, path, rest


def test_the_readme_shows_tracejudge_commands() -> None:
    # The parsing below finds the commands it checks: if it found none, it would check nothing.
    commands = _tracejudge_commands()
    assert len(commands) >= 40
    assert ["demo"] in commands
    assert any(c[:2] == ["collect", "otlp"] for c in commands)


@pytest.mark.parametrize("words", _tracejudge_commands(), ids=lambda w: " ".join(w)[:80])
def test_every_readme_command_names_a_real_command_and_its_options(words: list[str]) -> None:
    command, path, rest = _resolve(words)
    if not path:  # `tracejudge --version`: the root's own options, checked by _resolve
        assert not rest, words
        return
    options = _options(command)
    for word in rest:
        if word.startswith("-") and word not in ("-", "--"):
            name = word.split("=", 1)[0]
            assert name in options, (
                f"`tracejudge {' '.join(path)}` has no option {name} (README: tracejudge {' '.join(words)}); "
                f"it has {sorted(options)}"
            )


def test_every_make_target_the_readme_names_exists() -> None:
    makefile = (ROOT / "Makefile").read_text("utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w.-]*):", makefile, re.M))
    named = [w[1] for w in _command_lines() if w[0] == "make"]
    named += re.findall(r"`make (\w+)`", _text())
    assert {"demo", "test"} <= set(named)
    assert set(named) <= targets, f"README names make targets the Makefile lacks: {set(named) - targets}"


def _benchmark_rows() -> list[tuple[str, list[str]]]:
    rows = []
    for line in _section("## Benchmarks").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1].startswith("`") and "benchmarks/" in cells[1]:
            words = shlex.split(cells[1].strip("`"))
            rows.append((cells[0], words))
    return rows


def test_the_benchmarks_table_has_a_command_and_a_short_result_per_row() -> None:
    rows = _benchmark_rows()
    assert len(rows) >= 10
    for line in _section("## Benchmarks").splitlines():
        if line.startswith("| ") and "benchmarks/" in line:
            result = line.rstrip().rstrip("|").rsplit("|", 1)[1]
            # One latest figure with its commit, date and load; the history lives in docs/benchmarks.md.
            assert len(result) < 400, f"a Benchmarks result cell grew into a history: {result[:120]}…"
            assert re.search(r"\b[0-9a-f]{7}\b", result), f"no commit named in: {result}"
            assert re.search(r"\b20\d\d-\d\d-\d\d\b", result), f"no date in: {result}"


@pytest.mark.parametrize("row", _benchmark_rows(), ids=lambda r: " ".join(r[1][:2]))
def test_every_benchmark_command_in_the_table_takes_its_options(row: tuple[str, list[str]]) -> None:
    _, words = row
    script = next(w for w in words if w.startswith("benchmarks/"))
    assert (ROOT / script).is_file(), script
    options = [w.split("=", 1)[0] for w in words if w.startswith("--")]
    if not options:
        return
    helped = subprocess.run(
        [sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert helped.returncode == 0, helped.stderr[-2000:]
    for option in options:
        assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", helped.stdout), (
            f"{script} --help has no {option}"
        )


def test_what_the_readme_says_make_demo_prints_is_what_demo_prints(tmp_path: Path) -> None:
    text = _text()
    shown = text[text.index("What `make demo` prints") :]
    (table,) = re.findall(r"```\n(scenario .*?)```", shown, re.S)
    ran = subprocess.run(
        [sys.executable, "-m", "tracejudge", "--store", f"sqlite:///{tmp_path / 'demo.db'}", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    printed = [line.split() for line in ran.stdout.splitlines()]
    for line in table.strip().splitlines():
        assert line.split() in printed, f"README's line is not what demo prints: {line!r}"


def _ticket_block() -> str:
    (block,) = [b for b in _blocks("yaml") if b.startswith("# EXP-311.yaml")]
    return block


def test_the_readme_ticket_is_read_as_it_says(tmp_path: Path) -> None:
    path = tmp_path / "EXP-311.yaml"
    path.write_text(_ticket_block(), "utf-8")
    ticket = load_ticket(path)
    data = yaml.safe_load(_ticket_block())
    # Every key the example writes is a field the ticket reads (the model ignores unknown keys).
    assert set(data) <= set(Ticket.model_fields), set(data) - set(Ticket.model_fields)
    material = type(ticket.required[0])
    for entry in (*data["required"], *data["superseded"]):
        assert set(entry) <= set(material.model_fields), set(entry) - set(material.model_fields)
    assert ticket.ticket == "EXP-311"
    assert ticket.trace_id == data["trace_id"]
    assert ticket.task_time == datetime(2026, 11, 18, 9, 30, tzinfo=UTC)
    (required,) = ticket.required
    assert (required.doc_id, required.version) == ("C-17/attachment", "v2")
    assert required.clause == "Prepayment shall not exceed 30,000 RMB"
    assert dict(required.facts) == {"prepayment_cap_rmb": 30000}
    assert [(s.doc_id, s.version) for s in ticket.superseded] == [("C-17/attachment", "v1")]
    # The fields File formats names beside the example.
    formats = _section("## File formats")
    ticket_item = formats[: formats.index("- **Index manifest**")]
    named = set(re.findall(r"`(\w+)`", ticket_item)) - {"verified", "draft", "ticket"}
    assert {"status", "session_id", "trace_id"} <= named
    assert named <= set(Ticket.model_fields) | set(material.model_fields), named - set(Ticket.model_fields)
    assert load_ticket(_with(path, "status: draft\n")).status == "draft"


def _with(path: Path, extra: str) -> Path:
    other = path.with_name("other-" + path.name)
    other.write_text(path.read_text("utf-8").rstrip("\n") + "\n" + extra, "utf-8")
    return other


def test_the_readme_manifest_entry_is_read_as_it_says(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks("json") if '"doc_id"' in b and '"effective_from"' in b]
    data = json.loads(block)  # shown wrapped for reading; one line per entry in a file
    path = tmp_path / "index.jsonl"
    path.write_text(json.dumps(data) + "\n", "utf-8")
    (entry,) = load_manifest(path)
    assert set(data) <= set(ManifestEntry.model_fields), set(data) - set(ManifestEntry.model_fields)
    assert (entry.doc_id, entry.version) == ("C-17/attachment", "v2")
    assert entry.effective_from == datetime(2026, 3, 1, tzinfo=UTC)
    assert entry.effective_to is None
    assert list(entry.ids) == ["chunk-88", "chunk-89"]
    # The fields the triage section lists for the manifest are fields too.
    text = _text()
    listed = text[text.index("The optional index manifest") :].split(")", 1)[0]
    fields = re.findall(r"`(\w+)`", listed)
    assert len(fields) >= 8
    assert set(fields) <= set(ManifestEntry.model_fields), set(fields) - set(ManifestEntry.model_fields)


def test_the_readme_rubric_is_read_as_it_says(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks("yaml") if b.startswith("name: answer-correctness")]
    path = tmp_path / "rubric.yaml"
    path.write_text(block, "utf-8")
    rubric = load_rubric(path)
    assert (rubric.name, rubric.version) == ("answer-correctness", 3)
    assert rubric.judge.model == "gpt-4.1-mini"
    assert [c.name for c in rubric.criteria] == ["correctness"]
    assert rubric.criteria[0].threshold == 7
    assert [c.name for c in rubric.checks] == ["states_cap", "no_submit"]


def test_every_environment_variable_the_readme_names_is_read_somewhere() -> None:
    named = set(re.findall(r"\bTRACEJUDGE_[A-Z_]*[A-Z]\b", _text()))
    assert {"TRACEJUDGE_STORE", "TRACEJUDGE_JUDGE_HTTP", "TRACEJUDGE_OTLP_TOKEN"} <= named
    sources = [
        p for d in ("tracejudge", "collectors", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")
    ]
    code = "\n".join(p.read_text("utf-8") for p in sources if p.name != Path(__file__).name)
    unread = sorted(v for v in named if not re.search(rf"\b{v}\b", code))
    assert not unread, f"README names environment variables no code reads: {unread}"


def test_the_store_schema_the_readme_states_is_the_one_this_version_writes() -> None:
    from click.testing import CliRunner

    from tracejudge.store import STORE_SCHEMA_VERSION

    (stated,) = re.findall(r"store schema \*\*(\d+)\*\*", _section("## Beyond DESIGN"))
    assert int(stated) == STORE_SCHEMA_VERSION, "README's Beyond DESIGN names another store schema"
    version = CliRunner().invoke(cli, ["--version"])
    assert f"(store schema {stated})" in version.output


def _demo_json(tmp_path: Path, *args: str) -> Any:
    ran = subprocess.run(
        [sys.executable, "-m", "tracejudge", "demo", *args, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(ran.stdout)


def test_what_the_readme_says_demo_score_and_demo_regress_end_with(tmp_path: Path) -> None:
    text = " ".join(_text().split())  # the prose's line breaks as spaces
    scored = _demo_json(tmp_path, "score")["summary"]
    said = re.findall(r"\((\d+) pass, (\d+) fail, (\d+) indeterminate\)", text)
    assert len(said) >= 2  # the quick start and demo model's paragraph
    for counts in said:
        assert tuple(map(int, counts)) == (scored["pass"], scored["fail"], scored["indeterminate"])
    agent, fixed = _demo_json(tmp_path, "regress")["runs"]
    (failing, of) = map(
        int, re.findall(r"replays the deployed `agent` \((\d+) of (\d+) samples fail", text)[0]
    )
    assert (failing, of) == (agent["summary"]["fail"], agent["summary"]["n"])
    (now_fixed, others) = map(
        int, re.findall(r"\(all (\d+) `fixed`, the (\d+) others `still_passing`\)", text)[0]
    )
    assert (now_fixed, others) == (fixed["summary"]["fixed"], fixed["summary"]["still_passing"])


def _format_item(name: str) -> str:
    """One bullet of *File formats*, on one line."""
    formats = _section("## File formats")
    item = formats[formats.index(f"- **{name}**") :]
    end = item.find("\n- **", 1)
    return " ".join((item if end < 0 else item[:end]).split())


def test_the_readme_labels_format_is_what_calibrate_reads(tmp_path: Path) -> None:
    from tracejudge.audit import load_labels
    from tracejudge.schema import LabelItem

    item = _format_item("Calibration labels")
    keys = re.findall(r'"(\w+)"', item)
    assert {"id", "input", "output", "label", "context", "rater"} <= set(keys)
    assert set(keys) - {"pass", "fail"} <= set(LabelItem.model_fields), set(keys) - set(
        LabelItem.model_fields
    )
    base = {"id": "a", "input": "q", "output": "x", "context": "c", "rater": "r"}
    lines = [{**base, "id": f"i{v}", "label": v} for v in re.findall(r'"label": "(\w+)"\|"(\w+)"', item)[0]]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    assert [i.label for i in load_labels(path).items] == ["pass", "fail"]


def test_the_readme_regression_sample_fields_are_the_samples() -> None:
    from typing import get_args

    from tracejudge.schema import SAMPLE_KINDS, Sample
    from tracejudge.schema._spans import SCHEMA_VERSION

    item = _format_item("Regression sample")
    assert f"`schema_version: {SCHEMA_VERSION}`" in item
    fields = re.findall(r"`(\w+)`", item)
    assert len(fields) >= 10
    assert set(fields) <= set(Sample.model_fields), set(fields) - set(Sample.model_fields)
    kinds = re.search(r"`kind` \(([^)]*)\)", item)
    splits = re.search(r"`split` \(([^)]*)\)", item)
    assert kinds is not None
    assert splits is not None
    assert tuple(kinds.group(1).split(", ")) == SAMPLE_KINDS
    assert tuple(splits.group(1).split(", ")) == get_args(Sample.model_fields["split"].annotation)


def test_the_readme_mcp_tools_are_the_servers(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client

    from tracejudge.mcp import McpOptions, Toolbox, build_server
    from tracejudge.store import open_store

    text = _text()
    section = text[text.index("### Hand it to a coding agent (MCP)") :]
    rows = re.findall(r"^\| `(\w+)\(([^)]*)\)`[^|]*\| `([^`]+)` \|$", section, re.M)
    assert len(rows) >= 7
    store = open_store(f"sqlite:///{tmp_path / 'mcp.db'}")

    async def tools() -> dict[str, Any]:
        async with Client(build_server(Toolbox(store, roots=[tmp_path]), McpOptions(roots=[tmp_path]))) as c:
            return {t.name: t.input_schema for t in (await c.list_tools()).tools}

    try:
        served = asyncio.run(tools())
    finally:
        store.close()
    assert {name for name, _, _ in rows} == set(served)
    for name, args, same_as in rows:
        named = [a.strip() for a in args.split(",") if a.strip()]
        schema = served[name]
        assert {a.rstrip("?") for a in named} == set(schema["properties"]) - {"cursor"}, name
        assert {a for a in named if not a.endswith("?")} == set(schema.get("required") or ()), name
        # The command the tool mirrors is a real one, with those options.
        command, path, rest = _resolve(shlex.split(same_as))
        assert path, same_as
        assert {w for w in rest if w.startswith("--")} <= set(_options(command)), same_as
