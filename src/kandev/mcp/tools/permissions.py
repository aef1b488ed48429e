"""Permission tools: decide what agents asked permission for (external surface only)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import StringConstraints

from kandev.mcp.tools.base import EXTERNAL, ToolArgs, ToolContext, ToolSpec


class ListPendingPermissionsArgs(ToolArgs):
    workspace_id: Annotated[str, StringConstraints(max_length=64)] | None = None
    cursor: Annotated[str, StringConstraints(max_length=512)] | None = None
    limit: int | None = None  # clamped to 1..200 (default 50), never rejected


class AnswerPermissionArgs(ToolArgs):
    pending_id: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    option_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]


async def list_pending_permissions(
    ctx: ToolContext, args: ListPendingPermissionsArgs
) -> dict[str, Any]:
    return await ctx.services.permissions.list_pending(
        workspace_id=args.workspace_id, cursor=args.cursor, limit=args.limit
    )


async def answer_permission(ctx: ToolContext, args: AnswerPermissionArgs) -> dict[str, Any]:
    return await ctx.services.permissions.respond(
        args.pending_id, args.option_id, via=ctx.answer_surface()
    )


LIST_DESCRIPTION = (
    "List the permission requests agents are blocked on, in the workspaces you can see, oldest "
    'first: {"permissions": [{pending_id, task_id, session_id, created_at, age_seconds, '
    'tool_call: {title, kind, raw_input}, options: [{option_id, name, kind}]}], "count", '
    '"next_cursor"}. raw_input is what the tool would run (e.g. the command). Filter with '
    "workspace_id; page with cursor (pass next_cursor back; empty means no more) and limit "
    "(default 50, at most 200). Decide with answer_permission_kandev."
)
ANSWER_DESCRIPTION = (
    "Decide a permission request an agent is blocked on: pending_id and the option_id of one "
    "of its options (allow_* options allow, reject_* options reject). Exactly one decision "
    "wins: the winner gets claimed: true; if someone decided first you get claimed: false "
    "with the winning status and option_id (a success, nothing to redo). A request that is no "
    "longer open (expired) is a CONFLICT error; an option the request does not offer is a "
    'VALIDATION_ERROR. Result: {pending_id, claimed, status: "allowed"|"rejected", option_id}.'
)

TOOLS = (
    ToolSpec(
        "list_pending_permissions_kandev",
        LIST_DESCRIPTION,
        ListPendingPermissionsArgs,
        list_pending_permissions,
        EXTERNAL,
    ),
    ToolSpec(
        "answer_permission_kandev",
        ANSWER_DESCRIPTION,
        AnswerPermissionArgs,
        answer_permission,
        EXTERNAL,
    ),
)
