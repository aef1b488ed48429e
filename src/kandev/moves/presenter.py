"""The move envelope, one for every surface: `{"disposition", "task", "workflow_step"?,
"move_id"?}`. The surfaces differ in one key, so the shape is a parameter:

- `"rest"` (`POST /api/v1/tasks/{id}/move`): with `workflow_step`, the step the task is on. A
  person's move is never deferred, so it has no `move_id`.
- `"mcp"` (`move_task_kandev`): without `workflow_step`; `move_id` when deferred.

`task` is the task's public JSON with its pending-action keys."""

from __future__ import annotations

from typing import Any, Literal

from kandev.board.describe import TaskDescriber, task_json
from kandev.db.engine import Database
from kandev.moves.models import MoveResult

EnvelopeShape = Literal["rest", "mcp"]


class MovePresenter:
    def __init__(self, db: Database, describer: TaskDescriber) -> None:
        self.db = db
        self.describer = describer

    async def envelope(self, result: MoveResult, shape: EnvelopeShape) -> dict[str, Any]:
        async with self.db.read() as conn:
            task = await task_json(self.describer, conn, result.task)
        body: dict[str, Any] = {"disposition": result.disposition, "task": task}
        if shape == "rest":
            body["workflow_step"] = result.step.to_json()
        if result.move_id is not None:
            body["move_id"] = result.move_id
        return body
