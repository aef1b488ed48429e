"""The terminal commands import only what they use (issue 13: the CLI's wall time): `kandev
--help` no HTTP client, event loop, database or server; `questions list` an HTTP client and
Kandev's own MCP calls (kandev.cli_mcp), not the MCP SDK (~0.85 s of imports) nor any of
Kandev's server side (FastAPI, SQLAlchemy, database drivers, templates)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

PROBE = """
import sys
from kandev.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
"""
SERVER_SIDE = {"fastapi", "sqlalchemy", "aiosqlite", "asyncpg", "alembic", "jinja2", "argon2"}


def imported_by(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60
    )
    return set(done.stdout.split())


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_help_imports_no_client_loop_or_server() -> None:
    roots = imported_by("--help")
    assert "typer" in roots  # the probe ran the command
    assert roots.isdisjoint(SERVER_SIDE | {"httpx", "httpx2", "mcp", "asyncio", "pydantic"})


@pytest.mark.parametrize("command", [["questions", "list"], ["permissions", "list"]])
def test_a_listing_imports_an_http_client_and_nothing_of_the_server(command: list[str]) -> None:
    roots = imported_by(*command, "--url", closed_port_url())
    assert "httpx" in roots  # it did try to connect
    assert roots.isdisjoint(SERVER_SIDE | {"mcp", "httpx2"})


def test_a_listing_imports_no_kandev_server_module() -> None:
    probe = PROBE.replace(
        'print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))',
        'print(" ".join(sorted(m for m in sys.modules if m.startswith("kandev"))))',
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "questions", "list", "--url", closed_port_url()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    modules = set(done.stdout.split())
    assert "kandev.cli_questions" in modules
    allowed = ("kandev.cli", "kandev.catalog", "kandev.agents.http_tls")
    extra = {m for m in modules if m != "kandev" and not m.startswith(allowed)}
    assert extra <= {"kandev.agents"}, extra
