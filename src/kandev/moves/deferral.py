"""Deferred moves: a move asked for while the target task's primary session is mid-turn is
stored as that session's pending move (one per session, the newest wins) and applied when the
turn ends (`kandev.moves.turn_end`). A pending move that can never apply is dropped, with
`task.move_dropped` naming why."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.events import TASK_MOVE_DEFERRED, TASK_MOVE_DROPPED
from kandev.clock import Clock
from kandev.events.publisher import task_owner_id
from kandev.ids import IdFactory
from kandev.moves import repository as moves_repo
from kandev.moves.effects import MoveEffects
from kandev.moves.models import MoveRequest, MoveTarget
from kandev.sessions.models import Session

# Why a deferred move was dropped instead of applied (task.move_dropped `reason`).
DROP_REPLACED = "replaced"  # a newer deferred move for the same session replaced it
DROP_SUPERSEDED = "superseded"  # the task was moved by someone else first
DROP_SESSION_ENDED = "session_ended"  # its session ended before the turn did
DROP_TASK_GONE = "task_deleted"
DROP_TASK_ARCHIVED = "task_archived"
DROP_WORKFLOW_GONE = "workflow_deleted"
DROP_WORKFLOW_CHANGED = "workflow_changed"  # the workflow left the task's workspace
DROP_STEP_GONE = "step_deleted"  # the step was deleted or now belongs to another workflow


async def store_pending_move(
    conn: AsyncConnection,
    clock: Clock,
    new_id: IdFactory,
    request: MoveRequest,
    target: MoveTarget,
    session: Session,
    effects: MoveEffects,
) -> str:
    """Store the move as `session`'s pending move, replacing (and dropping) an older one;
    returns the new move's id."""
    move_id = new_id()
    options = target.options
    replaced = await moves_repo.replace_pending(
        conn,
        {
            "id": new_id(),
            "move_id": move_id,
            "session_id": session.id,
            "task_id": target.task.id,
            "workflow_id": target.workflow.id,
            "workflow_step_id": target.step.id,
            "step_position": request.position,
            "instructions": options.instructions,
            "reset": options.reset,
            "skip": options.skip,
            "actor": request.actor,
            "sender_session_id": request.sender_session_id,
            "metadata": {},
            "queued_at": clock.now(),
        },
    )
    owner_id = await task_owner_id(conn, target.task.id)
    if replaced is not None:  # gone with its instructions; it can never apply now
        await moves_repo.record_consumed(conn, replaced.move_id, replaced.session_id, clock.now())
        dropped_event(effects, replaced, DROP_REPLACED, owner_id)
    effects.events.add(
        TASK_MOVE_DEFERRED,
        {
            "task_id": target.task.id,
            "move_id": move_id,
            "session_id": session.id,
            "workflow_id": target.workflow.id,
            "workflow_step_id": target.step.id,
        },
        task_id=target.task.id,
        session_id=session.id,
        owner_id=owner_id,
    )
    return move_id


async def drop_pending_move(
    conn: AsyncConnection,
    clock: Clock,
    pending: moves_repo.PendingMove,
    reason: str,
    effects: MoveEffects,
) -> None:
    await moves_repo.delete_pending(conn, pending.id)
    await moves_repo.record_consumed(conn, pending.move_id, pending.session_id, clock.now())
    dropped_event(effects, pending, reason, await task_owner_id(conn, pending.task_id))


def dropped_event(
    effects: MoveEffects, pending: moves_repo.PendingMove, reason: str, owner_id: str
) -> None:
    effects.events.add(
        TASK_MOVE_DROPPED,
        {
            "task_id": pending.task_id,
            "move_id": pending.move_id,
            "session_id": pending.session_id,
            "workflow_id": pending.workflow_id,
            "workflow_step_id": pending.workflow_step_id,
            "reason": reason,
        },
        task_id=pending.task_id,
        session_id=pending.session_id,
        owner_id=owner_id,
    )
