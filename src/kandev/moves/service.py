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

Validation always runs first (`kandev.moves.validation`, in its documented order), before any
session is looked at.

Entry options (`EntryOptions`) apply once, to the entry they came with: `instructions`
(legacy alias `prompt`) are sent to the agent on entry, `reset` gives the agent a fresh
context (a new ACP session in the same Kandev session), `skip` skips the step's on-enter
automation. On a same-step request they are a VALIDATION_ERROR; empty values count as none.

The jobs live in their own modules: `validation`, `deferral` (pending moves), `transitions`
(applying a move), `turn_end` (the orchestrator's hooks), `presenter` (the JSON envelope);
this façade holds the locking and the transactions of a move.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kandev.board.describe import TaskDescriber
from kandev.board.scoped import ScopedService
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.events.bus import EventBus
from kandev.ids import IdFactory
from kandev.moves import repository as moves_repo
from kandev.moves.collaborators import SessionTurns
from kandev.moves.deferral import store_pending_move
from kandev.moves.effects import MoveEffects
from kandev.moves.models import APPLIED, DEFERRED, MoveRequest, MoveResult, MoveTarget
from kandev.moves.presenter import MovePresenter
from kandev.moves.transitions import Transitions, deliver_entry_prompts, restart_fresh
from kandev.moves.turn_end import TurnEndMoves
from kandev.moves.validation import validate_move
from kandev.sessions.access import AccessRules
from kandev.sessions.models import Session


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
        self.presenter = MovePresenter(db, describer)
        self._transitions = Transitions(clock, new_id, describer)
        self._turn_end = TurnEndMoves(db, clock, bus, turns, self._transitions)
        # `on_turn_end` inside the turn-end transaction (a `sessions.turn_hooks.TurnEnded`);
        # its facts come from the turn end's view, read with `turn_end_columns`.
        self.on_turn_end_in = self._turn_end.on_turn_end_in

    # --- the public move ---------------------------------------------------------------

    async def move(self, request: MoveRequest, *, human: bool = False) -> MoveResult:
        """Move a task (see the module docstring). `human`: a person on the board, applied
        immediately even while the agent runs; a same-step request with a different
        `position` reorders the column."""
        async with self.db.read() as conn:
            target = await validate_move(conn, self.access, request)
        if target.same_step and not _reorders(target, request, human):
            return MoveResult(APPLIED, target.task, target.step)
        primary = target.primary
        managed = (  # the primary session, when an agent Kandev runs drives it
            primary
            if primary is not None
            and primary.agent_profile_id is not None
            and not primary.is_terminal
            else None
        )
        lock = self.turns.turn_lock(managed.id) if managed is not None else contextlib.nullcontext()
        effects = MoveEffects.on(self.bus)
        async with lock:
            running = managed is not None and self.turns.has_live_turn(managed.id)
            if running and not human:
                assert managed is not None
                return await self._defer(request, managed)
            async with self.db.write() as conn:
                target = await validate_move(conn, self.access, request)  # what is stored now
                if target.same_step and not _reorders(target, request, human):
                    return MoveResult(APPLIED, target.task, target.step)
                if target.same_step:
                    assert request.position is not None
                    task = await self._transitions.reorder(conn, target, request.position, effects)
                else:
                    if running and managed is not None:
                        self._turn_end.note_moved_during_turn(managed.id)
                    task = await self._transitions.transition(
                        conn, target, request.position, request.actor, effects
                    )
            effects.events.publish()
            await restart_fresh(self.turns, effects)
        await deliver_entry_prompts(self.turns, effects)
        return MoveResult(APPLIED, task, target.step)

    async def _defer(self, request: MoveRequest, session: Session) -> MoveResult:
        """Store the move on the running primary session (the caller holds its live lock)."""
        effects = MoveEffects.on(self.bus)
        async with self.db.write() as conn:
            target = await validate_move(conn, self.access, request)
            if target.same_step:
                return MoveResult(APPLIED, target.task, target.step)
            move_id = await store_pending_move(
                conn, self.clock, self.new_id, request, target, session, effects
            )
        effects.events.publish()
        return MoveResult(DEFERRED, target.task, target.step, move_id)

    async def result_json(self, result: MoveResult) -> dict[str, Any]:
        """The MCP move envelope: {"disposition", "task", "move_id" (deferred only)}."""
        return await self.presenter.envelope(result, "mcp")

    # --- the orchestrator's hooks (under the session's live lock), start-up ------------

    async def on_turn_end(self, session_id: str, *, stop_reason: str, waiting: bool) -> None:
        """Apply the session's pending move, else run turn-complete automation
        (`TurnEndMoves.on_turn_end`)."""
        await self._turn_end.on_turn_end(session_id, stop_reason=stop_reason, waiting=waiting)

    # What on_turn_end_in reads, for the turn end's view statement (TurnHooks.view_columns).
    turn_end_columns = staticmethod(moves_repo.turn_end_columns)

    async def on_session_ended(self, session_id: str) -> None:
        """The session ended (stopped, failed): its pending move will never apply; drop it."""
        await self._turn_end.on_session_ended(session_id)

    async def drop_orphaned(self) -> int:
        """At start-up: pending moves of sessions that ended are dropped."""
        return await self._turn_end.drop_orphaned()


def _reorders(target: MoveTarget, request: MoveRequest, human: bool) -> bool:
    return human and request.position is not None and request.position != target.task.position
