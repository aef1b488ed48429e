"""Identity over real HTTP: a uvicorn on 127.0.0.1, httpx clients, both databases."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from kandev.clock import ManualClock

ADMIN = {"email": "admin@example.com", "password": "admin-password", "display_name": "Admin"}
PAT_RE = re.compile(r"kandev_pat_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def start(
    live_server_factory: Callable[..., Any], database_url: str, clock: ManualClock
) -> Callable[..., str]:
    """Start a server on this test's database and return its base URL."""

    def _start(**settings: Any) -> str:
        return live_server_factory(database_url, clock=clock, **settings).url

    return _start


@pytest.fixture
async def clients() -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """Fresh httpx clients (each with its own cookie jar), closed at the end."""
    made: list[httpx.AsyncClient] = []

    def _make(url: str) -> httpx.AsyncClient:
        made.append(httpx.AsyncClient(base_url=url, timeout=30))
        return made[-1]

    yield _make
    for client in made:
        await client.aclose()


def session_cookie_header(response: httpx.Response) -> str:
    (header,) = [h for h in response.headers.get_list("set-cookie") if "kandev_session=" in h]
    return header


async def setup_admin(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/auth/setup", json=ADMIN)
    assert response.status_code == 200, response.text


async def test_setup_cookie_tokens_logout_login(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient]
) -> None:
    url = start(auth=True)
    browser = clients(url)

    me = await browser.get("/api/v1/auth/me")
    assert me.status_code == 200
    assert me.json() == {"mode": "setup", "authenticated": False, "user": None}

    setup = await browser.post("/api/v1/auth/setup", json=ADMIN)
    assert setup.status_code == 200, setup.text
    assert setup.json()["user"]["email"] == "admin@example.com"
    assert "password_hash" not in setup.text
    cookie = session_cookie_header(setup)
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Path=/" in cookie and "Max-Age=2592000" in cookie
    assert "Secure" not in cookie  # plain http
    first_session = browser.cookies["kandev_session"]

    me = (await browser.get("/api/v1/auth/me")).json()
    assert me["mode"] == "enabled" and me["authenticated"] is True
    assert me["user"]["id"] == "default-user"

    again = await browser.post("/api/v1/auth/setup", json=ADMIN)
    assert again.status_code == 409
    assert again.json() == {"error": "setup is not available"}

    created = await browser.post("/api/v1/auth/tokens", json={"name": "ci"})
    assert created.status_code == 201, created.text
    raw = created.json()["token"]
    record = created.json()["record"]
    assert PAT_RE.fullmatch(raw)
    assert raw.startswith(f"kandev_pat_{record['prefix']}_")
    assert {"id", "name", "prefix", "created_at", "expires_at"} <= set(record)
    assert record["expires_at"] is None

    bot = clients(url)  # no cookie jar content: the bearer alone
    listed = await bot.get("/api/v1/auth/tokens", headers={"Authorization": f"Bearer {raw}"})
    assert listed.status_code == 200
    assert [t["id"] for t in listed.json()["tokens"]] == [record["id"]]
    assert raw not in listed.text

    stranger = clients(url)
    denied = await stranger.get("/api/v1/auth/tokens")
    assert denied.status_code == 401
    assert denied.json() == {"error": "authentication required"}
    assert denied.headers["www-authenticate"] == "Bearer"
    wrong = await stranger.get("/api/v1/auth/tokens", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401

    logout = await browser.post("/api/v1/auth/logout")
    assert logout.status_code == 204
    assert "kandev_session=" in session_cookie_header(logout)  # the cookie is cleared
    replay = clients(url)
    replayed = await replay.get(
        "/api/v1/auth/tokens", headers={"Cookie": f"kandev_session={first_session}"}
    )
    assert replayed.status_code == 401

    bad = await stranger.post(
        "/api/v1/auth/login", json={"email": ADMIN["email"], "password": "nope-nope"}
    )
    assert bad.status_code == 401
    assert bad.json() == {"error": "invalid email or password"}
    login = await stranger.post(
        "/api/v1/auth/login", json={"email": " ADMIN@example.com", "password": ADMIN["password"]}
    )
    assert login.status_code == 200, login.text
    assert login.json()["user"]["id"] == "default-user"
    assert (await stranger.get("/api/v1/auth/tokens")).status_code == 200

    deleted = await stranger.delete(f"/api/v1/auth/tokens/{record['id']}")
    assert deleted.status_code == 204
    assert (await stranger.delete(f"/api/v1/auth/tokens/{record['id']}")).status_code == 404
    gone = await bot.get("/api/v1/auth/tokens", headers={"Authorization": f"Bearer {raw}"})
    assert gone.status_code == 401


async def test_secure_cookie_behind_https_proxy(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient]
) -> None:
    # Only a trusted proxy's X-Forwarded-Proto counts (tests/perimeter/test_forwarded.py).
    client = clients(start(auth=True, trust_proxy="127.0.0.1"))
    response = await client.post(
        "/api/v1/auth/setup", json=ADMIN, headers={"X-Forwarded-Proto": "https"}
    )
    assert response.status_code == 200
    assert "Secure" in session_cookie_header(response)


async def test_pat_expires_with_the_clock(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient], clock: ManualClock
) -> None:
    url = start(auth=True)
    browser = clients(url)
    await setup_admin(browser)
    created = await browser.post("/api/v1/auth/tokens", json={"name": "short", "ttl_hours": 1})
    assert created.status_code == 201
    assert created.json()["record"]["expires_at"] is not None
    bearer = {"Authorization": f"Bearer {created.json()['token']}"}
    bot = clients(url)
    assert (await bot.get("/api/v1/auth/tokens", headers=bearer)).status_code == 200
    clock.advance(hours=2)
    expired = await bot.get("/api/v1/auth/tokens", headers=bearer)
    assert expired.status_code == 401
    assert expired.headers["www-authenticate"] == "Bearer"


async def test_login_rate_limit(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient], clock: ManualClock
) -> None:
    url = start(auth=True)
    await setup_admin(clients(url))
    client = clients(url)
    wrong = {"email": ADMIN["email"], "password": "wrong-password"}
    for attempt in range(10):
        response = await client.post("/api/v1/auth/login", json=wrong)
        assert response.status_code == 401, attempt
    right = {"email": ADMIN["email"], "password": ADMIN["password"]}
    limited = await client.post("/api/v1/auth/login", json=right)
    assert limited.status_code == 429
    assert "error" in limited.json()
    clock.advance(seconds=300)
    assert (await client.post("/api/v1/auth/login", json=right)).status_code == 200


async def test_auth_off_hides_credential_management(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient]
) -> None:
    client = clients(start())
    me = await client.get("/api/v1/auth/me")
    assert me.status_code == 200
    assert me.json()["mode"] == "disabled" and me.json()["authenticated"] is True
    for method, path, body in (
        ("GET", "/api/v1/auth/tokens", None),
        ("POST", "/api/v1/auth/tokens", {"name": "x"}),
        ("DELETE", "/api/v1/auth/tokens/some-id", None),
        ("GET", "/api/v1/users", None),
        ("POST", "/api/v1/users", {"email": "a@b.c", "password": "password1"}),
    ):
        response = await client.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json() == {"error": "not found"}
    setup = await client.post("/api/v1/auth/setup", json=ADMIN)
    assert setup.status_code == 409


async def test_admin_manages_users_members_cannot(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient]
) -> None:
    url = start(auth=True)
    admin = clients(url)
    await setup_admin(admin)
    member_body = {"email": "Member@Example.com", "password": "member-password"}
    created = await admin.post("/api/v1/users", json=member_body)
    assert created.status_code == 201, created.text
    user = created.json()["user"]
    assert set(user) == {
        "id",
        "email",
        "display_name",
        "role",
        "status",
        "created_at",
        "updated_at",
    }
    assert (user["email"], user["role"], user["status"]) == (
        "member@example.com",
        "member",
        "active",
    )
    duplicate = await admin.post("/api/v1/users", json=member_body)
    assert duplicate.status_code == 409
    assert duplicate.json() == {"error": "email already registered"}
    listed = (await admin.get("/api/v1/users")).json()
    assert listed["total"] == 2 and len(listed["users"]) == 2

    member = clients(url)
    login = await member.post("/api/v1/auth/login", json=member_body)
    assert login.status_code == 200
    forbidden = await member.post(
        "/api/v1/users", json={"email": "x@example.com", "password": "password-x"}
    )
    assert forbidden.status_code == 403
    assert (await member.get("/api/v1/users")).status_code == 403
    # Members still manage their own tokens.
    assert (await member.post("/api/v1/auth/tokens", json={"name": "m"})).status_code == 201
    assert len((await admin.get("/api/v1/auth/tokens")).json()["tokens"]) == 0


LONG_EMAIL = "a@" + "b" * 330
BAD_INPUT: list[tuple[str, str, Any, str]] = [
    # (method, path, json body or raw bytes, field the error must name)
    ("POST", "/api/v1/auth/setup", {"password": "password1"}, "email"),
    ("POST", "/api/v1/auth/setup", {"email": "a@b.c"}, "password"),
    ("POST", "/api/v1/auth/setup", {"email": LONG_EMAIL, "password": "password1"}, "email"),
    ("POST", "/api/v1/auth/setup", {"email": "a@b.c", "password": "p" * 1025}, "password"),
    (
        "POST",
        "/api/v1/auth/setup",
        {"email": "a@b.c", "password": "password1", "display_name": "d" * 201},
        "display_name",
    ),
    ("POST", "/api/v1/auth/setup", {"email": 5, "password": "password1"}, "email"),
    ("POST", "/api/v1/auth/setup", {"email": "a@b.c", "password": ["x"]}, "password"),
    ("POST", "/api/v1/auth/setup", {"email": "no-at", "password": "password1"}, "email"),
    ("POST", "/api/v1/auth/setup", {"email": "a@b.c", "password": "short"}, "password"),
    ("POST", "/api/v1/auth/setup", b'{"email": ', "body"),
    ("POST", "/api/v1/auth/login", {"password": "password1"}, "email"),
    ("POST", "/api/v1/auth/login", {"email": "a@b.c"}, "password"),
    ("POST", "/api/v1/auth/login", {"email": LONG_EMAIL, "password": "password1"}, "email"),
    ("POST", "/api/v1/auth/login", {"email": "a@b.c", "password": "p" * 1025}, "password"),
    ("POST", "/api/v1/auth/login", {"email": True, "password": "password1"}, "email"),
    ("POST", "/api/v1/auth/login", b"not json", "body"),
    ("POST", "/api/v1/auth/tokens", {}, "name"),
    ("POST", "/api/v1/auth/tokens", {"name": "n" * 201}, "name"),
    ("POST", "/api/v1/auth/tokens", {"name": 7}, "name"),
    ("POST", "/api/v1/auth/tokens", {"name": ""}, "name"),
    ("POST", "/api/v1/auth/tokens", {"name": "x", "ttl_hours": "abc"}, "ttl_hours"),
    ("POST", "/api/v1/auth/tokens", {"name": "x", "ttl_hours": "5"}, "ttl_hours"),
    ("POST", "/api/v1/auth/tokens", {"name": "x", "ttl_hours": 1.5}, "ttl_hours"),
    ("POST", "/api/v1/auth/tokens", {"name": "x", "ttl_hours": -1}, "ttl_hours"),
    ("POST", "/api/v1/auth/tokens", {"name": "x", "ttl_hours": 87601}, "ttl_hours"),
    ("POST", "/api/v1/auth/tokens", b"[1,", "body"),
    ("POST", "/api/v1/users", {"password": "password1"}, "email"),
    ("POST", "/api/v1/users", {"email": "u@b.c"}, "password"),
    ("POST", "/api/v1/users", {"email": LONG_EMAIL, "password": "password1"}, "email"),
    ("POST", "/api/v1/users", {"email": "u@b.c", "password": "p" * 1025}, "password"),
    (
        "POST",
        "/api/v1/users",
        {"email": "u@b.c", "password": "password1", "display_name": "d" * 201},
        "display_name",
    ),
    ("POST", "/api/v1/users", {"email": "u@b.c", "password": "password1", "role": 3}, "role"),
    ("POST", "/api/v1/users", {"email": "u@b.c", "password": "password1", "role": "owner"}, "role"),
    ("POST", "/api/v1/users", {"email": "u@b.c", "password": "short"}, "password"),
    ("POST", "/api/v1/users", b"{", "body"),
]


async def send(client: httpx.AsyncClient, method: str, path: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        headers = {"Content-Type": "application/json"}
        return await client.request(method, path, content=body, headers=headers)
    return await client.request(method, path, json=body)


async def test_bad_input_is_400_naming_the_field(
    start: Callable[..., str], clients: Callable[[str], httpx.AsyncClient]
) -> None:
    url = start(auth=True)
    client = clients(url)
    # Setup's bad input is checked while setup is still available.
    for method, path, body, field in BAD_INPUT:
        if path.endswith("/setup"):
            response = await send(client, method, path, body)
            assert response.status_code == 400, (path, body, response.text)
            assert response.json()["error"].startswith(f"{field}:"), (body, response.text)
    assert (await client.get("/api/v1/auth/me")).json()["mode"] == "setup"
    await setup_admin(client)
    for method, path, body, field in BAD_INPUT:
        if not path.endswith("/setup"):
            response = await send(client, method, path, body)
            assert response.status_code == 400, (path, body, response.text)
            assert response.json()["error"].startswith(f"{field}:"), (body, response.text)
    # Nothing was written by any of the rejected requests.
    assert (await client.get("/api/v1/auth/tokens")).json()["tokens"] == []
    assert (await client.get("/api/v1/users")).json()["total"] == 1
