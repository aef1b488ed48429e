"""JSON 500s, Last-Event-ID bounds, and the API schema behind auth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from kandev.errors import ServerBusy
from tests.perimeter.conftest import ADMIN

INTERNAL = {"error": "internal error"}


async def test_unhandled_error_in_a_route_is_a_json_500(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient], caplog: Any
) -> None:
    server = start()
    app = server.server.config.app

    async def explode() -> None:
        raise RuntimeError("boom in a route")

    app.add_api_route("/api/v1/test-explode", explode, methods=["GET", "POST"])
    client = http(server.url)
    with caplog.at_level("ERROR"):
        for method in ("GET", "POST"):
            r = await client.request(method, "/api/v1/test-explode")
            assert (r.status_code, r.json()) == (500, INTERNAL), method
            assert r.headers["content-type"] == "application/json"
    assert "boom in a route" in caplog.text  # the traceback is logged, not sent
    assert "boom" not in r.text
    assert (await client.get("/health")).status_code == 200


async def test_unhandled_error_in_the_middleware_stack_is_a_json_500(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient], caplog: Any
) -> None:
    server = start(auth=True)

    async def broken_lookup(raw: str) -> None:
        raise RuntimeError("credential store unavailable")

    server.services.auth.resolve_bearer = broken_lookup  # runs inside AuthMiddleware
    client = http(server.url)
    with caplog.at_level("ERROR"):
        r = await client.get("/api/v1/workspaces", headers={"Authorization": "Bearer x"})
    assert (r.status_code, r.json()) == (500, INTERNAL)
    assert "credential store unavailable" in caplog.text


async def test_a_busy_database_in_the_middleware_stack_is_a_503_to_retry(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    """A full database queue met by the auth middleware's lookup (before any route runs)
    answers like the routes do: 503 with Retry-After, not a 500."""
    server = start(auth=True)

    async def queued_too_long(raw: str) -> None:
        raise ServerBusy("the database is busy; retry shortly", retry_after_seconds=2)

    server.services.auth.resolve_bearer = queued_too_long  # runs inside AuthMiddleware
    r = await http(server.url).get("/api/v1/workspaces", headers={"Authorization": "Bearer x"})
    assert (r.status_code, r.json()) == (503, {"error": "the database is busy; retry shortly"})
    assert r.headers["retry-after"] == "2"


async def test_bad_last_event_id_is_a_400(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    client = http(start().url)
    # "²" is a digit to str.isdigit (header bytes are read as latin-1) but not to int().
    for value in ("9" * 5000, "9" * 20, str(2**63), "-1", "1e3", "\xb2", "12 34", "x"):
        r = await client.get("/api/v1/events", headers={"Last-Event-ID": value.encode("latin-1")})
        assert (r.status_code, r.json()) == (400, {"error": "Last-Event-ID: must be an event id"})
    # The largest int64 is still an event id (nothing newer: the stream just starts).
    async with client.stream(
        "GET", "/api/v1/events", headers={"Last-Event-ID": str(2**63 - 1)}
    ) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            assert line.startswith(": connected")
            break


async def test_openapi_follows_auth_and_docs_are_not_served(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient]
) -> None:
    off = http(start().url)
    r = await off.get("/openapi.json")
    assert r.status_code == 200 and r.json()["info"]["title"] == "Kandev"
    for path in ("/docs", "/redoc"):
        assert (await off.get(path)).status_code == 404  # they would load JS from a CDN

    on = http(start(auth=True).url)
    r = await on.get("/openapi.json")
    assert (r.status_code, r.json()) == (401, {"error": "authentication required"})
    assert r.headers["www-authenticate"] == "Bearer"
    assert (await on.post("/api/v1/auth/setup", json=ADMIN)).status_code == 200
    r = await on.get("/openapi.json")  # with the session cookie
    assert r.status_code == 200 and "/api/v1/workspaces" in r.json()["paths"]
