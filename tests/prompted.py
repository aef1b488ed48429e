"""A new task's session built through the services (no agent): new, or with a turn running."""

from __future__ import annotations

from kandev.auth.identity import Identity, acting_as
from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.services import Services
from kandev.sessions.inputs import SessionCreate


async def new_session(
    services: Services, owner: Identity | None = None, *, prompt: str = ""
) -> tuple[str, str]:
    """A new workspace, workflow, task and session, as `owner`: the task's and session's
    ids. With `prompt`, the session was prompted with it (a turn is running)."""
    with acting_as(owner):
        ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
        flow = await services.workflows.create_workflow(
            WorkflowCreate(workspace_id=ws.id, name="f")
        )
        task = await services.tasks.create_task(
            TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
        )
        session = await services.sessions.create_session(task.id, SessionCreate())
        if prompt:
            await services.sessions.prompt(session["id"], prompt)
    return task.id, str(session["id"])


async def prompted_session(services: Services, owner: Identity | None = None) -> tuple[str, str]:
    return await new_session(services, owner, prompt="go")
