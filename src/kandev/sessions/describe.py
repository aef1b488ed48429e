"""What sessions need to describe a session in an event or a response: its JSON with
`pending_action` / `pending_clarification_id`, computed above this package
(kandev.pending) and handed to the recorder and the session service at construction."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.describe import TaskDescriber
from kandev.board.models import Task
from kandev.sessions.models import Session

# Columns a layer above has the session view read in its one statement, rather than read
# them in a statement of its own: given the described sessions (a FROM whose `id` and
# `task_id` columns are each session's), labeled column expressions correlated on that row.
# A module-level function, so the statement it shapes is built once (kandev.pending.view).
ViewColumns = Callable[[Any], Sequence[Any]]


class SessionsView(Protocol):
    """The described sessions of a task, read in one statement inside a write transaction
    (kandev.pending.view): writers patch it with the rows they changed and describe the
    result without reading again."""

    def session(self, session_id: str) -> Session | None: ...

    def sessions_of(self, task_id: str) -> list[Session]: ...

    def owner_id(self, task_id: str) -> str: ...

    def session_json(self, session_id: str) -> dict[str, Any]: ...

    def task_json(self, task: Task) -> dict[str, Any]: ...

    def has_open_question(self, session_id: str) -> bool: ...

    def has_pending_permission(self, session_id: str) -> bool: ...

    def pending_action(self, session_id: str) -> str | None: ...

    def has_queued_prompt(self, session_id: str) -> bool: ...

    def extra(self, session_id: str) -> Mapping[str, Any] | None:
        """The session's values of the `ViewColumns` the view was read with (None when the
        session is not in the view)."""
        ...

    def replace_session(self, session: Session) -> None: ...

    def clarifications_settled(self, session_id: str) -> None: ...

    def permissions_settled(self, session_id: str) -> None: ...


class SessionDescriber(TaskDescriber, Protocol):
    async def sessions_json(
        self, conn: AsyncConnection, sessions: Sequence[Session]
    ) -> list[dict[str, Any]]: ...

    async def view_of_session_task(
        self,
        conn: AsyncConnection,
        session_id: str,
        *,
        task_changing_to: str | None = None,
        all_sessions: bool = False,
        columns: tuple[ViewColumns, ...] = (),
    ) -> SessionsView: ...

    async def view_of_sessions(
        self, conn: AsyncConnection, session_ids: Sequence[str]
    ) -> SessionsView: ...
