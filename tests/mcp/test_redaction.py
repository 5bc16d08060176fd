"""What the MCP server answers passes the one redactor, as the CLI's ``--json`` does."""

from __future__ import annotations

import base64

import pytest

from tracejudge.mcp._server import paged_result

SECRET = "sk-lf-5d0f3a88-c9e2"


def test_a_result_carrying_a_secret_is_redacted_in_text_and_structure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    basic = base64.b64encode(f"pk-lf-x:{SECRET}".encode()).decode()
    data = {"write_back": {"failed": [{"reason": f"echo: authorization: Basic {basic}"}]}, "n": 3}
    result = paged_result(data, None, 10_000)
    text = "".join(c.text for c in result.content)
    assert SECRET not in text
    assert basic not in text
    assert "authorization: Basic [redacted]" in text
    assert result.structured_content == {
        "write_back": {"failed": [{"reason": "echo: authorization: Basic [redacted]"}]},
        "n": 3,
    }
    # Paged results are cut from the redacted text.
    paged = paged_result({"reason": f"{SECRET} " * 40}, None, 100)
    assert SECRET not in "".join(c.text for c in paged.content)
