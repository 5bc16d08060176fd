"""The Model Context Protocol server (DESIGN 5.9): tracejudge's triage for coding agents.

``build_server`` needs the ``mcp`` SDK (``pip install 'tracejudge[mcp]'``); ``Toolbox`` — what each
tool computes, the CLI's ``--json`` — does not."""

from tracejudge.mcp._server import (
    DEFAULT_PAGE_CHARS,
    McpOptions,
    build_server,
    guarded_app,
    paged_result,
    run_http,
    run_stdio,
)
from tracejudge.mcp._tools import Toolbox

__all__ = [
    "DEFAULT_PAGE_CHARS",
    "McpOptions",
    "Toolbox",
    "build_server",
    "guarded_app",
    "paged_result",
    "run_http",
    "run_stdio",
]
