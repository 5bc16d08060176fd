"""The one redactor: what it removes, what it leaves alone, idempotence, and the places it is applied
(errors, write failures, log records, streams, click's own errors)."""

from __future__ import annotations

import base64
import io
import logging

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tracejudge import InputError, redact, redact_data
from tracejudge._redact import MASK, RedactingStream, install_log_redaction, secret_values
from tracejudge.cli import cli
from tracejudge.write import WriteFailure

PUBLIC = "pk-lf-2b7c9e10-aa41"
SECRET = "sk-lf-5d0f3a88-c9e2"
ENV = {
    "LANGFUSE_PUBLIC_KEY": PUBLIC,
    "LANGFUSE_SECRET_KEY": SECRET,
    "PHOENIX_API_KEY": "phxkey0123456789",
    "OPENAI_API_KEY": "plainkeywithoutshape42",
    "TRACEJUDGE_SERVE_TOKEN": "serve-token-9931",
    "MY_SERVICE_PASSWORD": "hunter2hunter2",
    "HOME": "/root",  # not a secret: never replaced
    "SHORT_TOKEN": "abc",  # too short to replace everywhere
}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (f"authorization: Basic {b64(PUBLIC + ':' + SECRET)}", b64(PUBLIC + ":" + SECRET)),
        (f"echoed {b64(PUBLIC + ':' + SECRET)} alone", b64(PUBLIC + ":" + SECRET)),
        (f"the secret in base64 {b64(SECRET)}", b64(SECRET)),
        ("Authorization: Bearer phxkey0123456789", "phxkey0123456789"),
        ("key plainkeywithoutshape42 echoed", "plainkeywithoutshape42"),
        ("token serve-token-9931", "serve-token-9931"),
        ("pw hunter2hunter2", "hunter2hunter2"),
        ("url-encoded sk-lf-5d0f3a88-c9e2", SECRET),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlMTIz", "eyJhbGciOiJIUzI1NiJ9"),
        ("x-api-key: Zm9vYmFyYmF6cXV4", "Zm9vYmFyYmF6cXV4"),
        ('{"api_key": "s3cr3t-v4lue"}', "s3cr3t-v4lue"),
        ("password=correcthorse", "correcthorse"),
        ("Authorization: Token 0a1b2c3d4e5f", "0a1b2c3d4e5f"),
        ("other key sk-proj-AbCdEfGhIjKlMnOpQrSt", "AbCdEfGhIjKlMnOpQrSt"),
        ("github ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_0123456789abcdefghij"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
        ("postgresql://judge:pa55word@db:5432/tj", "pa55word"),
        ("https://api.example.com/v1?api_key=qwerty12345&page=2", "qwerty12345"),
        ("pk-lf-0000aaaa-1111 from another project", "pk-lf-0000aaaa-1111"),
    ],
)
def test_removes(text: str, gone: str) -> None:
    out = redact(text, ENV)
    assert gone not in out
    assert MASK in out


@pytest.mark.parametrize(
    "text",
    [
        "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
        "The prepayment cap is 50,000 RMB; total $1,234.56 (cost $0.0123)",
        "judge calls 12, cache hits 3, tokens 1200+340, p95 412 ms",
        "a basic retrieval pipeline; the bearer of the ticket",
        "2026-03-01T09:30:00Z to 2026-03-02",
        "/work/examples/procurement/tickets/EXP-311.yaml: line 4: kind",
        "export LANGFUSE_SECRET_KEY=sk-lf-… and LANGFUSE_PUBLIC_KEY=pk-lf-…",
        "check that LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY belong to the project",
        "run-20260301T093000-1a2b3c4d rubric restaurant-assistant v3",
        "http://127.0.0.1:6006/v1/projects/default/spans?limit=1000",
        "sqlite:///.tracejudge/tracejudge.db",
        "HOME is /root and SHORT_TOKEN is abc",
        "",
    ],
)
def test_leaves_ordinary_text_alone(text: str) -> None:
    assert redact(text, ENV) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789abcdef .,:;$+-/=_()[]{}\"'\n", max_size=120))
def test_hex_numbers_and_punctuation_are_never_touched(text: str) -> None:
    assert redact(text, {}) == text


_PIECES = st.sampled_from(
    [
        "authorization: ",
        "Basic ",
        "Bearer ",
        b64(f"{PUBLIC}:{SECRET}"),
        SECRET,
        PUBLIC,
        "api_key=",
        "password: ",
        '"',
        "https://u:",
        "@host/",
        "?token=",
        " ",
        "…",
        "[redacted]",
        "4bf92f3577b34da6",
        "sk-proj-",
        "AbCdEfGh12345678",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_idempotent_and_nothing_of_the_secret_left(text: str) -> None:
    once = redact(text, ENV)
    assert redact(once, ENV) == once
    assert SECRET not in once
    assert b64(f"{PUBLIC}:{SECRET}") not in once


def test_secret_values_cover_the_forms_credentials_travel_in() -> None:
    values = secret_values(ENV)
    assert SECRET in values
    assert b64(f"{PUBLIC}:{SECRET}") in values
    assert b64(SECRET) in values
    assert "/root" not in values
    assert "abc" not in values
    assert values == sorted(values, key=len, reverse=True)


def test_redact_data_walks_keys_and_values() -> None:
    data = {"reason": f"echo {SECRET}", SECRET: [1, 2.5, None, True, ("Bearer phxkey0123456789",)]}
    out = redact_data(data, ENV)
    assert out == {"reason": f"echo {MASK}", MASK: [1, 2.5, None, True, [f"Bearer {MASK}"]]}


_TEXTS = st.lists(
    _PIECES | st.text(max_size=8) | st.sampled_from(["KEY", "Token=", "PassWord", "ſecret"]), max_size=8
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TEXTS, max_size=6))
def test_redact_data_redacts_each_string_as_redact_does(texts: list[str]) -> None:
    # redact_data skips a string without a cue or a secret after one scan and remembers short
    # strings: each string must still come out exactly as redact gives it, repeated or not.
    data = {"items": [{t: t} for t in texts + texts], "tail": texts}
    out = redact_data(data, ENV)
    assert out["tail"] == [redact(t, ENV) for t in texts]
    assert out["items"] == [{redact(t, ENV): redact(t, ENV)} for t in texts + texts]


def test_errors_and_write_failures_are_redacted_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    err = InputError(f"backend said {SECRET}", hint=f"retry with {SECRET}")
    assert SECRET not in str(err)
    assert SECRET not in err.message
    assert err.hint is not None
    assert SECRET not in err.hint
    failure = WriteFailure(key="k", reason=f"Basic {b64('pk:' + SECRET)}")
    assert failure.reason == f"Basic {MASK}"


def test_log_records_are_redacted_as_they_are_made(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    install_log_redaction()
    install_log_redaction()  # once only: a second call does not wrap again
    log = logging.getLogger("tracejudge.test")
    with caplog.at_level(logging.INFO):
        log.warning("Langfuse: %s", f"deprecated; your key {SECRET}")
        try:
            raise ValueError(f"boom {SECRET}")
        except ValueError:
            log.exception("failed")
    assert "your key [redacted]" in caplog.text
    assert "boom [redacted]" in caplog.text
    assert SECRET not in caplog.text


def test_the_stream_redacts_and_is_otherwise_its_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    target = io.StringIO()
    stream = RedactingStream(lambda: target)
    assert stream.write(f"a {SECRET} b") == len(f"a {SECRET} b")
    stream.flush()
    assert target.getvalue() == f"a {MASK} b"
    assert stream.isatty() is False
    assert stream.getvalue() == target.getvalue()  # anything else is the target's


def test_click_errors_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A key pasted where a target goes comes back in click's "not one of" message.
    key = "sk-proj-PastedByMistake0123456789"
    result = CliRunner().invoke(cli, ["score", "--rubric", "r.yaml", "--write-back", key])
    assert result.exit_code == 2
    assert "is not one of" in result.output
    assert key not in result.output
    assert MASK in result.output


def test_an_unexpected_traceback_is_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracejudge.cli import redacted_excepthook

    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    try:
        raise RuntimeError(f"a bug quoting the request: Authorization: Basic {b64('pk:' + SECRET)}")
    except RuntimeError as exc:
        redacted_excepthook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError: a bug quoting the request: Authorization: Basic [redacted]" in err
    assert SECRET not in err
    assert b64(SECRET) not in err


def _pieces(secret: str, n: int = 8) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(alphabet="ab =:\"'/", max_size=30),
    after=st.text(alphabet="ab =:\"'/", max_size=30),
    cut=st.integers(min_value=0, max_value=90),
)
def test_a_text_cut_through_a_configured_secret_shows_no_piece_of_it(
    before: str, after: str, cut: int
) -> None:
    # Triage's evidence excerpts and other displays cut a long text and mark the cut with "…":
    # what the cut leaves of a secret matches no whole value, yet must not reach the output.
    secret = ENV["OPENAI_API_KEY"]
    text = f"{before}{secret}{after}"
    for shown in (text[:cut] + "…", "…" + text[cut:], "…" + text[cut : cut + 20] + "…"):
        out = redact(shown, ENV)
        assert not any(piece in out for piece in _pieces(secret)), (shown, out)


def test_triage_excerpts_cut_through_a_secret_show_no_piece_of_it() -> None:
    from tracejudge.localize._retrieved import _short
    from tracejudge.localize._text import _excerpt

    secret = ENV["OPENAI_API_KEY"]
    for shift in range(40):
        doc = "x " * (70 + shift // 2) + ("y" * (shift % 2)) + secret + " tail of the document " * 20
        start = doc.index(secret)
        for shown in (_short(doc, 160), _excerpt(doc, start + 5, start + 10, pad=8, limit=20)):
            out = redact(shown, ENV)
            assert not any(piece in out for piece in _pieces(secret)), (shown, out)
    # Ordinary text beside a cut is left as it is.
    assert (
        redact("the prepayment shall not exceed 30,000 RMB…", ENV)
        == "the prepayment shall not exceed 30,000 RMB…"
    )
