"""The moves side of a turn's end and a session's end, called by the orchestrator under the
session's live lock: the pending move is applied (or dropped), otherwise the step's
turn-complete automation runs; a task resting on a terminal step is COMPLETED. At start-up,
pending moves of sessions that ended are dropped."""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository, workflow_repository
from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.catalog.events import TASK_UPDATED
from kandev.catalog.states import FINAL_TASK_STATES, TASK_COMPLETED
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.events.bus import EventBus
from kandev.events.publisher import task_owner_id
from kandev.moves import repository as moves_repo
from kandev.moves import step_events
from kandev.moves.collaborators import SessionTurns
from kandev.moves.deferral import (
    DROP_SESSION_ENDED,
    DROP_STEP_GONE,
    DROP_TASK_ARCHIVED,
    DROP_TASK_GONE,
    DROP_WORKFLOW_CHANGED,
    DROP_WORKFLOW_GONE,
    drop_pending_move,
    dropped_event,
)
from kandev.moves.effects import MoveEffects
from kandev.moves.models import ACTOR_AGENT, ACTOR_WORKFLOW, EntryOptions, MoveTarget
from kandev.moves.transitions import Transitions, restart_fresh
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.describe import SessionsView
from kandev.sessions.models import Session
from kandev.sessions.turn_hooks import AfterCommit

log = logging.getLogger(__name__)


class TurnEndMoves:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        bus: EventBus,
        turns: SessionTurns,
        transitions: Transitions,
    ) -> None:
        self.db = db
        self.clock = clock
        self.bus = bus
        self.turns = turns
        self.transitions = transitions
        # Primary sessions whose task a person moved while their turn was running: that turn's
        # end must not run the new step's turn-complete automation.
        self._moved_during_turn: set[str] = set()

    def note_moved_during_turn(self, session_id: str) -> None:
        self._moved_during_turn.add(session_id)

    async def on_turn_end(self, session_id: str, *, stop_reason: str, waiting: bool) -> None:
        """`on_turn_end_in` in a transaction of its own."""
        async with self.db.write() as conn:
            session = await sessions_repo.get_session(conn, session_id)
            if session is None:
                return
            then = await self.on_turn_end_in(
                conn, session, stop_reason=stop_reason, waiting=waiting
            )
        if then is not None:
            await then()

    async def on_turn_end_in(
        self,
        conn: AsyncConnection,
        session: Session,
        *,
        stop_reason: str,
        waiting: bool,
        view: SessionsView | None = None,
    ) -> AfterCommit | None:
        """The session's agent turn ended (its state is already settled), inside the turn-end
        transaction (a `sessions.turn_hooks.TurnEnded`).

        1. Its pending move, if any, is applied now, or dropped with `task.move_dropped` when
           its target is no longer valid. An explicit move decides this turn end:
           turn-complete automation does not run.
        2. Otherwise the current step's `on_turn_complete` runs, unless a question is open
           (`waiting`, the clarification guard), the turn was cancelled, the session is not
           the task's primary session, or a person moved the task during the turn.
        3. A task resting on a terminal step is COMPLETED.
        Entry prompts are queued here; the orchestrator dispatches them next. One read
        decides whether any of it can apply; the work itself runs in a savepoint, so its
        failure is logged and leaves the turn's end committed.
        """
        moved_during_turn = session.id in self._moved_during_turn
        self._moved_during_turn.discard(session.id)
        if session.is_terminal:
            return None
        automation = (
            not waiting
            and stop_reason != "cancelled"
            and session.is_primary
            and not moved_during_turn
        )
        # The turn end's view read them (TurnHooks.view_columns); without such a view
        # (on_turn_end) they are read here.
        extra = view.extra(session.id) if view is not None else None
        if extra is not None:
            facts = moves_repo.turn_end_facts_of(extra)
        else:
            facts = await moves_repo.turn_end_facts(conn, session.id, session.task_id)
        if facts is not None and not _may_act(facts, automation):
            return None
        effects = MoveEffects.on(self.bus)
        try:
            async with conn.begin_nested():
                decided = await self._apply_pending(conn, session, effects)
                if not decided and automation:
                    await self._turn_complete(conn, session, effects)
                await self._settle_terminal(conn, session.task_id, effects)
        except Exception:
            log.exception("turn-end moves of session %s failed", session.id)
            return None

        async def after_commit() -> None:
            effects.events.publish()
            await restart_fresh(self.turns, effects)

        return after_commit

    async def on_session_ended(self, session_id: str) -> None:
        """The session ended (stopped, failed): its pending move will never apply; drop it."""
        self._moved_during_turn.discard(session_id)
        effects = MoveEffects.on(self.bus)
        try:
            async with self.db.write() as conn:
                pending = await moves_repo.get_pending(conn, session_id)
                if pending is not None:
                    await drop_pending_move(conn, self.clock, pending, DROP_SESSION_ENDED, effects)
        except Exception:
            log.exception("dropping the pending move of ended session %s failed", session_id)
            return
        effects.events.publish()

    async def drop_orphaned(self) -> int:
        """At start-up: pending moves of sessions that ended are dropped."""
        effects = MoveEffects.on(self.bus)
        async with self.db.write() as conn:
            orphans = await moves_repo.pending_of_ended_sessions(conn)
            for pending in orphans:
                await drop_pending_move(conn, self.clock, pending, DROP_SESSION_ENDED, effects)
        effects.events.publish()
        return len(orphans)

    async def _apply_pending(
        self, conn: AsyncConnection, session: Session, effects: MoveEffects
    ) -> bool:
        pending = await moves_repo.get_pending(conn, session.id)
        if pending is None:
            return False
        await moves_repo.delete_pending(conn, pending.id)
        if await moves_repo.was_consumed(conn, pending.move_id):
            log.info("deferred move %s was already applied; not again", pending.move_id)
            return True
        now = self.clock.now()
        await moves_repo.record_consumed(conn, pending.move_id, session.id, now)
        task, workflow, step, reason = await _pending_target(conn, pending)
        if reason is not None or task is None or workflow is None or step is None:
            owner_id = await task_owner_id(conn, pending.task_id)
            dropped_event(effects, pending, reason or DROP_STEP_GONE, owner_id)
            return True
        options = EntryOptions(pending.instructions or pending.prompt, pending.reset, pending.skip)
        target = MoveTarget(task, workflow, step, options, session if session.is_primary else None)
        if target.same_step:
            return True  # already there (someone else moved it): nothing to enter
        await self.transitions.transition(
            conn,
            target,
            pending.step_position,
            pending.actor or ACTOR_AGENT,
            effects,
            move_id=pending.move_id,
            receiver=session,
        )
        return True

    async def _turn_complete(
        self, conn: AsyncConnection, session: Session, effects: MoveEffects
    ) -> None:
        task = await task_repository.get_task(conn, session.task_id)
        if task is None or task.archived_at is not None:
            return
        workflow = await workflow_repository.get_workflow(conn, task.workflow_id)
        step = workflow.step(task.workflow_step_id) if workflow else None
        if workflow is None or step is None:
            return
        destination = step_events.turn_complete_target(workflow, step)
        if destination is None or destination.id == step.id:
            return
        target = MoveTarget(task, workflow, destination, EntryOptions(), session)
        await self.transitions.transition(conn, target, None, ACTOR_WORKFLOW, effects)

    async def _settle_terminal(
        self, conn: AsyncConnection, task_id: str, effects: MoveEffects
    ) -> None:
        """A finished turn on a terminal step leaves the task COMPLETED (the turn's end set
        it to REVIEW)."""
        task = await task_repository.get_task(conn, task_id)
        if task is None or task.state in FINAL_TASK_STATES:
            return
        workflow = await workflow_repository.get_workflow(conn, task.workflow_id)
        step = workflow.step(task.workflow_step_id) if workflow else None
        if not step_events.is_terminal(workflow, step):
            return
        if await task_repository.change_task_state(conn, task_id, TASK_COMPLETED, self.clock.now()):
            settled = await task_repository.get_task(conn, task_id)
            assert settled is not None
            await self.transitions.task_event(conn, effects, TASK_UPDATED, settled, {})


def _may_act(facts: moves_repo.TurnEndFacts, automation: bool) -> bool:
    """False only when nothing can happen: no deferred move, no turn-complete automation to
    run, and a step that cannot be terminal."""
    if facts.has_pending_move:
        return True
    if automation and facts.step_events.get("on_turn_complete"):
        return True
    return (facts.step_name or "").strip().lower() in step_events.TERMINAL_STEP_NAMES


async def _pending_target(
    conn: AsyncConnection, pending: moves_repo.PendingMove
) -> tuple[Task | None, Workflow | None, WorkflowStep | None, str | None]:
    """Where a pending move still goes, or why it cannot (a DROP_* reason)."""
    task = await task_repository.get_task(conn, pending.task_id)
    if task is None:
        return None, None, None, DROP_TASK_GONE
    if task.archived_at is not None:
        return task, None, None, DROP_TASK_ARCHIVED
    workflow = await workflow_repository.get_workflow(conn, pending.workflow_id)
    if workflow is None:
        return task, None, None, DROP_WORKFLOW_GONE
    if workflow.workspace_id != task.workspace_id:
        return task, workflow, None, DROP_WORKFLOW_CHANGED
    step = workflow.step(pending.workflow_step_id)
    if step is None:
        return task, workflow, None, DROP_STEP_GONE
    return task, workflow, step, None
