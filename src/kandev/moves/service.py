"""The one move service: every way a task changes step goes through `MoveService`.

Callers: `POST /api/v1/tasks/{id}/move` (a human; always immediate), `move_task_kandev` on both
MCP surfaces, and the orchestrator at the end of every agent turn (`on_turn_end`: deferred
moves, then `on_turn_complete` automation).

Outcomes, as the caller sees them (`MoveResult.disposition`):

- `applied`: the task is now where it was asked to be. Either it moved, or it already was
  on that step (the same-step no-op: nothing written, no event, queued work untouched, the
  stored task returned with its stored position).
- `deferred`: the target task's primary session is in the middle of an agent turn. The move
  is stored as that session's pending move (one per session, the newest wins) and applied
  when the turn ends, before turn-complete automation. `move_id` names it.

Validation always runs first and in this order, before any session is looked at: write
access to the task (foreign and missing tasks are the same NOT_FOUND), not archived
(CONFLICT), the target workflow (exists, visible, same workspace), the target step (in that
workflow), then the entry options. Anything unexpected while looking these up is
INTERNAL_ERROR with a fixed message; the cause is logged, never returned.

Entry options (`EntryOptions`) apply once, to the entry they came with: `instructions`
(legacy alias `prompt`) are sent to the agent on entry, `reset` gives the agent a fresh
context (a new ACP session in the same Kandev session), `skip` skips the step's on-enter
automation. On a same-step request they are a VALIDATION_ERROR; empty values count as none.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository, workflow_repository
from kandev.board.describe import TaskDescriber, task_json
from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.board.scoped import ScopedService
from kandev.catalog.events import TASK_MOVE_DEFERRED, TASK_MOVE_DROPPED, TASK_MOVED, TASK_UPDATED
from kandev.catalog.states import FINAL_TASK_STATES, TASK_COMPLETED, TASK_TODO
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, KandevError, ValidationFailed
from kandev.events.bus import EventBus
from kandev.events.publisher import PendingEvents, task_owner_id
from kandev.ids import IdFactory
from kandev.moves import repository as moves_repo
from kandev.moves import step_events
from kandev.moves.collaborators import SessionTurns
from kandev.sessions import message_repository as messages_repo
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.models import Session

log = logging.getLogger(__name__)

APPLIED = "applied"
DEFERRED = "deferred"

# Who asked for a move (stored on pending moves, sent with task.moved).
ACTOR_USER = "user"  # a person on the REST API
ACTOR_AGENT = "agent"  # an agent on /agent/mcp (its session is the sender)
ACTOR_EXTERNAL = "mcp"  # a caller of the external /mcp endpoint
ACTOR_WORKFLOW = "workflow"  # on_turn_complete automation

ENTRY_PROMPT_AUTHOR = "kandev:step-entry"

# Why a deferred move was dropped instead of applied (task.move_dropped `reason`).
DROP_REPLACED = "replaced"  # a newer deferred move for the same session replaced it
DROP_SUPERSEDED = "superseded"  # the task was moved by someone else first
DROP_SESSION_ENDED = "session_ended"  # its session ended before the turn did
DROP_TASK_GONE = "task_deleted"
DROP_TASK_ARCHIVED = "task_archived"
DROP_WORKFLOW_GONE = "workflow_deleted"
DROP_WORKFLOW_CHANGED = "workflow_changed"  # the workflow left the task's workspace
DROP_STEP_GONE = "step_deleted"  # the step was deleted or now belongs to another workflow

LOOKUP_FAILED = "could not look up the task or the move target"


class MoveLookupFailed(KandevError):
    """An operational failure while validating a move; the detail stays in the log."""

    code = "INTERNAL_ERROR"


@dataclass(frozen=True)
class EntryOptions:
    instructions: str = ""
    reset: bool = False
    skip: bool = False

    @property
    def empty(self) -> bool:
        return not (self.instructions or self.reset or self.skip)

    def first_given(self) -> str:
        if self.instructions:
            return "instructions"
        return "reset" if self.reset else "skip"


@dataclass(frozen=True)
class MoveRequest:
    task_id: str
    workflow_id: str
    workflow_step_id: str
    position: int | None = None
    instructions: str | None = None
    prompt: str | None = None  # legacy alias of instructions
    reset: bool | None = None
    skip: bool | None = None
    actor: str = ACTOR_USER
    sender_session_id: str = ""


@dataclass(frozen=True)
class MoveResult:
    disposition: str
    task: Task
    step: WorkflowStep
    move_id: str | None = None


@dataclass(frozen=True)
class _Target:
    """A validated move: the task as stored, where it goes, and the entry options."""

    task: Task
    workflow: Workflow
    step: WorkflowStep
    options: EntryOptions
    primary: Session | None = None

    @property
    def same_step(self) -> bool:
        return (
            self.task.workflow_id == self.workflow.id and self.task.workflow_step_id == self.step.id
        )


@dataclass
class _Effects:
    """What a move transaction leaves to do once it has committed."""

    events: PendingEvents
    fresh_context: set[str] = field(default_factory=set)  # sessions to restart fresh
    dispatch: set[str] = field(default_factory=set)  # sessions with an entry prompt queued
    direct_prompts: list[tuple[Session, str]] = field(default_factory=list)  # no managed agent


def normalize_options(request: MoveRequest) -> EntryOptions:
    instructions = (request.instructions or "").strip()
    legacy = (request.prompt or "").strip()
    if instructions and legacy and instructions != legacy:
        raise ValidationFailed(
            "prompt", "prompt is the legacy name of instructions; give only one of them"
        )
    return EntryOptions(instructions or legacy, bool(request.reset), bool(request.skip))


class MoveService(ScopedService):
    access: AccessRules  # sessions too, not only the board's rows

    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        access: AccessRules,
        bus: EventBus,
        turns: SessionTurns,
        describer: TaskDescriber,
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.bus = bus
        self.turns = turns
        self.describer = describer
        # Primary sessions whose task a person moved while their turn was running: that turn's
        # end must not run the new step's turn-complete automation.
        self._moved_during_turn: set[str] = set()

    # --- the public move ---------------------------------------------------------------

    async def move(self, request: MoveRequest, *, human: bool = False) -> MoveResult:
        """Move a task (see the module docstring). `human`: a person on the board, applied
        immediately even while the agent runs; a same-step request with a different
        `position` reorders the column."""
        async with self.db.read() as conn:
            target = await self._validate(conn, request)
        if target.same_step and not self._reorders(target, request, human):
            return MoveResult(APPLIED, target.task, target.step)
        primary = target.primary
        managed = (
            primary is not None and primary.agent_profile_id is not None and not primary.is_terminal
        )
        lock = self.turns.turn_lock(primary.id) if managed else contextlib.nullcontext()
        effects = _Effects(PendingEvents(self.bus))
        async with lock:
            running = managed and self.turns.has_live_turn(primary.id)
            if running and not human:
                assert primary is not None
                return await self._defer(request, primary)
            async with self.db.write() as conn:
                target = await self._validate(conn, request)  # what is stored now
                if target.same_step and not self._reorders(target, request, human):
                    return MoveResult(APPLIED, target.task, target.step)
                if target.same_step:
                    assert request.position is not None
                    task = await self._reorder(conn, target, request.position, effects)
                else:
                    if running and primary is not None:
                        self._moved_during_turn.add(primary.id)
                    task = await self._transition(
                        conn, target, request.position, request.actor, effects
                    )
            effects.events.publish()
            await self._restart_fresh(effects)
        await self._deliver(effects)
        return MoveResult(APPLIED, task, target.step)

    @staticmethod
    def _reorders(target: _Target, request: MoveRequest, human: bool) -> bool:
        return human and request.position is not None and request.position != target.task.position

    async def result_json(self, result: MoveResult) -> dict[str, Any]:
        """The move envelope: {"disposition", "task", "move_id" (deferred only)}."""
        async with self.db.read() as conn:
            task = await task_json(self.describer, conn, result.task)
        body: dict[str, Any] = {"disposition": result.disposition, "task": task}
        if result.move_id is not None:
            body["move_id"] = result.move_id
        return body

    # --- validation --------------------------------------------------------------------

    async def _validate(self, conn: AsyncConnection, request: MoveRequest) -> _Target:
        try:
            return await self._checked_target(conn, request)
        except KandevError:
            raise
        except Exception:
            log.exception("move of task %s: lookup failed", request.task_id)
            raise MoveLookupFailed(LOOKUP_FAILED) from None

    async def _checked_target(self, conn: AsyncConnection, request: MoveRequest) -> _Target:
        task = await self.access.authorize_task_write(conn, request.task_id)
        if task.archived_at is not None:
            raise Conflict("archived tasks cannot be moved")
        workflow = await workflow_repository.get_workflow(conn, request.workflow_id)
        if workflow is None or not await self.access.workspace_id_visible(
            conn, workflow.workspace_id
        ):
            raise ValidationFailed("workflow_id", "target workflow does not exist")
        if workflow.workspace_id != task.workspace_id:
            raise ValidationFailed("workflow_id", "target workflow is in a different workspace")
        step = workflow.step(request.workflow_step_id)
        if step is None:
            raise ValidationFailed("workflow_step_id", "no such step in the target workflow")
        options = normalize_options(request)
        target = _Target(task, workflow, step, options)
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
        return _Target(task, workflow, step, options, primary)

    # --- deferring ---------------------------------------------------------------------

    async def _defer(self, request: MoveRequest, session: Session) -> MoveResult:
        """Store the move on the running primary session (the caller holds its live lock)."""
        effects = _Effects(PendingEvents(self.bus))
        async with self.db.write() as conn:
            target = await self._validate(conn, request)
            if target.same_step:
                return MoveResult(APPLIED, target.task, target.step)
            move_id = self.new_id()
            options = target.options
            replaced = await moves_repo.replace_pending(
                conn,
                {
                    "id": self.new_id(),
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
                    "queued_at": self.clock.now(),
                },
            )
            owner_id = await task_owner_id(conn, target.task.id)
            if replaced is not None:  # gone with its instructions; it can never apply now
                await moves_repo.record_consumed(
                    conn, replaced.move_id, replaced.session_id, self.clock.now()
                )
                _dropped_event(effects, replaced, DROP_REPLACED, owner_id)
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
        effects.events.publish()
        return MoveResult(DEFERRED, target.task, target.step, move_id)

    # --- applying ----------------------------------------------------------------------

    async def _reorder(
        self, conn: AsyncConnection, target: _Target, position: int, effects: _Effects
    ) -> Task:
        task = target.task
        await task_repository.shift_positions_from(conn, target.step.id, position, task.id)
        await task_repository.update_task(
            conn, task.id, {"position": position, "updated_at": self.clock.now()}
        )
        moved = await task_repository.get_task(conn, task.id)
        assert moved is not None
        await self._task_event(conn, effects, TASK_UPDATED, moved, {})
        return moved

    async def _transition(
        self,
        conn: AsyncConnection,
        target: _Target,
        position: int | None,
        actor: str,
        effects: _Effects,
        *,
        move_id: str | None = None,
        receiver: Session | None = None,
    ) -> Task:
        """Put the task on the target step and run the step's entry, in this transaction.

        `receiver` is the session that gets the entry prompt (default: the primary session
        when it is not terminal)."""
        task, workflow, step, options = target.task, target.workflow, target.step, target.options
        from_workflow = (
            workflow
            if task.workflow_id == workflow.id
            else await workflow_repository.get_workflow(conn, task.workflow_id)
        )
        from_step = from_workflow.step(task.workflow_step_id) if from_workflow else None
        if position is None:
            position = await task_repository.next_position_in_step(conn, step.id)
        else:
            await task_repository.shift_positions_from(conn, step.id, position, task.id)
        state = task.state
        if step_events.is_terminal(workflow, step):
            if state not in FINAL_TASK_STATES:
                state = TASK_COMPLETED
        elif state == TASK_COMPLETED and step_events.is_terminal(from_workflow, from_step):
            state = TASK_TODO
        await task_repository.update_task(
            conn,
            task.id,
            {
                "workflow_id": workflow.id,
                "workflow_step_id": step.id,
                "position": position,
                "state": state,
                "updated_at": self.clock.now(),
            },
        )
        moved = await task_repository.get_task(conn, task.id)
        assert moved is not None
        owner_id = await task_owner_id(conn, task.id)
        # A move decides where the task is: deferred moves asked for earlier are void.
        for stale in await moves_repo.pending_for_task(conn, task.id):
            await self._drop(conn, stale, DROP_SUPERSEDED, effects)
        if receiver is None and target.primary is not None and not target.primary.is_terminal:
            receiver = target.primary
        await self._enter(conn, moved, workflow, step, options, receiver, effects)
        await self._task_event(conn, effects, TASK_UPDATED, moved, {}, owner_id)
        extra: dict[str, Any] = {
            "from_step_id": task.workflow_step_id,
            "to_step_id": step.id,
            "from_workflow_id": task.workflow_id,
            "to_workflow_id": workflow.id,
            "actor": actor,
        }
        if move_id is not None:
            extra["move_id"] = move_id
        await self._task_event(conn, effects, TASK_MOVED, moved, extra, owner_id)
        return moved

    async def _enter(
        self,
        conn: AsyncConnection,
        task: Task,
        workflow: Workflow,
        step: WorkflowStep,
        options: EntryOptions,
        receiver: Session | None,
        effects: _Effects,
    ) -> None:
        """The step's on_enter for this entry: fresh context, then the entry prompt."""
        if receiver is None:
            return  # no agent session: nothing to start or tell (instructions were refused)
        if options.reset and receiver.agent_profile_id is not None:
            await sessions_repo.update_session(
                conn, receiver.id, {"acp_session_id": "", "updated_at": self.clock.now()}
            )
            effects.fresh_context.add(receiver.id)
        prompt = step_events.entry_prompt(
            workflow, step, task, instructions=options.instructions, skip=options.skip
        )
        if not prompt:
            return
        if receiver.agent_profile_id is None:
            effects.direct_prompts.append((receiver, prompt))  # its agent reads it over MCP
            return
        # Queued with the move, in one transaction: the prompt exists exactly when the move
        # happened; the session dispatches it as soon as it is free.
        await messages_repo.enqueue_prompt(
            conn,
            {
                "id": self.new_id(),
                "session_id": receiver.id,
                "task_id": task.id,
                "content": prompt,
                "queued_by": ENTRY_PROMPT_AUTHOR,
                "metadata": {"step_id": step.id},
                "queued_at": self.clock.now(),
            },
        )
        effects.dispatch.add(receiver.id)

    async def _task_event(
        self,
        conn: AsyncConnection,
        effects: _Effects,
        kind: str,
        task: Task,
        extra: dict[str, Any],
        owner_id: str | None = None,
    ) -> None:
        payload = await task_json(self.describer, conn, task)
        if owner_id is None:
            owner_id = await task_owner_id(conn, task.id)
        effects.events.add(kind, {"task": payload, **extra}, task_id=task.id, owner_id=owner_id)

    async def _restart_fresh(self, effects: _Effects) -> None:
        for session_id in effects.fresh_context:
            await self.turns.fresh_agent_context(session_id)

    async def _deliver(self, effects: _Effects) -> None:
        """Entry prompts, after commit and outside any session lock."""
        for session_id in effects.dispatch:
            await self.turns.dispatch_queued(session_id)
        for session, prompt in effects.direct_prompts:
            await self.turns.submit_prompt(session, prompt, ENTRY_PROMPT_AUTHOR)

    # --- turn end (called by the orchestrator, under the session's live lock) ----------

    async def on_turn_end(self, session_id: str, *, stop_reason: str, waiting: bool) -> None:
        """The session's agent turn ended (its state is already settled).

        1. Its pending move, if any, is applied now, or dropped with `task.move_dropped` when
           its target is no longer valid. An explicit move decides this turn end:
           turn-complete automation does not run.
        2. Otherwise the current step's `on_turn_complete` runs, unless a question is open
           (`waiting`, the clarification guard), the turn was cancelled, the session is not
           the task's primary session, or a person moved the task during the turn.
        3. A task resting on a terminal step is COMPLETED.
        Entry prompts are queued here; the orchestrator dispatches them next.
        """
        effects = _Effects(PendingEvents(self.bus))
        moved_during_turn = session_id in self._moved_during_turn
        self._moved_during_turn.discard(session_id)
        try:
            async with self.db.write() as conn:
                session = await sessions_repo.get_session(conn, session_id)
                if session is None or session.is_terminal:
                    return
                decided = await self._apply_pending(conn, session, effects)
                if (
                    not decided
                    and not waiting
                    and stop_reason != "cancelled"
                    and session.is_primary
                    and not moved_during_turn
                ):
                    await self._turn_complete(conn, session, effects)
                await self._settle_terminal(conn, session.task_id, effects)
        except Exception:
            log.exception("turn-end moves of session %s failed", session_id)
            return
        effects.events.publish()
        await self._restart_fresh(effects)

    async def _apply_pending(
        self, conn: AsyncConnection, session: Session, effects: _Effects
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
        task, workflow, step, reason = await self._pending_target(conn, pending)
        if reason is not None or task is None or workflow is None or step is None:
            owner_id = await task_owner_id(conn, pending.task_id)
            _dropped_event(effects, pending, reason or DROP_STEP_GONE, owner_id)
            return True
        options = EntryOptions(pending.instructions or pending.prompt, pending.reset, pending.skip)
        target = _Target(task, workflow, step, options, session if session.is_primary else None)
        if target.same_step:
            return True  # already there (someone else moved it): nothing to enter
        await self._transition(
            conn,
            target,
            pending.step_position,
            pending.actor or ACTOR_AGENT,
            effects,
            move_id=pending.move_id,
            receiver=session,
        )
        return True

    async def _pending_target(
        self, conn: AsyncConnection, pending: moves_repo.PendingMove
    ) -> tuple[Task | None, Workflow | None, WorkflowStep | None, str | None]:
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

    async def _turn_complete(
        self, conn: AsyncConnection, session: Session, effects: _Effects
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
        target = _Target(task, workflow, destination, EntryOptions(), session)
        await self._transition(conn, target, None, ACTOR_WORKFLOW, effects)

    async def _settle_terminal(
        self, conn: AsyncConnection, task_id: str, effects: _Effects
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
            await self._task_event(conn, effects, TASK_UPDATED, settled, {})

    # --- sessions ending, start-up -----------------------------------------------------

    async def on_session_ended(self, session_id: str) -> None:
        """The session ended (stopped, failed): its pending move will never apply; drop it."""
        self._moved_during_turn.discard(session_id)
        effects = _Effects(PendingEvents(self.bus))
        try:
            async with self.db.write() as conn:
                pending = await moves_repo.get_pending(conn, session_id)
                if pending is not None:
                    await self._drop(conn, pending, DROP_SESSION_ENDED, effects)
        except Exception:
            log.exception("dropping the pending move of ended session %s failed", session_id)
            return
        effects.events.publish()

    async def drop_orphaned(self) -> int:
        """At start-up: pending moves of sessions that ended are dropped."""
        effects = _Effects(PendingEvents(self.bus))
        async with self.db.write() as conn:
            orphans = await moves_repo.pending_of_ended_sessions(conn)
            for pending in orphans:
                await self._drop(conn, pending, DROP_SESSION_ENDED, effects)
        effects.events.publish()
        return len(orphans)

    async def _drop(
        self,
        conn: AsyncConnection,
        pending: moves_repo.PendingMove,
        reason: str,
        effects: _Effects,
    ) -> None:
        await moves_repo.delete_pending(conn, pending.id)
        await moves_repo.record_consumed(
            conn, pending.move_id, pending.session_id, self.clock.now()
        )
        _dropped_event(effects, pending, reason, await task_owner_id(conn, pending.task_id))


def _dropped_event(
    effects: _Effects, pending: moves_repo.PendingMove, reason: str, owner_id: str
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


async def _primary_session(conn: AsyncConnection, task_id: str) -> Session | None:
    sessions = await sessions_repo.list_task_sessions(conn, task_id)
    return next((s for s in sessions if s.is_primary), None)
