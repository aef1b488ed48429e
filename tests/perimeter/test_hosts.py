"""Host checking (DNS rebinding, CONTRACT §8) over a real uvicorn: every route, before routing."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from tests.perimeter.conftest import ATTACKER_HOST, make_board

HINT = (
    "to serve this host name, start Kandev with --allowed-hosts NAME or set "
    "KANDEV_ALLOWED_HOSTS=NAME (comma-separated names; see docs/security.md)"
)
REFUSED = {"error": "host not allowed", "hint": HINT}
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/workspaces"),
        ("POST", "/api/v1/workspaces"),
        ("GET", "/api/v1/events"),
        ("GET", "/"),  # a page route (or, before the web UI, any non-API path)
        ("GET", "/no/such/page"),
        ("POST", "/mcp"),
        ("POST", "/agent/mcp"),
        ("GET", "/health"),
        ("GET", "/openapi.json"),
    ],
)
async def test_foreign_host_is_refused_on_every_route(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient], method: str, path: str
) -> None:
    client = http(start().url)
    body = MCP_INIT if "mcp" in path else {"name": "W"} if method == "POST" else None
    with anyio.fail_after(10):  # an event stream answered with 200 would never end
        r = await client.request(
            method, path, json=body, headers={"Host": ATTACKER_HOST, **MCP_HEADERS}
        )
    assert r.status_code == 421, r.text
    assert r.json() == REFUSED
    assert r.headers["content-type"] == "application/json"


async def test_loopback_names_pass_on_any_port(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient], caplog: Any
) -> None:
    server = start()
    client = http(server.url)
    for host in ("localhost", "localhost:1234", "127.0.0.1", f"127.0.0.1:{server.port}", "[::1]:9"):
        r = await client.get("/api/v1/workspaces", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)
    with caplog.at_level("WARNING"):
        for host in ("127.0.0.2", "localhost.attacker.example", "127.0.0.1.nip.io", "[::2]", "::1"):
            r = await client.get("/api/v1/workspaces", headers={"Host": host})
            assert r.status_code == 421, (host, r.text)
    # The operator learns which name was refused and how to allow it.
    assert "refused Host '127.0.0.2'" in caplog.text and "--allowed-hosts" in caplog.text


async def test_allowed_hosts_and_public_url_pass(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    server = start(
        allowed_hosts="kandev.internal, board.example.org:8443",
        public_url="https://kandev.example.com",
    )
    client = http(server.url)
    for host in (
        "kandev.internal",
        "KANDEV.internal:8420",
        "board.example.org:8443",
        "kandev.example.com",
        "kandev.example.com:443",
    ):
        r = await client.get("/api/v1/workspaces", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)
        r = await client.post("/mcp", json=MCP_INIT, headers={"Host": host, **MCP_HEADERS})
        assert r.status_code == 200, (host, r.text)
    for host in (
        "board.example.org",
        "board.example.org:80",
        "example.com",
        "evil.kandev.internal",
    ):
        r = await client.get("/api/v1/workspaces", headers={"Host": host})
        assert r.status_code == 421, (host, r.text)


async def test_dns_rebinding_chain_is_refused_at_its_first_step(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    """A page on attacker.example rebinds its name to 127.0.0.1 and, now "same-origin",
    tries to define an agent profile that runs its command, then start it on a task."""
    client = http(start().url)
    board = await make_board(client)
    rebound = {"Host": ATTACKER_HOST, "Origin": f"http://{ATTACKER_HOST}"}
    evil = {"name": "evil", "command": [sys.executable, "-c", "print('pwned')"]}
    r = await client.post("/api/v1/agent-profiles", json=evil, headers=rebound)
    assert (r.status_code, r.json()) == (421, REFUSED)
    # Even without an Origin (a fetch in no-cors mode sends one anyway; belt and braces).
    r = await client.post("/api/v1/agent-profiles", json=evil, headers={"Host": ATTACKER_HOST})
    assert (r.status_code, r.json()) == (421, REFUSED)
    r = await client.post(f"/api/v1/tasks/{board['task']['id']}/sessions", json={}, headers=rebound)
    assert r.status_code == 421
    profiles = (await client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    assert [p["name"] for p in profiles] == ["demo"]
    sessions = (await client.get(f"/api/v1/tasks/{board['task']['id']}/sessions")).json()
    assert sessions["total"] == 0


async def test_missing_or_doubled_host_is_refused(start: Callable[..., Any]) -> None:
    server = start()

    async def raw(request: bytes) -> bytes:
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
            await stream.send(request)
            chunks = []
            try:
                while True:
                    chunks.append(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
            return b"".join(chunks)

    reply = await raw(b"GET /api/v1/workspaces HTTP/1.0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 421"), reply[:100]
    assert reply.endswith(json.dumps(REFUSED).encode())
    reply = await raw(
        b"GET /api/v1/workspaces HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: attacker.example\r\n"
        b"Connection: close\r\n\r\n"
    )
    # h11/httptools may reject two Host headers themselves (400); either way never a 200.
    assert reply.startswith((b"HTTP/1.1 421", b"HTTP/1.1 400")), reply[:100]
