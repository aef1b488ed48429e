"""Origin checking (CSRF, CONTRACT §8) over a real uvicorn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.perimeter.conftest import ADMIN, make_board

REFUSED = {"error": "cross-origin request refused"}


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://attacker.example"},
        {"Origin": "https://attacker.example:8420"},
        {"Origin": "null"},
        {"Origin": "file://"},
        {"Origin": "http://127.0.0.1.attacker.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://localhost:8420", "Sec-Fetch-Site": "cross-site"},
    ],
)
async def test_foreign_origin_is_refused_on_state_changing_methods(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient], headers: dict[str, str]
) -> None:
    client = http(start().url)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        r = await client.request(method, "/api/v1/workspaces", json={"name": "W"}, headers=headers)
        assert (r.status_code, r.json()) == (403, REFUSED), method
    assert (await client.get("/api/v1/workspaces")).json()["total"] == 0


async def test_plain_and_same_origin_requests_pass(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    server = start(public_url="https://kandev.example.com")
    client = http(server.url)
    for headers in (
        {},  # curl, SDKs
        {"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
        {"Origin": f"http://localhost:{server.port}"},
        {"Origin": "https://kandev.example.com", "Host": "kandev.example.com"},
        {"Sec-Fetch-Site": "none"},  # typed into the address bar
    ):
        r = await client.post("/api/v1/workspaces", json={"name": "W"}, headers=headers)
        assert r.status_code == 201, (headers, r.text)
    # Reads are not state-changing: a foreign Origin on GET is left to the browser's CORS.
    r = await client.get("/api/v1/workspaces", headers={"Origin": "http://attacker.example"})
    assert r.status_code == 200
    # One foreign-origin POST now fails, so the check is really on.
    r = await client.post(
        "/api/v1/workspaces", json={"name": "W"}, headers={"Origin": "http://attacker.example"}
    )
    assert r.status_code == 403


async def test_bodyless_cross_site_stop_is_refused(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    client = http(start().url)
    board = await make_board(client)
    r = await client.post(f"/api/v1/tasks/{board['task']['id']}/sessions", json={})
    assert r.status_code == 201, r.text
    session = r.json()
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://attacker.example"}):
        for path in ("stop", "agent-token"):
            r = await client.post(f"/api/v1/sessions/{session['id']}/{path}", headers=headers)
            assert (r.status_code, r.json()) == (403, REFUSED)
    after = (await client.get(f"/api/v1/sessions/{session['id']}")).json()
    assert after["state"] == session["state"]


async def test_bodyless_cross_site_logout_is_refused(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    browser = http(start(auth=True).url)
    assert (await browser.post("/api/v1/auth/setup", json=ADMIN)).status_code == 200
    r = await browser.post("/api/v1/auth/logout", headers={"Sec-Fetch-Site": "cross-site"})
    assert (r.status_code, r.json()) == (403, REFUSED)
    r = await browser.post("/api/v1/auth/logout", headers={"Origin": "null"})
    assert (r.status_code, r.json()) == (403, REFUSED)
    me = (await browser.get("/api/v1/auth/me")).json()
    assert me["authenticated"] is True
    assert (await browser.post("/api/v1/auth/logout")).status_code == 204


async def test_mcp_endpoints_check_origin(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    from tests.perimeter.test_hosts import MCP_HEADERS, MCP_INIT

    server = start()
    client = http(server.url)
    for path in ("/mcp", "/agent/mcp"):
        r = await client.post(
            path, json=MCP_INIT, headers={"Origin": "http://attacker.example", **MCP_HEADERS}
        )
        assert (r.status_code, r.json()) == (403, REFUSED)
    r = await client.post("/mcp", json=MCP_INIT, headers={"Origin": server.url, **MCP_HEADERS})
    assert r.status_code == 200, r.text
