"""A permission request a previous server left open expires when the next one starts
(on both databases): its agent died with that server, so nobody could ever get the answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kandev.clock import ManualClock
from kandev.errors import Conflict
from kandev.services import Services, build_services
from tests.conftest import make_settings
from tests.permissions.waiting import waiting_session


async def _open_request(services: Services) -> tuple[str, asyncio.Task[str | None]]:
    _, pending_id, waiting = await waiting_session(services)
    return pending_id, waiting


async def test_restart_expires_open_requests(
    services: Services, database_url: str, tmp_path: Path, clock: ManualClock
) -> None:
    pending_id, waiting = await _open_request(services)
    listed = await services.permissions.list_pending()
    assert [p["pending_id"] for p in listed["permissions"]] == [pending_id]

    restarted = build_services(make_settings(tmp_path, database_url), clock=clock)
    try:
        await restarted.prepare()
        assert (await restarted.permissions.list_pending())["count"] == 0
        try:
            await restarted.permissions.respond(pending_id, "yes")
        except Conflict:
            pass
        else:
            raise AssertionError("an expired request must not be claimable")
    finally:
        await restarted.close()
    waiting.cancel()
