"""What the board needs to describe a task in an event or a response: its JSON with the
pending-action keys, which only a layer above sessions can compute (kandev.pending). The
board services receive an implementation at construction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.models import Task


class TaskDescriber(Protocol):
    async def tasks_json(
        self, conn: AsyncConnection, tasks: Sequence[Task]
    ) -> list[dict[str, Any]]: ...


async def task_json(describer: TaskDescriber, conn: AsyncConnection, task: Task) -> dict[str, Any]:
    return (await describer.tasks_json(conn, [task]))[0]
