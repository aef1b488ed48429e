"""The one presenter of tasks for every surface (REST, MCP, pages): the services return
`Task` records, this turns them into their public JSON with the pending-action keys, in one
batch read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kandev.board.models import Task
from kandev.db.engine import Database
from kandev.pending.describe import tasks_json


class TaskPresenter:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def tasks(self, tasks: Sequence[Task]) -> list[dict[str, Any]]:
        async with self.db.read() as conn:
            return await tasks_json(conn, tasks)

    async def task(self, task: Task) -> dict[str, Any]:
        return (await self.tasks([task]))[0]
