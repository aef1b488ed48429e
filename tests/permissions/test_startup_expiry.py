"""A permission request a previous server left open expires when the next one starts
(on both databases): its agent died with that server, so nobody could ever get the answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.clock import ManualClock
from kandev.errors import Conflict
from kandev.services import Services, build_services
from kandev.sessions.inputs import SessionCreate
from tests.conftest import make_settings

TOOL_CALL = {"tool_call_id": "c1", "title": "Run tests", "kind": "execute", "raw_input": None}
OPTIONS = [
    {"option_id": "yes", "name": "Allow", "kind": "allow_once"},
    {"option_id": "no", "name": "Reject", "kind": "reject_once"},
]


async def _open_request(services: Services) -> tuple[str, asyncio.Task[str | None]]:
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
    )
    session = await services.sessions.create_session(task.id, SessionCreate())
    await services.sessions.prompt(session["id"], "go")
    stream = services.bus.subscribe()
    waiting = asyncio.create_task(services.permissions.decide(session["id"], TOOL_CALL, OPTIONS))
    pending_id = None
    try:
        # The durable row is announced, then the session waits (its last write).
        while True:
            event = await stream.next(timeout=30)
            assert event is not None, "no permission request was announced"
            message = event.data.get("message") or {}
            if message.get("type") == "permission_request":
                pending_id = message["metadata"]["pending_id"]
            if event.data.get("state") == "WAITING_FOR_INPUT" and pending_id is not None:
                return pending_id, waiting
    finally:
        stream.close()


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
