"""The external MCP endpoint's tool catalog, generated from the live registry.

The catalog is the external MCPServer's own `list_tools()` (names and descriptions exactly as
clients see them), grouped for reading. Grouping only orders: a tool no group names lands in
"Other tools", so a new tool appears on /settings/mcp the moment it is registered and the
page can never drift from the endpoint (tests/web/test_settings_http.py compares the two).
"""

from __future__ import annotations

import json
from typing import Any

from kandev.web.pages_account import ClientConfig, ToolEntry, ToolGroup

# (title, what the group is for, tool names in reading order)
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Answering agent questions",
        "Find the questions agents are blocked on and answer them: exactly one answer wins, "
        "every other caller is told what won.",
        ("list_pending_questions_kandev", "answer_question_kandev"),
    ),
    (
        "Answering permission requests",
        "Allow or deny what an agent asked permission for.",
        ("list_pending_permissions_kandev", "answer_permission_kandev"),
    ),
    (
        "Board",
        "Read workspaces, workflows and their steps.",
        ("list_workspaces_kandev", "list_workflows_kandev", "list_workflow_steps_kandev"),
    ),
    (
        "Tasks",
        "List, create and move tasks, and read what their agents did.",
        (
            "list_tasks_kandev",
            "create_task_kandev",
            "move_task_kandev",
            "list_task_sessions_kandev",
            "get_task_conversation_kandev",
        ),
    ),
)
OTHER = ("Other tools", "More tools of this endpoint.")


async def external_tools(app: Any) -> list[ToolEntry]:
    """The external endpoint's tools as its clients list them (app.state.mcp.external)."""
    tools = await app.state.mcp.external.list_tools()
    return [ToolEntry(name=t.name, description=t.description or "") for t in tools]


def group_tools(tools: list[ToolEntry]) -> list[ToolGroup]:
    """Every tool exactly once; groups without a registered tool are left out."""
    by_name = {t.name: t for t in tools}
    groups: list[ToolGroup] = []
    placed: set[str] = set()
    for title, summary, names in GROUPS:
        members = [by_name[n] for n in names if n in by_name]
        placed.update(t.name for t in members)
        if members:
            groups.append(ToolGroup(title=title, summary=summary, tools=members))
    rest = sorted((t for t in tools if t.name not in placed), key=lambda t: t.name)
    if rest:
        groups.append(ToolGroup(title=OTHER[0], summary=OTHER[1], tools=rest))
    return groups


TOKEN_PLACEHOLDER = "YOUR_TOKEN"  # a PAT from /settings/tokens


def client_configs(base_url: str, auth_on: bool) -> list[ClientConfig]:
    """Copyable setups for the external endpoint; with auth off no credential is sent."""
    url = f"{base_url}/mcp"
    bearer = f"Bearer {TOKEN_PLACEHOLDER}"
    claude = f"claude mcp add --transport http kandev {url}"
    if auth_on:
        claude += f' --header "Authorization: {bearer}"'
    cursor_server: dict[str, Any] = {"url": url}
    vscode_server: dict[str, Any] = {"type": "http", "url": url}
    vscode: dict[str, Any] = {"servers": {"kandev": vscode_server}}
    if auth_on:
        cursor_server["headers"] = {"Authorization": bearer}
        # VS Code prompts for the token once and keeps it in its secret storage.
        vscode_server["headers"] = {"Authorization": "Bearer ${input:kandev-token}"}
        vscode["inputs"] = [
            {
                "type": "promptString",
                "id": "kandev-token",
                "description": "Kandev personal access token",
                "password": True,
            }
        ]
    cli = [f"export KANDEV_URL={base_url}"]
    if auth_on:
        cli.append(f"export KANDEV_TOKEN={TOKEN_PLACEHOLDER}")
    cli += [
        "kandev questions list",
        "kandev questions answer PENDING_ID --option QUESTION_ID=OPTION_ID",
    ]
    return [
        ClientConfig("claude-code", "Claude Code", "in a terminal", "shell", claude),
        ClientConfig(
            "cursor",
            "Cursor",
            "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
            "json",
            json.dumps({"mcpServers": {"kandev": cursor_server}}, indent=2),
        ),
        ClientConfig("vscode", "VS Code", ".vscode/mcp.json", "json", json.dumps(vscode, indent=2)),
        ClientConfig("cli", "Terminal: kandev questions", "in a terminal", "shell", "\n".join(cli)),
    ]
