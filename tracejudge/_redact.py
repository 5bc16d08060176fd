"""The one redactor: secrets and tokens out of every message, failure reason, log line and JSON output.

Like logfire's scrubber it works on text at the edges, whatever produced it — a backend echoing the
request's ``Authorization`` in an error body, a proxy page, a URL with a key in it — so nothing has
to remember to be careful. What it removes:

- the values of the secrets configured in the environment (``LANGFUSE_SECRET_KEY`` and
  ``LANGFUSE_PUBLIC_KEY``, ``PHOENIX_API_KEY``, ``OPENAI_API_KEY``, ``TRACEJUDGE_*_TOKEN`` and every
  variable named like a key, token, secret or password), with the forms they travel in: base64 of the
  value and of Langfuse's ``public:secret`` Basic pair, URL-encoded;
- ``Authorization``-style credentials: ``Basic …``, ``Bearer …``, ``Token …``;
- values of secret-named fields (``"api_key": "…"``, ``password=…``, ``x-api-key: …``);
- key-shaped text: Langfuse ``pk-lf-``/``sk-lf-`` keys, ``sk-…`` API keys, GitHub, Slack, AWS and
  Google keys, JWTs;
- credentials in URLs: the password of ``scheme://user:password@host`` and secret query parameters.

Redaction is idempotent and leaves ordinary text — trace ids, amounts, paths, prose — as it was.
:func:`redact` takes text, :func:`redact_data` JSON-like data; at the CLI edge,
:func:`install_log_redaction` makes every log record redacted as it is made, and the consoles write
through :class:`RedactingStream`. Exceptions (:class:`~tracejudge.TracejudgeError`) and write
failures are redacted when they are made, so that a message cut short never ends in half a secret.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, cast
from urllib.parse import quote

__all__ = [
    "MASK",
    "RedactingStream",
    "install_log_redaction",
    "redact",
    "redact_data",
    "secret_values",
    "stderr",
    "stdout",
]

MASK = "[redacted]"
"""What a removed secret becomes."""

# Variables whose value is a secret wherever it shows up.
_KNOWN_SECRETS = (
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_PUBLIC_KEY",
    "PHOENIX_API_KEY",
    "OPENAI_API_KEY",
    "TRACEJUDGE_OTLP_TOKEN",
    "TRACEJUDGE_SERVE_TOKEN",
)
# Any other variable named like one (AZURE_OPENAI_API_KEY, TRACEJUDGE_FOO_TOKEN, PGPASSWORD, ...).
_SECRET_NAME = re.compile(
    r"(?i)(?:^|_)(?:API_?KEY|SECRET(?:_ACCESS)?(?:_KEY)?|TOKEN|PASSWORD|PASSWD|PRIVATE_KEY|ACCESS_KEY"
    r"|AUTH|CREDENTIALS?)$|^PGPASSWORD$"
)
# Shorter values are too likely to be ordinary words or numbers to replace everywhere.
_MIN_SECRET = 6

# ``Basic``/``Bearer`` credentials. The token must look like one (a digit, mixed case, or base64
# punctuation) so that prose such as "basic retrieval" stays as it is.
_CREDENTIAL_SHAPE = (
    r"(?=[A-Za-z0-9._~+/=-]*(?:[0-9+/=]|[a-z][A-Za-z0-9._~+/=-]*[A-Z]|[A-Z][A-Za-z0-9._~+/=-]*[a-z]))"
)
_SCHEME = re.compile(rf"(\b(?i:basic|bearer)\s+){_CREDENTIAL_SHAPE}[A-Za-z0-9._~+/=-]{{8,}}")
# ``"api_key": "…"``, ``password=…``, ``x-api-key: …``, ``Authorization: Token …``: the value of a
# secret-named field. A value followed by "…" is a placeholder in a hint (``sk-lf-…``), not a key.
_KEYED = re.compile(
    r"""(?ix)
    (  # the key's name from its secret-sounding part on (what precedes stays as it is)
      (?:secret|password|passwd|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token
        |private[_-]?key|x-api-key|authorization|credentials?)
    [\w-]*["']?\s*[:=]\s*["']?
    (?:(?:basic|bearer|token|digest)\s+)?)
    (?!\[redacted\])(?!(?:basic|bearer|token|digest)\b)
    (?>[^\s"',;&}\]…]{6,})(?!…)
    """
)
_SHAPES = re.compile(
    r"\b(?:sk|pk)-lf-[A-Za-z0-9-]{6,}"  # Langfuse key pair
    r"|\bsk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_-]{16,}"  # OpenAI-style API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bAIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWTs (Phoenix keys are JWTs)
)
# ``scheme://user:password@host``: the password goes, the user stays (it says which account); one
# masked already (``***``, as a URL shown by ``doctor``) stays as it is.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)(?!\[redacted\]@|\*+@)[^/\s@]+(@)")
_URL_PARAM = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access_token|secret|password|sig|signature|auth|code)=)"
    r"(?!\[redacted\])[^&\s#\"']+"
)


def _b64_forms(value: str) -> set[str]:
    raw = value.encode()
    std = base64.b64encode(raw).decode()
    url = base64.urlsafe_b64encode(raw).decode()
    return {std, std.rstrip("="), url, url.rstrip("=")}


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The configured secrets and the forms they travel in, longest first (so that a secret inside a
    longer one is never left half-replaced)."""
    env = os.environ if env is None else env
    forms = {form for value in _configured_secrets(env) for form in _travel_forms(value)}
    forms |= _langfuse_pair_forms(env)
    return sorted((f for f in forms if len(f) >= _MIN_SECRET), key=len, reverse=True)


def _configured_secrets(env: Mapping[str, str]) -> set[str]:
    """The values of secret-named variables, long enough to be a secret and not the mask itself."""
    names = {n for n in env if n in _KNOWN_SECRETS or _SECRET_NAME.search(n)}
    return {v for n in names if len(v := env[n].strip()) >= _MIN_SECRET and v not in MASK}


def _travel_forms(value: str) -> set[str]:
    """A secret as is, URL-quoted and base64-encoded."""
    return {value, quote(value, safe=""), *_b64_forms(value)}


def _langfuse_pair_forms(env: Mapping[str, str]) -> set[str]:
    """What Langfuse's Basic header carries: base64 of "public:secret"."""
    public, secret = env.get("LANGFUSE_PUBLIC_KEY"), env.get("LANGFUSE_SECRET_KEY")
    return _b64_forms(f"{public}:{secret}") if public and secret else set()


# Each pattern with the words (lower-cased) one of which it needs: a pattern runs only on text
# holding one, so ordinary text costs a few substring checks instead of five regex scans.
_MAX_PASSES = 4
_PASSES: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (_URL_PASSWORD, rf"\1{MASK}\2", ("://",)),
    (_URL_PARAM, rf"\1{MASK}", ("=",)),
    (_SCHEME, rf"\1{MASK}", ("basic", "bearer")),
    (_KEYED, rf"\1{MASK}", ("secret", "passw", "key", "token", "private", "authoriz", "credential")),
    (_SHAPES, MASK, ("sk-", "pk-lf-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "akia", "aiza", "eyj")),
)
# Base64 glued to a replaced secret is the rest of its encoding (``base64("pk:" + secret)`` is
# ``cGs6`` followed by the secret's own base64): it goes with it.
_GLUED = re.compile(r"[A-Za-z0-9+/]*\[redacted\](?:[A-Za-z0-9+/]+=*)?")


# A text cut short for display ends (or starts) with "…": what the cut left of a configured secret
# matches no whole value, so the piece beside the "…" is checked against each secret's start (end).
_CUT = "…"
_MIN_PIECE = 8  # a shorter piece of a secret beside a cut is not told from ordinary text


def _without_head_of(piece: str, secret: str) -> str:
    """``piece`` with its end masked when it is the first 8 or more characters of ``secret``."""
    for k in range(min(len(piece), len(secret) - 1), _MIN_PIECE - 1, -1):
        if piece.endswith(secret[:k]):
            return piece[:-k] + MASK
    return piece


def _without_tail_of(piece: str, secret: str) -> str:
    """``piece`` with its start masked when it is the last 8 or more characters of ``secret``."""
    for k in range(min(len(piece), len(secret) - 1), _MIN_PIECE - 1, -1):
        if piece.startswith(secret[-k:]):
            return MASK + piece[k:]
    return piece


def _mask_cut_pieces(text: str, secrets: Sequence[str]) -> str:
    parts = text.split(_CUT)
    last = len(parts) - 1
    for i, part in enumerate(parts):
        # The word beside each cut: the last of a part before one, the first of a part after one.
        words = re.split(r"(\s+)", part)
        if 0 < i < last and len(words) == 1 and len(part) >= _MIN_PIECE and any(part in s for s in secrets):
            parts[i] = MASK  # a window cut on both sides out of one word: the middle of a secret
            continue
        for secret in secrets:
            if i < last:
                words[-1] = _without_head_of(words[-1], secret)
            if i > 0:
                words[0] = _without_tail_of(words[0], secret)
        parts[i] = "".join(words)
    return _CUT.join(parts)


def _redact(text: str, secrets: Sequence[str]) -> str:
    replaced = False
    for value in secrets:
        if value in text:
            text = text.replace(value, MASK)
            replaced = True
    if secrets and _CUT in text:
        cut = _mask_cut_pieces(text, secrets)
        replaced = replaced or cut != text
        text = cut
    if replaced:
        text = _GLUED.sub(MASK, text)
    # Until nothing changes: one pass's mask can complete another pattern's match (a keyed value
    # inside a URL's userinfo), and redacting twice must give what redacting once gave.
    for _ in range(_MAX_PASSES):
        before = text
        low = text.lower()
        for pattern, replacement, cues in _PASSES:
            if any(cue in low for cue in cues):
                text = pattern.sub(replacement, text)
        if text == before:
            break
    return text


# Any pass's cue, in one scan: text holding none of them (and no configured secret) is what
# :func:`_redact` would give back unchanged, so most strings of a large output cost one search.
_ANY_CUE = re.compile("|".join(re.escape(cue) for _, _, cues in _PASSES for cue in cues))
# Strings up to this long are remembered within one :func:`redact_data` call: keys and short values
# (field names, verdicts, criterion names) repeat in every item of a run's output.
_MEMO_MAX = 200


class _Redactor:
    """:func:`_redact` with one set of secrets, for many strings: a string with no cue and no secret
    in it is returned as it is after one scan of each, and short strings are redacted once."""

    def __init__(self, secrets: list[str]) -> None:
        self._secrets = secrets
        self._secret = re.compile("|".join(map(re.escape, secrets))) if secrets else None
        self._memo: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        if len(text) < _MIN_SECRET:  # nothing shorter than the shortest secret can hold one
            return text
        if len(text) > _MEMO_MAX:
            return self._redact(text)
        done = self._memo.get(text)
        if done is None:
            done = self._memo[text] = self._redact(text)
        return done

    def _redact(self, text: str) -> str:
        if (
            _ANY_CUE.search(text.lower()) is None
            and (self._secret is None or self._secret.search(text) is None)
            and (not self._secrets or _CUT not in text)
        ):
            return text
        return _redact(text, self._secrets)


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret it holds replaced by ``[redacted]``; see the module's docstring.
    ``env`` overrides where configured secrets are read (default: the process environment)."""
    return _redact(text, secret_values(env)) if len(text) >= _MIN_SECRET else text


def redact_data(data: Any, env: Mapping[str, str] | None = None) -> Any:
    """JSON-like data (dicts, lists, tuples, strings, scalars) with every string — keys too —
    redacted; tuples come back as lists, as JSON has them."""
    one = _Redactor(secret_values(env))

    def walk(value: Any) -> Any:
        # Plain dicts, lists and strings first: a run's output holds a few hundred thousand values.
        if isinstance(value, str):
            return one(value)
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v) for v in value]
        if isinstance(value, Mapping):
            return {walk(k): walk(v) for k, v in value.items()}
        return value

    return walk(data)


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """The record with its message (arguments merged in) and exception text redacted, in place."""
    try:
        message = record.getMessage()
    except (TypeError, ValueError):
        message = str(record.msg)
    record.msg, record.args = redact(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    return record


_installed: list[Callable[..., logging.LogRecord]] = []


def install_log_redaction() -> None:
    """Make every log record — of any logger, whatever handler shows it — redacted as it is made.
    Installed once at the CLI edge; calling it again does nothing."""
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redact_record(previous(*args, **kwargs))

    _installed.append(factory)
    logging.setLogRecordFactory(factory)


class RedactingStream:
    """A text stream that redacts what is written and passes it to ``target()`` — resolved on every
    write, so it follows ``sys.stdout`` when a test runner or the user swaps it. Everything else
    (``isatty``, ``encoding``, ``fileno``, ...) is the target's."""

    def __init__(self, target: Callable[[], Any]) -> None:
        self._target = target

    def write(self, text: str) -> int:
        stream = self._target()
        if isinstance(text, str):
            stream.write(redact(text))
        else:  # bytes: let the target refuse or take them as it would
            stream.write(text)
        # What the caller gave was consumed, whatever length the redacted text has.
        return len(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


def stdout() -> IO[str]:
    """``sys.stdout``, redacted."""
    return cast(IO[str], RedactingStream(lambda: sys.stdout))


def stderr() -> IO[str]:
    """``sys.stderr``, redacted."""
    return cast(IO[str], RedactingStream(lambda: sys.stderr))
