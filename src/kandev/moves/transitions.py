"""Applying a move inside the caller's write transaction: the task's position and step
(and the state a terminal step implies), `task.updated` / `task.moved`, and the step's entry
(a fresh agent context, the entry prompt). Deferred moves of the task are void once it moved.
What must wait for the commit is left in `MoveEffects`; `restart_fresh` and
`deliver_entry_prompts` do it afterwards."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository, workflow_repository
from kandev.board.describe import TaskDescriber, task_json
from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.catalog.events import TASK_MOVED, TASK_UPDATED
from kandev.catalog.states import FINAL_TASK_STATES, TASK_COMPLETED, TASK_TODO
from kandev.clock import Clock
from kandev.events.publisher import task_owner_id
from kandev.ids import IdFactory
from kandev.moves import repository as moves_repo
from kandev.moves import step_events
from kandev.moves.collaborators import SessionTurns
from kandev.moves.deferral import DROP_SUPERSEDED, drop_pending_move
from kandev.moves.effects import MoveEffects
from kandev.moves.models import EntryOptions, MoveTarget
from kandev.sessions import message_repository as messages_repo
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.models import Session

ENTRY_PROMPT_AUTHOR = "kandev:step-entry"


class Transitions:
    def __init__(self, clock: Clock, new_id: IdFactory, describer: TaskDescriber) -> None:
        self.clock = clock
        self.new_id = new_id
        self.describer = describer

    async def reorder(
        self, conn: AsyncConnection, target: MoveTarget, position: int, effects: MoveEffects
    ) -> Task:
        """A same-step move to another position: the column is reordered."""
        task = target.task
        await task_repository.shift_positions_from(conn, target.step.id, position, task.id)
        await task_repository.update_task(
            conn, task.id, {"position": position, "updated_at": self.clock.now()}
        )
        moved = await task_repository.get_task(conn, task.id)
        assert moved is not None
        await self.task_event(conn, effects, TASK_UPDATED, moved, {})
        return moved

    async def transition(
        self,
        conn: AsyncConnection,
        target: MoveTarget,
        position: int | None,
        actor: str,
        effects: MoveEffects,
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
            await drop_pending_move(conn, self.clock, stale, DROP_SUPERSEDED, effects)
        if receiver is None and target.primary is not None and not target.primary.is_terminal:
            receiver = target.primary
        await self._enter(conn, moved, workflow, step, options, receiver, effects)
        await self.task_event(conn, effects, TASK_UPDATED, moved, {}, owner_id)
        extra: dict[str, Any] = {
            "from_step_id": task.workflow_step_id,
            "to_step_id": step.id,
            "from_workflow_id": task.workflow_id,
            "to_workflow_id": workflow.id,
            "actor": actor,
        }
        if move_id is not None:
            extra["move_id"] = move_id
        await self.task_event(conn, effects, TASK_MOVED, moved, extra, owner_id)
        return moved

    async def _enter(
        self,
        conn: AsyncConnection,
        task: Task,
        workflow: Workflow,
        step: WorkflowStep,
        options: EntryOptions,
        receiver: Session | None,
        effects: MoveEffects,
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

    async def task_event(
        self,
        conn: AsyncConnection,
        effects: MoveEffects,
        kind: str,
        task: Task,
        extra: dict[str, Any],
        owner_id: str | None = None,
    ) -> None:
        payload = await task_json(self.describer, conn, task)
        if owner_id is None:
            owner_id = await task_owner_id(conn, task.id)
        effects.events.add(kind, {"task": payload, **extra}, task_id=task.id, owner_id=owner_id)


async def restart_fresh(turns: SessionTurns, effects: MoveEffects) -> None:
    for session_id in effects.fresh_context:
        await turns.fresh_agent_context(session_id)


async def deliver_entry_prompts(turns: SessionTurns, effects: MoveEffects) -> None:
    """Entry prompts, after commit and outside any session lock."""
    for session_id in effects.dispatch:
        await turns.dispatch_queued(session_id)
    for session, prompt in effects.direct_prompts:
        await turns.submit_prompt(session, prompt, ENTRY_PROMPT_AUTHOR)
