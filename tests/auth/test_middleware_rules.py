"""The HTTP gate on its own: which paths need a credential and what the app then sees."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from kandev.auth.identity import SYNTHETIC_IDENTITY, Identity, current_identity
from kandev.auth.middleware import AuthMiddleware, is_protected

COOKIE_USER = Identity(user_id="u-cookie", session_id="s1")
PAT_USER = Identity(user_id="u-pat", token_id="t1")


class FakeAuth:
    """Stands in for AuthService: one good cookie value and one good PAT."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls: list[str] = []

    async def current_mode(self) -> str:
        self.calls.append("mode")
        return self.mode

    async def resolve_session_token(self, raw: str, client_ip: str = "") -> Identity | None:
        self.calls.append(f"cookie:{raw}")
        return COOKIE_USER if raw == "good-cookie" else None

    async def resolve_bearer(self, raw: str) -> Identity | None:
        self.calls.append(f"bearer:{raw}")
        return PAT_USER if raw == "kandev_pat_good" else None


async def echo_identity(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app answering with the identity it sees in the contextvar."""
    identity = current_identity()
    body = b"none" if identity is None else identity.user_id.encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def client(mode: str) -> tuple[httpx.AsyncClient, FakeAuth]:
    fake = FakeAuth(mode)
    app = AuthMiddleware(echo_identity, auth_service=fake)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://testserver"), fake


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/health"),
        ("GET", "/api/v1/auth/me"),
        ("POST", "/api/v1/auth/login"),
        ("POST", "/api/v1/auth/setup"),
        ("GET", "/"),
        ("GET", "/tasks/123"),
        ("GET", "/static/app.js"),
        ("POST", "/mcp"),
        ("POST", "/agent/mcp"),
        ("GET", "/apiary"),
    ],
)
def test_public_paths(method: str, path: str) -> None:
    assert not is_protected(method, path)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/auth/tokens"),
        ("POST", "/api/v1/auth/logout"),
        ("POST", "/api/v1/auth/me"),  # only GET /me is public
        ("GET", "/api/v1/auth/login"),  # only POST /login is public
        ("GET", "/api/v1/workspaces"),
        ("POST", "/api/v1/users"),
        ("GET", "/api"),
        ("GET", "//api/v1/workspaces"),
        ("GET", "/api/v1/auth/me/"),
    ],
)
def test_protected_paths(method: str, path: str) -> None:
    assert is_protected(method, path)


async def test_disabled_mode_is_synthetic_everywhere() -> None:
    http, fake = client("disabled")
    async with http:
        for path in ("/api/v1/workspaces", "/"):
            response = await http.get(path, headers={"Authorization": "Bearer junk"})
            assert response.status_code == 200
            assert response.text == SYNTHETIC_IDENTITY.user_id
    assert fake.calls == []  # no credential lookups while auth is off


@pytest.mark.parametrize("mode", ["disabled", "enabled"])
async def test_mcp_endpoints_are_left_to_their_own_gate(mode: str) -> None:
    http, fake = client(mode)
    async with http:
        for path in ("/mcp", "/mcp/", "/agent/mcp/", "//agent/mcp"):
            response = await http.get(path, headers={"Authorization": "Bearer kandev_pat_x"})
            assert response.status_code == 200, path
            assert response.text == "none", path  # no identity installed here
    assert fake.calls == []  # and no second token lookup


async def test_setup_mode_is_rechecked_each_request_enabled_never() -> None:
    http, fake = client("setup")
    async with http:
        await http.get("/api/v1/auth/me")
        await http.get("/")
        assert fake.calls.count("mode") == 2
        fake.mode = "enabled"
        await http.get("/api/v1/auth/me")
    assert fake.calls.count("mode") == 2


@pytest.mark.parametrize("mode", ["setup", "enabled"])
async def test_no_credential_on_protected_route_is_401(mode: str) -> None:
    http, _ = client(mode)
    async with http:
        response = await http.get("/api/v1/auth/tokens")
    assert response.status_code == 401
    assert response.json() == {"error": "authentication required"}
    assert response.headers["www-authenticate"] == "Bearer"


async def test_public_paths_pass_without_identity() -> None:
    http, _ = client("enabled")
    async with http:
        for method, path in (
            ("GET", "/api/v1/auth/me"),
            ("POST", "/api/v1/auth/login"),
            ("GET", "/health"),
            ("GET", "/board"),
            ("POST", "/mcp"),
        ):
            response = await http.request(method, path)
            assert (response.status_code, response.text) == (200, "none"), path


async def test_cookie_then_bearer() -> None:
    http, fake = client("enabled")
    async with http:
        response = await http.get(
            "/api/v1/x",
            headers={
                "Cookie": "kandev_session=good-cookie",
                "Authorization": "Bearer kandev_pat_good",
            },
        )
        assert response.text == "u-cookie"
        assert fake.calls == ["cookie:good-cookie"]  # the bearer is not even looked at
        response = await http.get(
            "/api/v1/x",
            headers={"Cookie": "kandev_session=stale", "Authorization": "bearer kandev_pat_good"},
        )
        assert response.text == "u-pat"


async def test_invalid_credential_is_401_on_protected_and_anonymous_on_public() -> None:
    http, _ = client("enabled")
    async with http:
        for kwargs in (
            {"headers": {"Cookie": "kandev_session=expired"}},
            {"headers": {"Authorization": "Bearer kandev_pat_revoked"}},
            {"headers": {"Authorization": "Basic dXNlcjpwYXNz"}},
        ):
            protected = await http.get("/api/v1/workspaces", **kwargs)
            assert protected.status_code == 401
            assert protected.json() == {"error": "invalid or expired credentials"}
            assert protected.headers["www-authenticate"] == "Bearer"
            public = await http.get("/api/v1/auth/me", **kwargs)
            assert (public.status_code, public.text) == (200, "none")


async def test_identity_does_not_leak_between_requests() -> None:
    http, _ = client("enabled")
    async with http:
        await http.get("/api/v1/x", headers={"Cookie": "kandev_session=good-cookie"})
        assert (await http.get("/board")).text == "none"
    assert current_identity() is None


async def test_lifespan_scope_passes_untouched() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    fake = FakeAuth("enabled")
    middleware = AuthMiddleware(app, auth_service=fake)  # type: ignore[arg-type]
    await middleware({"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    assert seen == ["lifespan"] and fake.calls == []
