"""openai imported without the type modules a judge call does not use (``judge._reexports``): the
judge client's first call no longer waits for ~470 of them, and what openai's packages export is the
same as an eager import gives."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracejudge.judge._reexports import Reexports, reexports, reexports_on_use


def _run(code: str, *args: str, path: Path | None = None) -> str:
    env_path = [str(path)] if path is not None else []
    script = f"import sys; sys.path[:0] = {env_path!r}\n" + textwrap.dedent(code)
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_a_judge_call_imports_none_of_openais_response_types() -> None:
    # In a fresh interpreter, as the CLI runs: a call through the judge client against the scripted
    # server, its reply scored. Before, `import openai` alone loaded every module of openai.types.
    loaded = json.loads(
        _run(
            """
            import asyncio, json, sys
            from tracejudge.judge import OpenAIJudgeClient
            from tracejudge.schema import JudgeConfig
            from tracejudge.testing.openai_server import ScriptedOpenAIServer

            async def call(url):
                client = OpenAIJudgeClient(JudgeConfig(model="m", base_url=url, max_retries=0))
                try:
                    return await client.complete([{"role": "user", "content": "hi"}], schema=None)
                finally:
                    await client.aclose()

            with ScriptedOpenAIServer(default_reply="{}") as server:
                reply = asyncio.run(call(server.base_url))
            loaded = sorted(m for m in sys.modules if m.startswith("openai"))
            print(json.dumps([reply.text is not None, loaded]))
            """
        )
    )
    replied, modules = loaded
    assert replied
    assert "openai" in modules
    assert "openai.types.responses.response" not in modules
    assert len([m for m in modules if m.startswith("openai.types.")]) < 50, modules


_NAMES = """
import importlib, json, sys, types
{importing}
wanted = json.loads(sys.argv[1])
out = {{}}
for name, attrs in wanted.items():
    package = importlib.import_module(name)
    out[name] = {{
        attr: f"{{'module' if isinstance(value, types.ModuleType) else type(value).__module__}}."
        f"{{getattr(value, '__qualname__', '')}}:{{getattr(value, '__name__', repr(value))}}"
        for attr in attrs or [a for a in dir(package) if not a.startswith("__")]
        for value in [getattr(package, attr)]
    }}
print(json.dumps(out))
"""

_OPENAI_PACKAGES = ("openai.types", "openai.types.chat", "openai.types.responses", "openai.lib")


def test_openai_exports_the_same_names_imported_on_use() -> None:
    # Every name an eager import binds in openai's re-exporting packages (their re-exports, the
    # submodules loaded on the way, `annotations`) is the same object imported on use.
    eagerly = json.loads(
        _run(_NAMES.format(importing="import openai"), json.dumps(dict.fromkeys(_OPENAI_PACKAGES)))
    )
    lazily = json.loads(
        _run(
            _NAMES.format(
                importing="from tracejudge.judge._reexports import reexports_on_use\n"
                "with reexports_on_use('openai.types', 'openai.lib'):\n    import openai\n"
                "assert 'openai.types.responses.response' not in sys.modules"
            ),
            json.dumps({name: sorted(attrs) for name, attrs in eagerly.items()}),
        )
    )
    for name in _OPENAI_PACKAGES:
        assert len(eagerly[name]) > 10
        assert lazily[name] == eagerly[name], name


def _package(root: Path, name: str, init: str, **modules: str) -> None:
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(init))
    for module, text in modules.items():
        (folder / f"{module}.py").write_text(textwrap.dedent(text))


def test_a_reexporting_package_imports_a_submodule_when_its_name_is_used(tmp_path: Path) -> None:
    _package(
        tmp_path,
        "pkg_on_use",
        '"""doc"""\nfrom __future__ import annotations\nfrom .a import A as A\nfrom .b import B as Bee, C\n',
        a="A = 'a'\n",
        b="B = 'b'\nC = 'c'\n",
    )
    shown = _run(
        """
        import json, sys
        from tracejudge.judge._reexports import reexports_on_use
        with reexports_on_use("pkg_on_use"):
            import pkg_on_use
        before = "pkg_on_use.b" in sys.modules
        from pkg_on_use import Bee
        print(json.dumps([before, Bee, pkg_on_use.C, "pkg_on_use.a" in sys.modules, pkg_on_use.b.B,
                          sorted(n for n in dir(pkg_on_use) if not n.startswith("_")),
                          hasattr(pkg_on_use, "missing")]))
        """,
        path=tmp_path,
    )
    names = ["A", "Bee", "C", "a", "annotations", "b"]
    assert json.loads(shown) == [False, "b", "c", False, "b", names, False]


def test_a_star_import_takes_every_name_the_eager_import_binds(tmp_path: Path) -> None:
    _package(tmp_path, "pkg_star", "from .a import A as A\nfrom .b import B\n", a="A = 'a'\n", b="B = 'b'\n")
    shown = _run(
        """
        import json
        from tracejudge.judge._reexports import reexports_on_use
        with reexports_on_use("pkg_star", "openai.types"):
            import openai
            import pkg_star
        from pkg_star import *
        from openai.types.chat import *
        print(json.dumps([A, B, sorted(n for n in ("a", "b") if n in globals()), ChatCompletion.__name__]))
        """,
        path=tmp_path,
    )
    assert json.loads(shown) == ["a", "b", ["a", "b"], "ChatCompletion"]


def test_a_package_doing_more_than_reexport_is_imported_as_usual(tmp_path: Path) -> None:
    _package(tmp_path, "pkg_busy", "from .a import A as A\nLOADED = True\n", a="A = 'a'\n")
    shown = _run(
        """
        import sys
        from tracejudge.judge._reexports import reexports_on_use
        with reexports_on_use("pkg_busy"):
            import pkg_busy
        print(pkg_busy.LOADED and "pkg_busy.a" in sys.modules)
        """,
        path=tmp_path,
    )
    assert shown == "True"


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("from .a import A as A\nfrom .b.c import D\n", Reexports({"A": ("a", "A"), "D": ("b.c", "D")})),
        ('"""doc"""\nfrom __future__ import annotations\n', Reexports({}, (("annotations", "annotations"),))),
        ("from .a import *\n", None),
        ("from ..a import A\n", None),
        ("from os import path\n", None),
        ("import os\n", None),
        ("from .a import A\nif True:\n    pass\n", None),
        ("from .a import a\n", None),  # the name is also the submodule's
        ("from .a import (\n", None),
    ],
)
def test_what_counts_as_only_reexporting(source: str, names: Reexports | None) -> None:
    assert reexports(source.encode()) == names


def test_the_finder_is_gone_after_the_block() -> None:
    before = list(sys.meta_path)
    with reexports_on_use("no_such_package_here"):
        assert len(sys.meta_path) == len(before) + 1
    assert sys.meta_path == before
