"""`kandev questions list|answer`: answer agents from a terminal, over the external MCP
endpoint (KANDEV_URL, KANDEV_TOKEN), like any other MCP client would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import typer

questions_app = typer.Typer(no_args_is_help=True)

URL_OPTION = typer.Option(
    "http://127.0.0.1:8420", "--url", envvar="KANDEV_URL", help="Kandev server URL."
)
TOKEN_OPTION = typer.Option(
    "", "--token", envvar="KANDEV_TOKEN", help="Personal access token (needed when auth is on)."
)


class McpCallFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


async def call_tool(url: str, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    endpoint = url.rstrip("/") + "/mcp"
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(endpoint, http_client=http)) as client,
    ):
        result = await client.call_tool(name, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    payload = json.loads(text) if text else {}
    if result.is_error:
        raise McpCallFailed(payload.get("code", "ERROR"), payload.get("message", text))
    return payload


def _run(action: Callable[[], Awaitable[int]]) -> None:
    try:
        code = asyncio.run(action())
    except McpCallFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except typer.BadParameter:
        raise  # usage errors keep their own message and exit code (2)
    except Exception as exc:  # connection refused, 401, …: say what, not a traceback
        typer.echo(f"error: could not reach Kandev: {_describe(exc)}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return str(exc) or type(exc).__name__


async def _all_bundles(url: str, token: str, workspace_id: str | None) -> list[dict[str, Any]]:
    bundles: list[dict[str, Any]] = []
    cursor = ""
    while True:
        args: dict[str, Any] = {"limit": 200}
        if cursor:
            args["cursor"] = cursor
        if workspace_id:
            args["workspace_id"] = workspace_id
        page = await call_tool(url, token, "list_pending_questions_kandev", args)
        bundles += page["bundles"]
        cursor = page["next_cursor"]
        if not cursor:
            return bundles


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


@questions_app.command("list")
def list_questions(
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    workspace_id: str = typer.Option("", "--workspace", help="Only this workspace."),
    as_json: bool = typer.Option(False, "--json", help="Print the raw bundles as JSON."),
) -> None:
    """Show the questions agents are waiting on, oldest first, with their options."""

    async def action() -> int:
        bundles = await _all_bundles(url, token, workspace_id or None)
        if as_json:
            typer.echo(json.dumps(bundles, indent=2))
        elif not bundles:
            typer.echo("No agent is waiting for an answer.")
        else:
            typer.echo("\n\n".join(render_bundle(b) for b in bundles))
        return 0

    _run(action)


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
) -> None:
    """Answer a question (or decline it with --reject). Exactly one answer wins."""
    options, texts = parse_pairs(option, "--option"), parse_pairs(text, "--text")
    if reject is not None and (options or texts):
        raise typer.BadParameter("--reject cannot be combined with --option/--text")

    async def action() -> int:
        arguments: dict[str, Any] = {"pending_id": pending_id}
        if reject is not None:
            arguments.update(rejected=True, reason=reject)
        else:
            bundles = await _all_bundles(url, token, None)
            bundle = next((b for b in bundles if b["pending_id"] == pending_id), None)
            if bundle is None:
                typer.echo(f"error: no open question {pending_id}", err=True)
                return 1
            arguments["answers"] = build_answers(bundle, options, texts)
        result = await call_tool(url, token, "answer_question_kandev", arguments)
        response = result["response"]
        if result["claimed"]:
            typer.echo(f"{result['status'].capitalize()}: the agent has your answer.")
        else:
            typer.echo(f"Someone answered first ({result['status']}); their answer stands:")
        for entry in response["answers"]:
            picked = ", ".join(entry["selected_options"]) or "-"
            extra = f"  {entry['custom_text']}" if entry["custom_text"] else ""
            typer.echo(f"  {entry['question_id']}: {picked}{extra}")
        return 0

    _run(action)
