"""Personal access tokens are verified once per server (not looked up on every request),
refused on the very next request once deleted, and still expire on time — over a real
uvicorn on both databases, and the deletion racing a lookup in-process."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import anyio
import httpx

from kandev.auth import repository as repo
from kandev.auth.identity import Identity
from kandev.clock import ManualClock
from kandev.db.engine import Database
from tests.mcp.conftest import two_users
from tests.statement_counter import selects_from


def token_lookups(db: Database) -> AbstractContextManager[list[str]]:
    """The statements that read the auth_api_tokens table, as they run (any thread)."""
    return selects_from(db, "auth_api_tokens")


async def test_a_token_is_looked_up_once_and_refused_right_after_delete(
    live_server_factory, database_url: str, clock: ManualClock
) -> None:
    server = live_server_factory(database_url, clock=clock, auth=True)
    alice_pat, _ = await two_users(server.url)
    headers = {"Authorization": f"Bearer {alice_pat}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as alice:
        tokens = (await alice.get("/api/v1/auth/tokens")).json()["tokens"]
        with token_lookups(server.services.db) as lookups:
            for _ in range(5):
                r = await alice.get("/api/v1/workspaces")
                assert r.status_code == 200, r.text
        assert lookups == []  # verified already, by the listing above

        (record,) = [t for t in tokens if t["name"] == "alice"]
        r = await alice.delete(f"/api/v1/auth/tokens/{record['id']}")
        assert r.status_code == 204, r.text
        r = await alice.get("/api/v1/workspaces")
        assert r.status_code == 401, r.text


async def test_a_cached_token_still_expires(services, clock: ManualClock) -> None:
    auth = services.auth
    owner = Identity(user_id="default-user", role="admin")
    raw, record = await auth.create_token(owner, "short", ttl_hours=1)
    first = await auth.resolve_bearer(raw)
    assert first is not None and first.token_id == record["id"]

    clock.advance(minutes=59)
    assert await auth.resolve_bearer(raw) is not None
    clock.advance(minutes=2)
    assert await auth.resolve_bearer(raw) is None


async def test_last_used_still_moves_for_a_cached_token(services, clock: ManualClock) -> None:
    auth = services.auth
    owner = Identity(user_id="default-user", role="admin")
    raw, record = await auth.create_token(owner, "script")
    await auth.resolve_bearer(raw)
    used = await last_used(services.db, record["id"])

    clock.advance(minutes=5)
    await auth.resolve_bearer(raw)

    assert used is not None
    assert await last_used(services.db, record["id"]) == used + timedelta(minutes=5)


async def last_used(db: Database, token_id: str) -> Any:
    async with db.read() as conn:
        row = await repo.get_api_token(conn, token_id)
    assert row is not None
    return row.last_used_at


async def test_a_lookup_racing_the_delete_is_not_kept(services) -> None:
    auth = services.auth
    owner = Identity(user_id="default-user", role="admin")
    raw, record = await auth.create_token(owner, "racing")
    assert await auth.resolve_bearer(raw) is not None

    seen: list[object] = []
    # delete_token's transaction, held open between its DELETE (and the forgetting right
    # after it) and the commit: a lookup now reads the old row, and must not keep it.
    async with services.db.write() as conn:
        assert await repo.delete_api_token(conn, record["id"], owner.user_id)
        auth._forget_token(record["id"])
        async with anyio.create_task_group() as tg:

            async def look_up() -> None:
                seen.append(await auth.resolve_bearer(raw))

            tg.start_soon(look_up)
    assert len(seen) == 1
    assert await auth.resolve_bearer(raw) is None
