"""The repository's docs point at things that exist: every file or folder of the tree that README.md,
CONTRIBUTING.md and docs/*.md name in backticks, and every relative link (with its #anchor) between
them. A renamed module, test or heading fails here until the docs follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("tracejudge", "collectors", "tests", "benchmarks", "examples", "docs", "dashboards", ".ci")
# Named in the docs but not in the tree: what the wheel build makes, and a client's config file.
NOT_IN_THE_TREE = {"tracejudge/_examples/"}


def _named_paths(text: str) -> set[str]:
    files = re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|md|toml|yaml|yml|json|jsonl|sql|sh|png))`", text)
    folders = re.findall(rf"`((?:{'|'.join(re.escape(t) for t in TOP)})/[\w./-]*)`", text)
    return {p for p in (*files, *folders) if "<" not in p and not p.startswith(".cursor")}


def _exists(path: str) -> bool:
    # CONTRIBUTING names a package's modules from inside tracejudge/ once the package is clear.
    return any((base / path).exists() for base in (ROOT, ROOT / "tracejudge"))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    named = _named_paths(doc.read_text("utf-8")) - NOT_IN_THE_TREE
    assert named or doc.parent.name == "docs", f"{doc.name}: no paths found (the pattern is broken)"
    missing = sorted(p for p in named if not _exists(p))
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def _anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but - and _ dropped, spaces to -; repeats -1, -2."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", doc.read_text("utf-8"), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text("utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        assert linked.exists(), f"{doc.name} links to {target}: no such file"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{doc.name} links to {target}: no such heading"
