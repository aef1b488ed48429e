"""`kandev permissions list|answer`: decide agents' permission requests from a terminal, over
the external MCP endpoint (KANDEV_URL, KANDEV_TOKEN), like `kandev questions`."""

from __future__ import annotations

import json
from typing import Any

import typer

from kandev.cli_http import JSON_OPTION, TOKEN_OPTION, URL_OPTION
from kandev.cli_questions import mcp_tools, run_action, run_listing

permissions_app = typer.Typer(no_args_is_help=True)


def render_request(request: dict[str, Any]) -> str:
    tool = request["tool_call"]
    kind = f" ({tool['kind']})" if tool.get("kind") else ""
    lines = [
        f"{request['pending_id']}  task {request['task_id']}  waiting {request['age_seconds']}s",
        f"  {tool.get('title') or 'permission requested'}{kind}",
    ]
    if tool.get("raw_input") is not None:
        lines.append(f"  input: {json.dumps(tool['raw_input'])}")
    for option in request["options"]:
        lines.append(f"      {option['option_id']:<16} {option['name']} [{option['kind']}]")
    return "\n".join(lines)


@permissions_app.command("list")
def list_permissions(
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    workspace_id: str = typer.Option("", "--workspace", help="Only this workspace."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the permission requests agents are blocked on, oldest first, with their options."""

    run_listing(
        url,
        token,
        ("list_pending_permissions_kandev", "permissions"),
        workspace_id,
        as_json,
        "No agent is waiting for a permission.",
        render_request,
    )


@permissions_app.command("answer")
def answer_permission(
    pending_id: str = typer.Argument(..., help="The request's pending id (from `list`)."),
    option_id: str = typer.Argument(..., help="One of the request's option ids."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Decide a permission request with one of its options. Exactly one decision wins."""

    async def action() -> int:
        async with mcp_tools(url, token) as call:
            result = await call(
                "answer_permission_kandev", {"pending_id": pending_id, "option_id": option_id}
            )
        if as_json:
            typer.echo(json.dumps(result, indent=2))
        elif result["claimed"]:
            typer.echo(
                f"{result['status'].capitalize()} ({result['option_id']}): the agent has it."
            )
        else:
            typer.echo(
                f"Someone decided first: {result['status']} ({result['option_id']}); it stands."
            )
        return 0

    run_action(action)
