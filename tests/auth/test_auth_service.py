"""AuthService on a real database of each kind (SQLite file and PostgreSQL)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from kandev.auth.identity import DEFAULT_USER_ID, SYNTHETIC_IDENTITY, Identity
from kandev.auth.service import AuthService
from kandev.clock import ManualClock
from kandev.db.tables import auth_api_tokens, auth_identities, auth_sessions, users, workspaces
from kandev.errors import Conflict, Forbidden, NotFound, RateLimited, Unauthorized, ValidationFailed
from kandev.services import Services, build_services
from tests.conftest import make_settings

PASSWORD = "s3cret-password"


@pytest.fixture
async def auth_services(
    database_url: str, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[Services]:
    built = build_services(
        make_settings(tmp_path, database_url, auth=True, session_ttl_hours=1), clock=clock
    )
    await built.prepare()
    yield built
    await built.close()


@pytest.fixture
def auth(auth_services: Services) -> AuthService:
    return auth_services.auth


async def rows(services: Services, table: Any, *where: Any) -> list[Any]:
    async with services.db.read() as conn:
        return list((await conn.execute(select(table).where(*where))).all())


async def setup_admin(auth: AuthService, email: str = "admin@example.com") -> str:
    grant = await auth.setup(email, PASSWORD, "Admin")
    return grant.token


async def make_member(auth: AuthService, email: str = "member@example.com") -> Identity:
    await auth.create_user(email, PASSWORD, "Member", "member", actor=None)
    return await auth.identity_for_email(email)


# --- modes, default user ----------------------------------------------------------------


async def test_auth_off_is_disabled(services: Services) -> None:
    assert services.auth.mode == "disabled"
    me = await services.auth.me(SYNTHETIC_IDENTITY)
    assert me["mode"] == "disabled" and me["authenticated"] is True
    assert me["user"]["id"] == DEFAULT_USER_ID


async def test_default_user_is_seeded_once(auth_services: Services) -> None:
    for _ in range(3):
        await auth_services.auth.ensure_default_user()
    found = await rows(auth_services, users, users.c.id == DEFAULT_USER_ID)
    assert len(found) == 1
    assert found[0].email == "default@kandev.local" and found[0].role == "admin"
    async with auth_services.db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(users))).scalar_one() == 1


async def test_concurrent_default_user_seeding_is_safe(auth_services: Services) -> None:
    await asyncio.gather(*(auth_services.auth.ensure_default_user() for _ in range(5)))
    assert len(await rows(auth_services, users, users.c.id == DEFAULT_USER_ID)) == 1


# --- setup ------------------------------------------------------------------------------


async def test_setup_promotes_default_user_and_enables(
    auth_services: Services, auth: AuthService
) -> None:
    assert auth.mode == "setup"
    grant = await auth.setup("  Admin@Example.COM ", PASSWORD, "The Admin", client_ip="10.0.0.1")
    assert auth.mode == "enabled"
    assert grant.user["id"] == DEFAULT_USER_ID
    assert grant.user["email"] == "admin@example.com"
    assert grant.user["role"] == "admin" and grant.user["display_name"] == "The Admin"
    assert set(grant.user) == {
        "id",
        "email",
        "display_name",
        "role",
        "status",
        "created_at",
        "updated_at",
    }
    assert grant.max_age == 3600
    identity = await auth.resolve_session_token(grant.token)
    assert identity == Identity(
        user_id=DEFAULT_USER_ID, role="admin", session_id=identity.session_id
    )
    assert await auth.refresh_mode() == "enabled"
    (ident,) = await rows(auth_services, auth_identities)
    assert ident.provider == "local" and ident.subject == "admin@example.com"
    assert ident.password_hash.startswith("$argon2id$")


async def test_setup_twice_conflicts(auth: AuthService) -> None:
    await setup_admin(auth)
    with pytest.raises(Conflict, match="setup is not available"):
        await auth.setup("other@example.com", PASSWORD)


async def test_concurrent_setups_only_one_wins(auth_services: Services, auth: AuthService) -> None:
    results = await asyncio.gather(
        auth.setup("a@example.com", PASSWORD),
        auth.setup("b@example.com", PASSWORD),
        return_exceptions=True,
    )
    assert sum(isinstance(r, Conflict) for r in results) == 1
    assert len(await rows(auth_services, auth_identities)) == 1


async def test_second_process_setup_is_refused_by_the_database(
    auth_services: Services, tmp_path: Path, database_url: str, clock: ManualClock
) -> None:
    """Another server on the same database still thinks it is in setup mode."""
    other = build_services(make_settings(tmp_path, database_url, auth=True), clock=clock)
    await other.prepare()
    try:
        await setup_admin(auth_services.auth)
        assert other.auth.mode == "setup"
        with pytest.raises(Conflict):
            await other.auth.setup("intruder@example.com", PASSWORD)
        assert other.auth.mode == "enabled"
        (user,) = await rows(auth_services, users, users.c.id == DEFAULT_USER_ID)
        assert user.email == "admin@example.com"
    finally:
        await other.close()


async def test_setup_claims_unowned_workspaces(
    auth_services: Services, auth: AuthService, clock: ManualClock
) -> None:
    now = clock.now()
    async with auth_services.db.write() as conn:
        for ws_id, owner in (("ws-free", ""), ("ws-owned", "someone")):
            await conn.execute(
                insert(workspaces).values(
                    id=ws_id, name=ws_id, owner_id=owner, created_at=now, updated_at=now
                )
            )
    await setup_admin(auth)
    owners = {r.id: r.owner_id for r in await rows(auth_services, workspaces)}
    assert owners == {"ws-free": DEFAULT_USER_ID, "ws-owned": "someone"}


async def test_failed_setup_writes_nothing(
    auth_services: Services, auth: AuthService, clock: ManualClock, monkeypatch: Any
) -> None:
    now = clock.now()
    async with auth_services.db.write() as conn:
        await conn.execute(
            insert(workspaces).values(id="w", name="w", owner_id="", created_at=now, updated_at=now)
        )

    async def boom(*_: Any, **__: Any) -> str:
        raise RuntimeError("disk full")

    monkeypatch.setattr(auth, "_insert_session", boom)
    with pytest.raises(RuntimeError):
        await auth.setup("admin@example.com", PASSWORD)
    assert auth.mode == "setup"
    assert await rows(auth_services, auth_identities) == []
    (user,) = await rows(auth_services, users, users.c.id == DEFAULT_USER_ID)
    assert user.email == "default@kandev.local"
    (ws,) = await rows(auth_services, workspaces)
    assert ws.owner_id == ""


async def test_setup_not_available_when_auth_off(services: Services) -> None:
    with pytest.raises(Conflict, match="setup is not available"):
        await services.auth.setup("admin@example.com", PASSWORD)


# --- users ------------------------------------------------------------------------------


async def test_cli_first_admin_acts_as_setup_without_session(
    auth_services: Services, auth: AuthService
) -> None:
    user = await auth.create_user("Root@Example.com", PASSWORD, "Root", "admin", actor=None)
    assert user["id"] == DEFAULT_USER_ID and user["email"] == "root@example.com"
    assert auth.mode == "enabled"
    assert await rows(auth_services, auth_sessions) == []
    second = await auth.create_user("second@example.com", PASSWORD, None, "admin", actor=None)
    assert second["id"] != DEFAULT_USER_ID and second["role"] == "admin"


async def test_duplicate_email_conflicts(auth: AuthService) -> None:
    await setup_admin(auth)
    await make_member(auth, "dup@example.com")
    with pytest.raises(Conflict, match="email already registered"):
        await auth.create_user(" DUP@example.com", PASSWORD, actor=None)
    with pytest.raises(Conflict, match="email already registered"):
        await auth.create_user("admin@example.com", PASSWORD, actor=None)


async def test_user_management_needs_admin(auth: AuthService) -> None:
    token = await setup_admin(auth)
    admin = await auth.resolve_session_token(token)
    member = await make_member(auth)
    with pytest.raises(Forbidden):
        await auth.create_user("x@example.com", PASSWORD, actor=member)
    with pytest.raises(Forbidden):
        await auth.list_users(member)
    with pytest.raises(NotFound):
        await auth.list_users(SYNTHETIC_IDENTITY)
    created = await auth.create_user("x@example.com", PASSWORD, actor=admin)
    assert created["role"] == "member"
    listed = await auth.list_users(admin)
    assert sorted(u["email"] for u in listed) == [
        "admin@example.com",
        "member@example.com",
        "x@example.com",
    ]
    assert all("password_hash" not in u and "settings" not in u for u in listed)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"email": "no-at-sign"}, "email"),
        ({"email": "a@" + "b" * 320}, "email"),
        ({"password": "short"}, "password"),
        ({"password": "p" * 1025}, "password"),
        ({"display_name": "d" * 201}, "display_name"),
        ({"role": "owner"}, "role"),
    ],
)
async def test_user_validation_names_the_field(
    auth: AuthService, kwargs: dict[str, Any], field: str
) -> None:
    args = {"email": "ok@example.com", "password": PASSWORD, "display_name": "", "role": None}
    args.update(kwargs)
    with pytest.raises(ValidationFailed) as caught:
        await auth.create_user(**args, actor=None)
    assert caught.value.field == field
    if field != "role":  # setup takes no role; the same rules apply to the rest
        with pytest.raises(ValidationFailed) as caught:
            await auth.setup(args["email"], args["password"], args["display_name"])
        assert caught.value.field == field
    assert auth.mode == "setup"


# --- login and rate limit ---------------------------------------------------------------


async def test_login_and_bad_credentials(auth_services: Services, auth: AuthService) -> None:
    await setup_admin(auth)
    grant = await auth.login(" ADMIN@example.com", PASSWORD, "10.1.1.1", "curl/8 " + "x" * 300)
    assert grant.user["email"] == "admin@example.com"
    session = (await rows(auth_services, auth_sessions, auth_sessions.c.ip == "10.1.1.1"))[0]
    assert len(session.user_agent) == 256
    assert session.token_sha256 == hashlib.sha256(grant.token.encode()).hexdigest()
    with pytest.raises(Unauthorized, match="invalid email or password"):
        await auth.login("admin@example.com", "wrong-password", "10.1.1.1")
    with pytest.raises(Unauthorized, match="invalid email or password"):
        await auth.login("nobody@example.com", PASSWORD, "10.1.1.1")


async def test_rate_limit_blocks_the_11th_attempt_until_the_window_passes(
    auth: AuthService, clock: ManualClock
) -> None:
    await setup_admin(auth)
    for _ in range(10):
        with pytest.raises(Unauthorized):
            await auth.login("admin@example.com", "wrong-password", "10.0.0.9")
    with pytest.raises(RateLimited):
        await auth.login("admin@example.com", PASSWORD, "10.0.0.9")
    # Other clients and other emails keep their own budget.
    await auth.login("admin@example.com", PASSWORD, "10.0.0.10")
    clock.advance(seconds=299)
    with pytest.raises(RateLimited):
        await auth.login("admin@example.com", PASSWORD, "10.0.0.9")
    clock.advance(seconds=1)
    await auth.login("admin@example.com", PASSWORD, "10.0.0.9")


async def test_successful_login_resets_the_budget(auth: AuthService) -> None:
    await setup_admin(auth)
    for _ in range(9):
        with pytest.raises(Unauthorized):
            await auth.login("admin@example.com", "wrong-password", "ip")
    await auth.login("admin@example.com", PASSWORD, "ip")
    for _ in range(10):
        with pytest.raises(Unauthorized):
            await auth.login("admin@example.com", "wrong-password", "ip")


async def test_login_refused_while_auth_is_off(services: Services) -> None:
    with pytest.raises(Conflict):
        await services.auth.login("default@kandev.local", PASSWORD, "ip")


# --- sessions ---------------------------------------------------------------------------


async def test_session_expiry_slides_with_use(
    auth_services: Services, auth: AuthService, clock: ManualClock
) -> None:
    token = await setup_admin(auth)  # TTL is 1 h in this fixture
    start = clock.now()
    (row,) = await rows(auth_services, auth_sessions)
    assert row.expires_at == start + _hours(1)

    clock.advance(seconds=30)  # inside the touch interval: no write
    assert await auth.resolve_session_token(token) is not None
    (row,) = await rows(auth_services, auth_sessions)
    assert row.last_seen_at == start and row.expires_at == start + _hours(1)

    clock.advance(minutes=50)
    assert await auth.resolve_session_token(token, "10.9.9.9") is not None
    (row,) = await rows(auth_services, auth_sessions)
    assert row.last_seen_at == clock.now()
    assert row.expires_at == clock.now() + _hours(1)
    assert row.ip == "10.9.9.9"

    clock.advance(minutes=59)  # past the original expiry, inside the slid one
    assert await auth.resolve_session_token(token) is not None


async def test_expired_session_is_rejected_and_deleted(
    auth_services: Services, auth: AuthService, clock: ManualClock
) -> None:
    token = await setup_admin(auth)
    clock.advance(hours=1, seconds=1)
    assert await auth.resolve_session_token(token) is None
    assert await rows(auth_services, auth_sessions) == []


async def test_unknown_or_malformed_session_tokens(auth: AuthService) -> None:
    await setup_admin(auth)
    assert await auth.resolve_session_token("A" * 43) is None
    assert await auth.resolve_session_token("") is None
    assert await auth.resolve_session_token("x" * 5000) is None


async def test_disabled_user_credentials_stop_working(
    auth_services: Services, auth: AuthService
) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    grant = await auth.login("member@example.com", PASSWORD, "ip")
    raw, _ = await auth.create_token(member, "ci")
    async with auth_services.db.write() as conn:
        await conn.execute(
            users.update().where(users.c.id == member.user_id).values(status="disabled")
        )
    assert await auth.resolve_session_token(grant.token) is None
    assert await auth.resolve_bearer(raw) is None
    with pytest.raises(Unauthorized):
        await auth.login("member@example.com", PASSWORD, "ip")


async def test_logout_deletes_the_session(auth_services: Services, auth: AuthService) -> None:
    token = await setup_admin(auth)
    identity = await auth.resolve_session_token(token)
    await auth.logout(identity)
    assert await rows(auth_services, auth_sessions) == []
    assert await auth.resolve_session_token(token) is None


async def test_me_payloads(auth: AuthService) -> None:
    assert await auth.me(None) == {"mode": "setup", "authenticated": False, "user": None}
    token = await setup_admin(auth)
    me = await auth.me(await auth.resolve_session_token(token))
    assert me["mode"] == "enabled" and me["authenticated"] is True
    assert me["user"]["email"] == "admin@example.com"


# --- personal access tokens -------------------------------------------------------------


async def test_pat_is_stored_as_hash_only(auth_services: Services, auth: AuthService) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    raw, record = await auth.create_token(member, "  laptop  ")
    assert raw.startswith(f"kandev_pat_{record['prefix']}_")
    assert record["name"] == "laptop" and record["expires_at"] is None
    assert set(record) == {"id", "name", "prefix", "created_at", "expires_at", "last_used_at"}
    (row,) = await rows(auth_services, auth_api_tokens)
    assert row.token_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    # The secret after the prefix (it may itself contain "_": URL-safe base64).
    secret = raw.removeprefix(f"kandev_pat_{record['prefix']}_")[-20:]
    assert len(secret) == 20
    for value in row:
        assert raw not in str(value) and secret not in str(value)
    identity = await auth.resolve_bearer(raw)
    assert identity == Identity(user_id=member.user_id, role="member", token_id=record["id"])


async def test_expired_pat_is_refused(auth: AuthService, clock: ManualClock) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    raw, record = await auth.create_token(member, "short", ttl_hours=1)
    assert record["expires_at"] is not None
    assert await auth.resolve_bearer(raw) is not None
    clock.advance(hours=2)
    assert await auth.resolve_bearer(raw) is None


async def test_pat_last_used_is_touched_at_most_once_a_minute(
    auth_services: Services, auth: AuthService, clock: ManualClock
) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    raw, _ = await auth.create_token(member, "ci")
    first = clock.now()
    await auth.resolve_bearer(raw)
    (row,) = await rows(auth_services, auth_api_tokens)
    assert row.last_used_at == first
    clock.advance(seconds=45)
    await auth.resolve_bearer(raw)
    (row,) = await rows(auth_services, auth_api_tokens)
    assert row.last_used_at == first
    clock.advance(seconds=30)
    await auth.resolve_bearer(raw)
    (row,) = await rows(auth_services, auth_api_tokens)
    assert row.last_used_at == clock.now()
    (listed,) = await auth.list_tokens(member)
    assert listed["last_used_at"] is not None


async def test_bearer_ignores_non_pat_and_unknown_tokens(auth: AuthService) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    raw, _ = await auth.create_token(member, "ci")
    assert await auth.resolve_bearer(raw[:-1] + ("A" if raw[-1] != "A" else "B")) is None
    assert await auth.resolve_bearer("kandev_agent_" + raw[len("kandev_pat_") :]) is None
    assert await auth.resolve_bearer("some-jwt") is None


async def test_tokens_are_per_user(auth: AuthService) -> None:
    token = await setup_admin(auth)
    admin = await auth.resolve_session_token(token)
    member = await make_member(auth)
    raw, record = await auth.create_token(member, "mine")
    assert await auth.list_tokens(admin) == []
    with pytest.raises(NotFound):
        await auth.delete_token(admin, record["id"])
    assert await auth.resolve_bearer(raw) is not None
    await auth.delete_token(member, record["id"])
    assert await auth.resolve_bearer(raw) is None
    with pytest.raises(NotFound):
        await auth.delete_token(member, record["id"])


async def test_token_management_does_not_exist_without_a_real_identity(
    auth: AuthService,
) -> None:
    for identity in (None, SYNTHETIC_IDENTITY):
        with pytest.raises(NotFound):
            await auth.create_token(identity, "x")
        with pytest.raises(NotFound):
            await auth.list_tokens(identity)
        with pytest.raises(NotFound):
            await auth.delete_token(identity, "x")


@pytest.mark.parametrize(
    ("name", "ttl", "field"),
    [
        ("", None, "name"),
        ("   ", None, "name"),
        ("n" * 201, None, "name"),
        ("ok", -1, "ttl_hours"),
        ("ok", 87_601, "ttl_hours"),
        ("ok", True, "ttl_hours"),
        ("ok", "5", "ttl_hours"),
    ],
)
async def test_token_validation_names_the_field(
    auth: AuthService, name: str, ttl: Any, field: str
) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    with pytest.raises(ValidationFailed) as caught:
        await auth.create_token(member, name, ttl)
    assert caught.value.field == field


async def test_zero_ttl_never_expires(auth: AuthService, clock: ManualClock) -> None:
    await setup_admin(auth)
    member = await make_member(auth)
    raw, record = await auth.create_token(member, "forever", ttl_hours=0)
    assert record["expires_at"] is None
    clock.advance(days=3650)
    assert await auth.resolve_bearer(raw) is not None


def _hours(n: int) -> timedelta:
    return timedelta(hours=n)
