"""Body size cap (CONTRACT §8): refused before parsing, without buffering, over real HTTP."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import free_port
from tests.server_process import start_serve, wait_for_health

TOO_LARGE = {"error": "request body too large"}
MIB = 1024 * 1024


def many_objects_json(size: int) -> bytes:
    """A JSON body of `size` bytes that is as expensive as possible to parse: tiny objects."""
    item = b'{"a":0},'
    return b'{"name": "W", "description": [' + item * (size // len(item)) + b"{}]}"


async def chunks(body: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    """Stream `body` without a Content-Length (chunked transfer encoding)."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def vm_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A real `kandev serve` process: (pid, base URL)."""
    port = free_port()
    proc = start_serve(tmp_path / "home", port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc)
        yield proc.pid, url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


async def test_two_mib_body_is_refused_without_growing_the_server(
    serve: tuple[int, str],
) -> None:
    pid, url = serve
    body = many_objects_json(2 * MIB)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        # Warm the route up so first-request allocations don't count.
        assert (await client.post("/api/v1/workspaces", json={"name": "W"})).status_code == 201
        before = vm_rss_kib(pid)
        json_type = {"Content-Type": "application/json"}
        for path in ("/api/v1/workspaces", "/api/v1/auth/login", "/mcp"):
            r = await client.post(path, content=body, headers=json_type)
            assert (r.status_code, r.json()) == (413, TOO_LARGE), path
            r = await client.post(path, content=chunks(body), headers=json_type)
            assert (r.status_code, r.json()) == (413, TOO_LARGE), path
        grown_mib = (vm_rss_kib(pid) - before) / 1024
        assert grown_mib < 50, f"server RSS grew by {grown_mib:.1f} MiB"
        # The connection and the server are still fine.
        r = await client.get("/api/v1/workspaces")
        assert r.status_code == 200 and r.json()["total"] == 1


async def test_declared_oversize_body_is_refused_before_it_is_sent(
    start: Callable[..., Any],
) -> None:
    """A 100 MB login: the 413 comes back after the headers alone, not one body byte read."""
    server = start(auth=True)
    request = (
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"
    )
    async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
        await stream.send(request)
        reply = b""
        with anyio.fail_after(10):
            while b'"}' not in reply:
                reply += await stream.receive()
    assert reply.startswith(b"HTTP/1.1 413"), reply[:100]
    assert reply.endswith(b'{"error": "request body too large"}')


async def test_chunked_body_crossing_the_cap_is_refused(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    server = start(max_body_bytes=4096)
    client = http(server.url)
    small = b'{"name": "W", "description": "' + b"w" * 3000 + b'"}'
    json_type = {"Content-Type": "application/json"}
    r = await client.post("/api/v1/workspaces", content=chunks(small, 512), headers=json_type)
    assert r.status_code == 201, r.text  # under the cap, chunked, is fine
    big = b'{"name": "W", "description": "' + b"w" * 5000 + b'"}'
    r = await client.post("/api/v1/workspaces", content=chunks(big, 512), headers=json_type)
    assert (r.status_code, r.json()) == (413, TOO_LARGE)
    r = await client.post("/api/v1/workspaces", content=big, headers=json_type)
    assert (r.status_code, r.json()) == (413, TOO_LARGE)
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        while sent < 50 * MIB:
            sent += 64 * 1024
            yield b"x" * (64 * 1024)

    r = await client.post("/api/v1/auth/login", content=endless())
    assert (r.status_code, r.json()) == (413, TOO_LARGE)
    assert (await client.get("/api/v1/workspaces")).json()["total"] == 1
