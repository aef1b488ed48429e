"""The seams of the turn lifecycle: what the orchestrator calls on the layers above it
(clarification, moves, repositories) without importing them.

Callbacks are registered on `Orchestrator.hooks` by the container, in order; the
orchestrator calls every one at its moment. The turn-end ones run inside the one turn-end
transaction (the recorder's `finish_turn`), so a turn ends in one transaction however many
layers have something to say about it, and a hook with nothing to do reads nothing more.
A resume of a detached answer brings its own `ResumeReservation` (clarification owns those
rows); the worktree a task's agent runs in comes from a `Workdirs` given at construction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.models import Task
from kandev.events.publisher import PendingEvents
from kandev.sessions.describe import SessionsView, ViewColumns
from kandev.sessions.models import Session


class DispatchRejected(Exception):
    """Nothing was sent to the agent (the session ended, the agent is busy or failed to
    start): the caller may restore what it claimed."""


class PromptNotSent(Exception):
    """The resume turn started but its prompt never reached the agent (it died first)."""


# What a hook leaves to do once the turn-end transaction committed.
AfterCommit = Callable[[], Awaitable[None]]


class TurnEnding(Protocol):
    """A turn is ending, inside the turn-end transaction (before the session's state is
    settled): returns True when the session now waits for a human. `view` describes the
    task's sessions as the transaction read them; a hook that changes what it describes
    patches it, and adds its events to `events` (published after the commit)."""

    async def __call__(
        self, conn: AsyncConnection, session_id: str, view: SessionsView, events: PendingEvents
    ) -> bool: ...


class TurnEnded(Protocol):
    """The turn ended (`waiting`: for a human), in the same transaction, after the session's
    state settled; under the turn lock. `view` is the turn end's view of the task's
    sessions, read with every hook's `TurnHooks.view_columns`. Returns what to do after the
    commit, if anything."""

    async def __call__(
        self,
        conn: AsyncConnection,
        session: Session,
        *,
        stop_reason: str,
        waiting: bool,
        view: SessionsView,
    ) -> AfterCommit | None: ...


@dataclass
class TurnHooks:
    # A new turn starts on the session: live ask calls of the old turn end (sync).
    superseded: list[Callable[[str], None]] = field(default_factory=list)
    # A turn is ending: each returns True when the session now waits for a human.
    turn_ending: list[TurnEnding] = field(default_factory=list)
    # A turn ended, in the same transaction.
    turn_ended: list[TurnEnded] = field(default_factory=list)
    # What the turn_ended hooks read: in the turn end's one view statement, not their own.
    view_columns: list[ViewColumns] = field(default_factory=list)
    # The session ended (stopped, failed): no turn of it will end again. What a callback
    # returns (e.g. how many questions it expired) is not used.
    session_ended: list[Callable[[str], Awaitable[object]]] = field(default_factory=list)


class ResumeReservation(Protocol):
    """The rows a detached resume writes around its turn (reference §1.4): reserved before
    the agent is started, released if nothing was sent, marked attempted right before the
    prompt goes out, published when the turn opens."""

    async def reserve(
        self, conn: AsyncConnection, turn_id: str, session: Session, now: datetime
    ) -> None: ...

    async def release(self, conn: AsyncConnection, turn_id: str) -> None: ...

    async def mark_attempted(self, conn: AsyncConnection, turn_id: str, now: datetime) -> None: ...

    async def publish(self, conn: AsyncConnection, turn_id: str, now: datetime) -> bool: ...


class Workdirs(Protocol):
    """The working directory of a task on a repository: its worktree (created on use).
    Raises AgentFailed with a readable reason."""

    async def ensure_worktree(self, task: Task, session: Session) -> Path: ...
