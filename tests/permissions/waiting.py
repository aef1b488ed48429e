"""A session without a managed agent blocked on a permission request, for the service tests."""

from __future__ import annotations

import asyncio

from kandev.auth.identity import Identity
from kandev.services import Services
from tests.prompted import prompted_session

TOOL_CALL = {"tool_call_id": "c1", "title": "Run tests", "kind": "execute", "raw_input": None}
OPTIONS = [
    {"option_id": "yes", "name": "Allow", "kind": "allow_once"},
    {"option_id": "no", "name": "Reject", "kind": "reject_once"},
]


async def waiting_session(
    services: Services, owner: Identity | None = None
) -> tuple[str, str, asyncio.Task[str | None]]:
    """(session id, pending id, the blocked decide call), once the durable row was
    announced and the session waits (its last write)."""
    _, session_id = await prompted_session(services, owner)
    stream = services.bus.subscribe()
    blocked = asyncio.create_task(services.permissions.decide(session_id, TOOL_CALL, OPTIONS))
    pending_id = None
    try:
        while True:
            event = await stream.next(timeout=30)
            assert event is not None, "no permission request was announced"
            message = event.data.get("message") or {}
            if message.get("type") == "permission_request":
                pending_id = message["metadata"]["pending_id"]
            if event.data.get("state") == "WAITING_FOR_INPUT" and pending_id is not None:
                return session_id, pending_id, blocked
    finally:
        stream.close()
