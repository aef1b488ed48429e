"""move_task_kandev: move a task to a workflow step, on both MCP surfaces (one MoveService)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kandev.board.inputs import Prompt, RowId
from kandev.mcp.tools.base import BOTH, ToolArgs, ToolContext, ToolSpec
from kandev.moves.models import ACTOR_AGENT, ACTOR_EXTERNAL, MoveRequest


class MoveTaskArgs(ToolArgs):
    task_id: RowId
    workflow_id: RowId
    workflow_step_id: RowId
    position: int | None = Field(default=None, ge=0, le=1_000_000)
    instructions: Prompt | None = None
    prompt: Prompt | None = None
    reset: bool | None = None
    skip: bool | None = None


async def move_task(ctx: ToolContext, args: MoveTaskArgs) -> dict[str, Any]:
    agent = ctx.agent  # on /agent/mcp the caller's own session is the sender
    request = MoveRequest(
        task_id=args.task_id,
        workflow_id=args.workflow_id,
        workflow_step_id=args.workflow_step_id,
        position=args.position,
        instructions=args.instructions,
        prompt=args.prompt,
        reset=args.reset,
        skip=args.skip,
        actor=ACTOR_AGENT if agent is not None else ACTOR_EXTERNAL,
        sender_session_id=agent.session_id if agent is not None else "",
    )
    moves = ctx.services.moves
    return await moves.presenter.envelope(await moves.move(request), "mcp")


DESCRIPTION = (
    "Move a task to a step of a workflow in its workspace. Returns "
    '{"disposition", "task", "move_id"?}. disposition "applied": the task is now on that step '
    "(it moved, or it already was there: a same-step request changes nothing and returns the "
    'stored task). disposition "deferred": the task\'s agent is in the middle of a turn, so the '
    "move is applied when that turn ends (before turn-complete automation); move_id names it, "
    "and a newer move of the same task replaces it. Entry options, only for a different step: "
    "instructions (prompt is its legacy alias) are sent to the task's agent on entry, reset "
    "gives the agent a fresh context, skip skips the step's on-enter automation once. "
    "position places the task in the target column (default: the end)."
)

TOOLS = (ToolSpec("move_task_kandev", DESCRIPTION, MoveTaskArgs, move_task, BOTH),)
