"""The report in real headless Chromium (Debian's ``chromium``), driven over the DevTools protocol on a
pipe: the page loads nothing but itself, a screenshot is taken, and script payloads in traces, tickets
and judge text change nothing in the page."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tracejudge.report import CSP, build_report, render_html, write_report
from tracejudge.store import SqliteStore

ROOT = Path(__file__).resolve().parents[2]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Debian's chromium is required (.ci/run installs it: apt-get install chromium)"
    return path


class Browser:
    """Chromium with ``--remote-debugging-pipe``: CDP messages are NUL-terminated JSON on fds 3 and 4."""

    def __init__(self, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:
            # Copy first: a pipe end may itself sit on fd 3 or 4.
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-default-apps",
                "--disable-extensions",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            close_fds=False,  # subprocess would close fds 3 and 4 after preexec_fn set them up
            preexec_fn=fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return dict(json.loads(raw))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for_session(self, method: str, session: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e.get("method") == method and e.get("sessionId") == session:
                    return e
            self.events.append(self._read())
        raise TimeoutError(method)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        os.close(self._to_child)
        os.close(self._from_child)


class Page:
    def __init__(self, browser: Browser, url: str, width: int = 1280, height: int = 900) -> None:
        self.b = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Network", "Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self.send("Page.navigate", {"url": url})
        browser.wait_for_session("Page.loadEventFired", self.session)
        # Let anything the page might start late (timers, lazy loads) show up before we look.
        self.eval("new Promise(r => setTimeout(r, 300))", await_promise=True)

    def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.b.send(method, params, self.session)

    def eval(self, expr: str, *, await_promise: bool = False) -> Any:
        res = self.send(
            "Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": await_promise}
        )
        assert "exceptionDetails" not in res, res
        return res["result"].get("value")

    def events(self, method: str) -> list[dict[str, Any]]:
        return [e for e in self.b.events if e.get("method") == method and e.get("sessionId") == self.session]

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(
            self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
        )
        path.write_bytes(data)
        return data


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    b = Browser(tmp_path / "profile")
    yield b
    b.close()


def _requests(page: Page) -> list[str]:
    return [e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")]


def test_report_renders_in_chromium_without_any_request(
    browser: Browser, populated: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    db, filled = populated
    out = tmp_path / "report.html"
    store = SqliteStore(db)
    write_report(store, out, suites=[ROOT / "examples" / "procurement" / "suite"], langfuse_url="")
    store.close()
    html = out.read_text()
    assert 'http-equiv="Content-Security-Policy"' in html
    assert "<script" not in html.lower()
    # Only the SVG namespace and in-page anchors: nothing the page could load.
    urls = set(re.findall(r"(?:https?:)?//[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls

    page = Page(browser, out.as_uri(), height=1600)
    assert _requests(page) == [out.as_uri()]
    assert page.events("Network.loadingFailed") == []
    assert page.eval("document.querySelector('meta[http-equiv=Content-Security-Policy]').content") == CSP
    assert CSP.startswith("default-src 'none';")
    # Every scenario's ticket is on the page, with its verdict and stage table.
    text = page.eval("document.body.innerText")
    for row in filled["demo"].rows:
        assert row.ticket in text
    assert page.eval("document.querySelectorAll('#triage details').length") == len(filled["demo"].rows)
    assert page.eval("document.querySelectorAll('svg.chart').length") >= 5
    assert "judge-model \u2192 judge-model-2" in text
    assert "rubric v1 \u2192 v2" in text
    assert "Cohen's kappa" in text
    assert page.eval("document.querySelectorAll('#regression table').length") >= 1
    png = page.screenshot(tmp_path / "report.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) > 20_000  # a drawn page, not a blank one


def _render(db: Path, out: Path) -> str:
    store = SqliteStore(db)
    html = render_html(build_report(store, langfuse_url="https://langfuse.example"))
    store.close()
    out.write_text(html)
    return html


def _structure(page: Page) -> Any:
    return page.eval(
        "Array.from(document.querySelectorAll('*')).map(e => e.tagName + '|' +"
        " Array.from(e.attributes).map(a => a.name).sort().join(','))"
    )


def test_script_payloads_in_traces_change_nothing(browser: Browser, tmp_path: Path, helpers: Any) -> None:
    PAYLOADS, fill_hostile = helpers.payloads, helpers.fill_hostile
    hostile_db, benign_db = tmp_path / "hostile.db", tmp_path / "benign.db"
    fill_hostile(hostile_db)
    fill_hostile(benign_db, payloads=tuple(f"benign text {i}" for i in range(len(PAYLOADS))))
    hostile = _render(hostile_db, tmp_path / "hostile.html")
    _render(benign_db, tmp_path / "benign.html")
    for p in PAYLOADS:
        if "<" in p:
            assert p not in hostile
    assert "<script" not in hostile.lower()
    assert "onerror=" not in hostile.lower().replace("onerror=&#34;", "").replace("onerror=&quot;", "")

    bad = Page(browser, (tmp_path / "hostile.html").as_uri())
    good = Page(browser, (tmp_path / "benign.html").as_uri())
    # Same elements and attribute names in the same order: the payloads added no element or handler.
    assert _structure(bad) == _structure(good)
    assert bad.eval("document.scripts.length") == 0
    assert bad.events("Page.javascriptDialogOpening") == []
    assert _requests(bad) == [(tmp_path / "hostile.html").as_uri()]
    hrefs = bad.eval("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    links = [h for h in hrefs if "#" not in h]
    assert set(links) == {"https://langfuse.example/trace/lf-javascript%3Aalert%282%29"}
    # The payloads are shown as text, whole.
    text = bad.eval("document.body.innerText")
    for p in PAYLOADS:
        assert p in text


def test_bidi_overrides_in_traces_are_isolated(browser: Browser, tmp_path: Path, helpers: Any) -> None:
    # U+202E (right-to-left override) in a ticket or evidence would reverse the report's own text
    # after it; each value holding one sits in a <bdi>, which the browser isolates.
    payloads = tuple(f"doc{i}\u202eexe.txt" for i in range(len(helpers.payloads)))
    db = tmp_path / "bidi.db"
    helpers.fill_hostile(db, payloads=payloads)
    _render(db, tmp_path / "bidi.html")
    page = Page(browser, (tmp_path / "bidi.html").as_uri())
    holders = page.eval(
        "(() => { const out = []; const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);"
        " while (w.nextNode()) { const n = w.currentNode; if (n.data.includes('\\u202e')) {"
        " const p = n.parentElement; out.push([p.tagName, getComputedStyle(p).unicodeBidi]); } }"
        " return out; })()"
    )
    assert holders, "the report shows none of the values"
    assert all(tag == "BDI" and bidi == "isolate" for tag, bidi in holders), holders
