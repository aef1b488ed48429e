"""Validating a move request, always in this order and before any session is looked at:
write access to the task (foreign and missing tasks are the same NOT_FOUND), not archived
(CONFLICT), the target workflow (exists, visible, same workspace), the target step (in that
workflow), then the entry options. Anything unexpected while looking these up is
INTERNAL_ERROR with a fixed message; the cause is logged, never returned."""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import workflow_repository
from kandev.errors import Conflict, KandevError, ValidationFailed
from kandev.moves.models import EntryOptions, MoveRequest, MoveTarget
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.models import Session

log = logging.getLogger(__name__)

LOOKUP_FAILED = "could not look up the task or the move target"


class MoveLookupFailed(KandevError):
    """An operational failure while validating a move; the detail stays in the log."""

    code = "INTERNAL_ERROR"


def normalize_options(request: MoveRequest) -> EntryOptions:
    """Empty values count as none; `prompt` is the legacy alias of `instructions`."""
    instructions = (request.instructions or "").strip()
    legacy = (request.prompt or "").strip()
    if instructions and legacy and instructions != legacy:
        raise ValidationFailed(
            "prompt", "prompt is the legacy name of instructions; give only one of them"
        )
    return EntryOptions(instructions or legacy, bool(request.reset), bool(request.skip))


async def validate_move(
    conn: AsyncConnection, access: AccessRules, request: MoveRequest
) -> MoveTarget:
    try:
        return await _checked_target(conn, access, request)
    except KandevError:
        raise
    except Exception:
        log.exception("move of task %s: lookup failed", request.task_id)
        raise MoveLookupFailed(LOOKUP_FAILED) from None


async def _checked_target(
    conn: AsyncConnection, access: AccessRules, request: MoveRequest
) -> MoveTarget:
    task = await access.authorize_task_write(conn, request.task_id)
    if task.archived_at is not None:
        raise Conflict("archived tasks cannot be moved")
    workflow = await workflow_repository.get_workflow(conn, request.workflow_id)
    if workflow is None or not await access.workspace_id_visible(conn, workflow.workspace_id):
        raise ValidationFailed("workflow_id", "target workflow does not exist")
    if workflow.workspace_id != task.workspace_id:
        raise ValidationFailed("workflow_id", "target workflow is in a different workspace")
    step = workflow.step(request.workflow_step_id)
    if step is None:
        raise ValidationFailed("workflow_step_id", "no such step in the target workflow")
    options = normalize_options(request)
    target = MoveTarget(task, workflow, step, options)
    if target.same_step:
        if not options.empty:
            raise ValidationFailed(
                options.first_given(),
                "entry options apply only when the task enters a different step",
            )
        return target  # decided before any session is looked at
    primary = await _primary_session(conn, task.id)
    if options.instructions and (primary is None or primary.is_terminal):
        raise ValidationFailed(
            "instructions", "the task has no active agent session to receive them"
        )
    return MoveTarget(task, workflow, step, options, primary)


async def _primary_session(conn: AsyncConnection, task_id: str) -> Session | None:
    sessions = await sessions_repo.list_task_sessions(conn, task_id)
    return next((s for s in sessions if s.is_primary), None)
