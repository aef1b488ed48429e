"""What a waiting ask keeps: one list of normalized questions, the store's (issue:
performance, RSS per waiting agent). The ask holds the list `create_bundle` returns for
as long as the agent waits; a second normalized copy per waiting agent was ~0.8 KiB."""

from __future__ import annotations

import pytest

from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.services import Services
from kandev.sessions.inputs import SessionCreate
from tests.perf.test_statement_budget import QUESTIONS


@pytest.mark.parametrize("repeat", [False, True], ids=["new", "identical-retry"])
async def test_the_ask_and_the_store_share_one_list_of_questions(
    services: Services, repeat: bool
) -> None:
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
    )
    session = await services.sessions.create_session(task.id, SessionCreate())
    clarifications = services.clarifications
    pending_id, questions = await clarifications.create_bundle(session["id"], QUESTIONS, None)
    if repeat:  # an identical retried ask gets the same bundle, and the same list
        again, questions = await clarifications.create_bundle(session["id"], QUESTIONS, None)
        assert again == pending_id
    stored = clarifications.store.get_request(pending_id)
    assert stored is not None
    assert questions == stored.questions  # the normalized questions …
    assert questions is stored.questions  # … held once, by the store
