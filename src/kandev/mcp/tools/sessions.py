"""Session tools: a task's sessions and its conversation."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kandev.board.inputs import RowId
from kandev.errors import NotFound
from kandev.mcp.tools.base import BOTH, ToolArgs, ToolContext, ToolSpec
from kandev.sessions.inputs import MessagePageQuery

SESSION_NOT_FOUND = "session not found"


class TaskArgs(ToolArgs):
    task_id: RowId


class ConversationArgs(ToolArgs):
    task_id: RowId
    session_id: RowId | None = None
    limit: int = Field(default=100, ge=1, le=500)


async def list_task_sessions(ctx: ToolContext, args: TaskArgs) -> dict[str, Any]:
    return {"sessions": await ctx.services.sessions.list_task_sessions(args.task_id)}


def _pick_session(sessions: list[dict[str, Any]], session_id: str | None) -> str | None:
    """The asked-for session (it must belong to the task), else the primary, else the newest."""
    if session_id is not None:
        if not any(s["id"] == session_id for s in sessions):
            raise NotFound(SESSION_NOT_FOUND)
        return session_id
    primary = next((s for s in sessions if s["is_primary"]), None)
    if primary is not None:
        return primary["id"]
    return sessions[-1]["id"] if sessions else None  # listed oldest first


async def get_task_conversation(ctx: ToolContext, args: ConversationArgs) -> dict[str, Any]:
    """The latest `limit` messages of one session of the task, oldest first."""
    sessions = await ctx.services.sessions.list_task_sessions(args.task_id)  # authorizes the task
    session_id = _pick_session(sessions, args.session_id)
    if session_id is None:
        return {"task_id": args.task_id, "session_id": None, "messages": [], "has_more": False}
    newest_first, has_more = await ctx.services.sessions.list_messages(
        session_id, MessagePageQuery(limit=args.limit, sort="desc")
    )
    return {
        "task_id": args.task_id,
        "session_id": session_id,
        "messages": [m.to_json() for m in reversed(newest_first)],
        "has_more": has_more,
    }


TOOLS = (
    ToolSpec(
        "list_task_sessions_kandev",
        "List the agent sessions of a task, oldest first.",
        TaskArgs,
        list_task_sessions,
        BOTH,
    ),
    ToolSpec(
        "get_task_conversation_kandev",
        "Read a task's conversation: the latest messages (oldest first) of the given session, "
        "else of the task's primary session, else of its newest session.",
        ConversationArgs,
        get_task_conversation,
        BOTH,
    ),
)
