"""`kandev questions list|answer`: answer agents from a terminal, over the external MCP
endpoint (KANDEV_URL, KANDEV_TOKEN), like any other MCP client would."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import typer

from kandev.cli_http import (
    JSON_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    CommandFailed,
    fail,
    refusal_message,
    root_url,
    unreachable_message,
)

questions_app = typer.Typer(no_args_is_help=True)

ToolCall = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class McpCallFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@asynccontextmanager
async def mcp_tools(url: str, token: str) -> AsyncIterator[ToolCall]:
    """One HTTP client on the server's external MCP endpoint for the whole command; yields
    a `call(name, arguments)` returning the tool's JSON object (McpCallFailed on a tool
    error). A refusal (401, 404, …) or an unreachable server is a CommandFailed saying so."""
    import httpx

    from kandev import CLI_CLIENT_NAME, __version__
    from kandev.agents.http_tls import tls_verify_for
    from kandev.cli_mcp import McpClient, McpProtocolError, McpRefused

    base = root_url(url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            # Names the terminal, so the server records its answers via "cli".
            result = await client.call_tool(name, arguments)
        except McpRefused as exc:
            message = exc.message
            if exc.status == 404:
                message = f"no Kandev MCP endpoint at {base}/mcp; --url takes the server's root URL"
            raise CommandFailed(
                refusal_message(exc.status, message, token_given=bool(token))
            ) from None
        except McpProtocolError as exc:
            raise CommandFailed(f"the server's MCP answer was not understood: {exc}") from None
        except httpx.TransportError as exc:
            raise CommandFailed(unreachable_message(base, exc)) from None
        payload = json.loads(result.text) if result.text else {}
        if result.is_error:
            raise McpCallFailed(payload.get("code", "ERROR"), payload.get("message", result.text))
        return payload

    async with httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(30, read=120),
        verify=tls_verify_for(base),  # no CA bundle loaded for http://
    ) as http:
        client = McpClient(http, f"{base}/mcp", CLI_CLIENT_NAME, __version__)
        yield call


def run_action(action: Callable[[], Coroutine[Any, Any, int]]) -> None:
    """Run a command's action: a tool error or a refusal is one line and exit 1."""
    try:
        import asyncio  # here: `kandev --help` and the REST commands do without it

        code = asyncio.run(action())
    except McpCallFailed as exc:
        fail(_tool_failure(exc))
    except CommandFailed as exc:
        fail(exc.message, exc.exit_code)
    raise typer.Exit(code)


def _tool_failure(exc: McpCallFailed) -> str:
    if exc.code == "NOT_FOUND":
        return f"{exc.message} (an unknown id, or not in a workspace you can see)"
    if exc.code == "CONFLICT":
        return f"{exc.message}: nobody answered it and it is no longer open"
    return f"{exc.code}: {exc.message}"


async def _all_bundles(call: ToolCall, workspace_id: str | None) -> list[dict[str, Any]]:
    return await all_pages(call, "list_pending_questions_kandev", "bundles", workspace_id)


async def all_pages(
    call: ToolCall, tool: str, key: str, workspace_id: str | None
) -> list[dict[str, Any]]:
    """Every item of a paged listing tool (`key` holds a page's items), following cursors."""
    found: list[dict[str, Any]] = []
    cursor = ""
    while True:
        args: dict[str, Any] = {"limit": 200}
        if cursor:
            args["cursor"] = cursor
        if workspace_id:
            args["workspace_id"] = workspace_id
        page = await call(tool, args)
        found += page[key]
        cursor = page["next_cursor"]
        if not cursor:
            return found


def render_bundle(bundle: dict[str, Any]) -> str:
    lines = [
        f"{bundle['pending_id']}  task {bundle['task_id']}  waiting {bundle['age_seconds']}s",
    ]
    if bundle["context"]:
        lines.append(f"  context: {bundle['context']}")
    for question in bundle["questions"]:
        title = f" [{question['title']}]" if question["title"] else ""
        lines.append(f"  {question['question_id']}{title}: {question['prompt']}")
        for option in question["options"]:
            lines.append(
                f"      {option['option_id']:<16} {option['label']} — {option['description']}"
            )
    return "\n".join(lines)


def echo_listing(
    items: list[dict[str, Any]],
    as_json: bool,
    empty: str,
    render: Callable[[dict[str, Any]], str],
) -> None:
    """A listing command's output: the JSON list, a line saying it is empty, or the items."""
    if as_json:
        typer.echo(json.dumps(items, indent=2))
    elif not items:
        typer.echo(empty)
    else:
        typer.echo("\n\n".join(render(item) for item in items))


@questions_app.command("list")
def list_questions(
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    workspace_id: str = typer.Option("", "--workspace", help="Only this workspace."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the questions agents are waiting on, oldest first, with their options."""

    run_listing(
        url,
        token,
        ("list_pending_questions_kandev", "bundles"),
        workspace_id,
        as_json,
        "No agent is waiting for an answer.",
        render_bundle,
    )


def run_listing(
    url: str,
    token: str,
    tool_and_key: tuple[str, str],
    workspace_id: str,
    as_json: bool,
    empty: str,
    render: Callable[[dict[str, Any]], str],
) -> None:
    """A `list` command: every page of a listing tool, printed by `echo_listing`."""
    tool, key = tool_and_key

    async def action() -> int:
        async with mcp_tools(url, token) as call:
            items = await all_pages(call, tool, key, workspace_id or None)
        echo_listing(items, as_json, empty, render)
        return 0

    run_action(action)


def parse_pairs(values: list[str], flag: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise typer.BadParameter(f"expected QUESTION_ID=VALUE, got {value!r}", param_hint=flag)
        pairs.append((key, rest))
    return pairs


def build_answers(
    bundle: dict[str, Any], options: list[tuple[str, str]], texts: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """One entry per question of the bundle; every question must be addressed."""
    ids = [q["question_id"] for q in bundle["questions"]]
    for qid, _ in options + texts:
        if qid not in ids:
            raise typer.BadParameter(f"no question {qid!r} (questions: {', '.join(ids)})")
    answers = []
    for qid in ids:
        chosen = [o for q, o in options if q == qid]
        text = "\n".join(t for q, t in texts if q == qid)
        if not chosen and not text:
            raise typer.BadParameter(
                f"question {qid!r} has no answer: add --option {qid}=OPTION_ID or "
                f"--text {qid}=TEXT (or --reject REASON to decline them all)"
            )
        answers.append({"question_id": qid, "selected_options": chosen, "custom_text": text})
    return answers


def answers_as_given(
    options: list[tuple[str, str]], texts: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The answer entries as typed, for a question that is not open (nothing to check
    them against here; the server still validates them)."""
    ids = list(dict.fromkeys(qid for qid, _ in options + texts))
    return [
        {
            "question_id": qid,
            "selected_options": [o for q, o in options if q == qid],
            "custom_text": "\n".join(t for q, t in texts if q == qid),
        }
        for qid in ids
    ]


@questions_app.command("answer")
def answer_question(
    pending_id: str = typer.Argument(..., help="The question's pending id (from `list`)."),
    option: list[str] = typer.Option(
        [], "--option", "-o", help="QUESTION_ID=OPTION_ID; repeat to pick several."
    ),
    text: list[str] = typer.Option([], "--text", "-t", help="QUESTION_ID=free text."),
    reject: str | None = typer.Option(None, "--reject", help="Decline, with this reason."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Answer a question (or decline it with --reject). Exactly one answer wins."""
    options, texts = parse_pairs(option, "--option"), parse_pairs(text, "--text")
    if reject is not None and (options or texts):
        raise typer.BadParameter("--reject cannot be combined with --option/--text")
    if reject is None and not (options or texts):
        raise typer.BadParameter(
            "nothing to answer with: give --option QUESTION_ID=OPTION_ID or --text "
            "QUESTION_ID=TEXT for each question, or --reject REASON"
        )

    async def action() -> int:
        arguments: dict[str, Any] = {"pending_id": pending_id}
        async with mcp_tools(url, token) as call:
            if reject is not None:
                arguments.update(rejected=True, reason=reject)
            else:
                bundles = await _all_bundles(call, None)
                bundle = next((b for b in bundles if b["pending_id"] == pending_id), None)
                # Not open (answered already, or unknown): the server says which, and for an
                # answered one replays the winner, exactly as for --reject.
                arguments["answers"] = (
                    build_answers(bundle, options, texts)
                    if bundle is not None
                    else answers_as_given(options, texts)
                )
            result = await call("answer_question_kandev", arguments)
        if as_json:
            typer.echo(json.dumps(result, indent=2))
            return 0
        response = result["response"]
        declined = result["status"] == "rejected"
        if result["claimed"] and declined:
            typer.echo("Declined: the agent was told you skipped its questions.")
        elif result["claimed"]:
            typer.echo(f"{result['status'].capitalize()}: the agent has your answer.")
        else:
            typer.echo(f"Someone answered first ({result['status']}); their answer stands:")
        if declined and not result["claimed"]:
            typer.echo("  the questions were declined")  # a replay carries no reason (R2b)
        for entry in response["answers"]:
            picked = ", ".join(entry["selected_options"]) or "-"
            extra = f"  {entry['custom_text']}" if entry["custom_text"] else ""
            typer.echo(f"  {entry['question_id']}: {picked}{extra}")
        return 0

    run_action(action)
