"""Publishing domain events with the scope they need (the owning workspace's owner)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.tables import tasks, workspaces
from kandev.events.bus import EventBus


async def task_owner_id(conn: AsyncConnection, task_id: str) -> str:
    """'' when the task has no workspace, a dangling one, or an unowned one."""
    owner = (
        await conn.execute(
            select(workspaces.c.owner_id)
            .select_from(tasks.join(workspaces, workspaces.c.id == tasks.c.workspace_id))
            .where(tasks.c.id == task_id)
        )
    ).scalar_one_or_none()
    return owner or ""


class PendingEvents:
    """Events gathered inside a transaction, published only after it commits."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self._items: list[tuple[str, dict[str, Any], str | None, str | None, str]] = []
        self._after: list[Callable[[], None]] = []

    def add(
        self,
        type: str,
        data: dict[str, Any],
        *,
        task_id: str | None,
        session_id: str | None = None,
        owner_id: str = "",
    ) -> None:
        self._items.append((type, data, task_id, session_id, owner_id))

    def after(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the events are published (the transaction committed): what
        must not happen for a change that could still roll back, e.g. waking a waiter."""
        self._after.append(callback)

    def publish(self) -> None:
        for type, data, task_id, session_id, owner_id in self._items:
            self.bus.publish(type, data, task_id=task_id, session_id=session_id, owner_id=owner_id)
        self._items.clear()
        callbacks, self._after = self._after, []
        for callback in callbacks:
            callback()
