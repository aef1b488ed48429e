"""The scoping matrix on both databases: no identity, synthetic, owner, other user,
empty workspace, dangling workspace — for workspaces, workflows, tasks and sessions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kandev.auth.identity import SYNTHETIC_IDENTITY, Identity, acting_as
from kandev.board import task_repository
from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.db.tables import task_sessions
from kandev.errors import NotFound
from kandev.services import Services

ALICE = Identity(user_id="alice")
BOB = Identity(user_id="bob")


@dataclass
class Board:
    ws: dict[str, str]
    workflows: dict[str, str]
    tasks: dict[str, str]
    sessions: dict[str, str]


async def _make_board(services: Services) -> Board:
    ws, wf, tasks, sessions = {}, {}, {}, {}
    for key, identity in (("alice", ALICE), ("bob", BOB), ("unowned", None)):
        with acting_as(identity):
            w = await services.workspaces.create_workspace(WorkspaceCreate(name=f"{key} ws"))
            flow = await services.workflows.create_workflow(
                WorkflowCreate(workspace_id=w.id, name=f"{key} flow")
            )
            t = await services.tasks.create_task(
                TaskCreate(workspace_id=w.id, workflow_id=flow.id, title=f"{key} task")
            )
        ws[key], wf[key], tasks[key] = w.id, flow.id, t.id
    # Rows the service would never create but the data model allows: no workspace, and a
    # workspace id that names nothing (deleted or imported). Both stay visible to everyone.
    now = services.clock.now()
    async with services.db.write() as conn:
        for key, workspace_id in (("empty", ""), ("dangling", "ghost-workspace")):
            await task_repository.insert_task(
                conn,
                {
                    "id": f"task-{key}",
                    "workspace_id": workspace_id,
                    "title": f"{key} task",
                    "created_at": now,
                    "updated_at": now,
                },
            )
            tasks[key] = f"task-{key}"
        for key in ("alice", "bob", "empty"):
            await conn.execute(
                task_sessions.insert().values(
                    id=f"session-{key}", task_id=tasks[key], started_at=now, updated_at=now
                )
            )
            sessions[key] = f"session-{key}"
    return Board(ws, wf, tasks, sessions)


CALLERS = {
    "no identity": None,
    "synthetic": SYNTHETIC_IDENTITY,
    "owner alice": ALICE,
    "other user bob": BOB,
}
# What each caller may see, by board key.
VISIBLE = {
    "no identity": {"alice", "bob", "unowned", "empty", "dangling"},
    "synthetic": {"alice", "bob", "unowned", "empty", "dangling"},
    "owner alice": {"alice", "unowned", "empty", "dangling"},
    "other user bob": {"bob", "unowned", "empty", "dangling"},
}


@pytest.mark.parametrize("caller", list(CALLERS))
async def test_workspace_visibility(services: Services, caller: str) -> None:
    board = await _make_board(services)
    with acting_as(CALLERS[caller]):
        listed, total = await services.workspaces.list_workspaces()
        expected = {board.ws[k] for k in ("alice", "bob", "unowned") if k in VISIBLE[caller]}
        assert {w.id for w in listed} == expected
        assert total == len(expected)
        for key, workspace_id in board.ws.items():
            if key in VISIBLE[caller]:
                assert (await services.workspaces.get_workspace(workspace_id)).id == workspace_id
            else:
                with pytest.raises(NotFound) as foreign:
                    await services.workspaces.get_workspace(workspace_id)
                with pytest.raises(NotFound) as fabricated:
                    await services.workspaces.get_workspace("no-such-workspace")
                assert str(foreign.value) == str(fabricated.value) == "workspace not found"


@pytest.mark.parametrize("caller", list(CALLERS))
async def test_workflow_visibility(services: Services, caller: str) -> None:
    board = await _make_board(services)
    with acting_as(CALLERS[caller]):
        listed, _ = await services.workflows.list_workflows(None)
        expected = {board.workflows[k] for k in board.workflows if k in VISIBLE[caller]}
        assert {w.id for w in listed} == expected
        for key, workflow_id in board.workflows.items():
            if key in VISIBLE[caller]:
                assert (await services.workflows.get_workflow(workflow_id)).id == workflow_id
            else:
                with pytest.raises(NotFound, match=r"^workflow not found$"):
                    await services.workflows.get_workflow(workflow_id)
                with pytest.raises(NotFound, match=r"^workspace not found$"):
                    await services.workflows.list_workflows(board.ws[key])


@pytest.mark.parametrize("caller", list(CALLERS))
async def test_task_visibility(services: Services, caller: str) -> None:
    board = await _make_board(services)
    with acting_as(CALLERS[caller]):
        listed, total = await services.tasks.list_tasks()
        expected = {board.tasks[k] for k in board.tasks if k in VISIBLE[caller]}
        assert {t.id for t in listed} == expected
        assert total == len(expected)
        for key, task_id in board.tasks.items():
            if key in VISIBLE[caller]:
                assert (await services.tasks.get_task(task_id)).id == task_id
            else:
                with pytest.raises(NotFound, match=r"^task not found$"):
                    await services.tasks.get_task(task_id)
                with pytest.raises(NotFound, match=r"^task not found$"):
                    await services.tasks.delete_task(task_id)


@pytest.mark.parametrize("caller", list(CALLERS))
async def test_session_visibility_follows_its_task(services: Services, caller: str) -> None:
    board = await _make_board(services)
    with acting_as(CALLERS[caller]):
        async with services.db.read() as conn:
            for key, session_id in board.sessions.items():
                if key in VISIBLE[caller]:
                    assert (
                        await services.access.authorize_session(conn, session_id)
                        == (board.tasks[key])
                    )
                else:
                    with pytest.raises(NotFound, match=r"^session not found$"):
                        await services.access.authorize_session(conn, session_id)
            # A visible task paired with another task's session is refused.
            with pytest.raises(NotFound, match=r"^session not found$"):
                await services.access.authorize_task_session(
                    conn, board.tasks["empty"], board.sessions["alice"]
                )


async def test_other_user_cannot_create_into_foreign_workspace(services: Services) -> None:
    board = await _make_board(services)
    with acting_as(BOB):
        with pytest.raises(NotFound, match=r"^workspace not found$"):
            await services.workflows.create_workflow(
                WorkflowCreate(workspace_id=board.ws["alice"], name="sneaky")
            )
        with pytest.raises(NotFound, match=r"^workspace not found$"):
            await services.tasks.create_task(
                TaskCreate(
                    workspace_id=board.ws["alice"], workflow_id=board.workflows["alice"], title="x"
                )
            )
    with acting_as(None):
        _, total = await services.tasks.list_tasks(workspace_id=board.ws["alice"])
    assert total == 1  # nothing was written by the refused calls


async def test_workspace_owner_is_stamped_from_identity(services: Services) -> None:
    with acting_as(ALICE):
        owned = await services.workspaces.create_workspace(WorkspaceCreate(name="mine"))
    with acting_as(SYNTHETIC_IDENTITY):
        unowned = await services.workspaces.create_workspace(WorkspaceCreate(name="shared"))
    assert owned.owner_id == "alice"
    assert unowned.owner_id == ""
