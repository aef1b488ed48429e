"""`kandev session start|prompt|watch`: run agents from a terminal, over REST and the event
stream (KANDEV_URL, KANDEV_TOKEN; CONTRACT §4, §12)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

import typer

from kandev.catalog.events import (
    SESSION_MESSAGE_ADDED,
    SESSION_MESSAGE_UPDATED,
    SESSION_STATE_CHANGED,
    SESSION_TURN_COMPLETED,
    SESSION_TURN_STARTED,
)
from kandev.cli_http import (
    DEFAULT_URL,
    JSON_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    CommandFailed,
    KandevClient,
    client_for,
    print_json,
    render_record,
    run_command,
)

session_app = typer.Typer(no_args_is_help=True, help="Agent sessions: start, prompt, watch.")

TERMINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED")
SESSION_FIELDS = (
    ("id", "id"),
    ("task", "task_id"),
    ("state", "state"),
    ("primary", "is_primary"),
    ("profile", "agent_profile_id"),
    ("needs input", "pending_action"),
    ("started", "started_at"),
)
HISTORY_LIMIT = "100"  # messages shown from before the watch began


def _resolve_profile(client: KandevClient, wanted: str) -> str:
    profiles = client.get("/api/v1/agent-profiles")["agent_profiles"]
    for profile in profiles:
        if profile["id"] == wanted:
            return wanted
    named = [p for p in profiles if p["name"].casefold() == wanted.casefold()]
    if len(named) == 1:
        return named[0]["id"]
    known = ", ".join(p["name"] for p in profiles) or "none"
    raise CommandFailed(f"no agent profile {wanted!r} (profiles: {known})")


@session_app.command("start")
def session_start(
    task_id: str = typer.Argument(..., help="Task id."),
    profile: str = typer.Option(
        "", "--profile", help="Agent profile name or id (e.g. demo); none: bring your own agent."
    ),
    prompt: str = typer.Option("", "--prompt", help="The first prompt: starts the first turn."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Start a session on a task and print it."""

    def action() -> None:
        client = client_for(url, token)
        body: dict[str, Any] = {}
        if profile:
            body["agent_profile_id"] = _resolve_profile(client, profile)
        if prompt:
            body["prompt"] = prompt
        session = client.post(f"/api/v1/tasks/{task_id}/sessions", body)
        if as_json:
            print_json(session)
            return
        typer.echo(render_record(session, SESSION_FIELDS))
        typer.echo(f"\nFollow it: kandev session watch {session['id']}")

    run_command(action)


@session_app.command("prompt")
def session_prompt(
    session_id: str = typer.Argument(..., help="Session id."),
    text: str = typer.Argument(..., help="What to tell the agent."),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Send the agent a prompt: a new turn now, or queued while a turn runs."""

    def action() -> None:
        result = client_for(url, token).post(
            f"/api/v1/sessions/{session_id}/prompt", {"text": text}
        )
        if as_json:
            print_json(result)
        elif result.get("queued"):
            typer.echo("Queued: it starts when the running turn ends.")
        else:
            typer.echo(f"Sent: turn {result['turn_id']} started.")

    run_command(action)


@session_app.command("watch")
def session_watch(
    session_id: str = typer.Argument(..., help="Session id."),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Keep watching across turns, until it ends or Ctrl-C."
    ),
    url: str = URL_OPTION,
    token: str = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the live conversation until the session settles (idle after a turn, or ended).

    A question is shown with its options and the command that answers it; the watch goes on
    while the agent waits. Ctrl-C stops watching (the session goes on).
    """
    client = client_for(url, token)
    hint_url = "" if client.url == DEFAULT_URL else client.url
    printer = JsonPrinter() if as_json else ConversationPrinter(hint_url)
    _leave_on_ctrl_c(printer)
    state = run_command(lambda: watch(client, session_id, printer, follow=follow))
    printer.close_line()
    if state == "FAILED":
        raise typer.Exit(1)


def _leave_on_ctrl_c(printer: Printer) -> None:
    """Ctrl-C ends the watch at once, with exit code 0. A watch holds nothing the server needs
    back, and a KeyboardInterrupt raised inside the HTTP client can land in one of its locked
    sections, whose cleanup then waits on that same lock forever (a watch that ignored Ctrl-C
    was seen under load); so the handler finishes the line and leaves without unwinding."""

    def leave(signum: int, frame: object) -> None:
        with contextlib.suppress(Exception):  # a write cut in the middle may refuse a re-entry
            printer.close_line()
            sys.stdout.flush()
        os._exit(0)

    signal.signal(signal.SIGINT, leave)


def watch(client: KandevClient, session_id: str, printer: Printer, *, follow: bool) -> str:
    """Print the conversation, then its events, until the session settles; its last state.

    Settled: a terminal state, or IDLE when the watch starts or right after a turn ended
    (not the IDLE of an agent that has just started and is about to take its first prompt).
    """
    last_id: int | None = None
    session: dict[str, Any] | None = None
    turn_ended = False
    while True:
        for event in client.events(last_id, session_id=session_id):
            kind = event["type"]
            if kind == "_connected":
                if session is None:  # first connection: history, then live events
                    session = client.get(f"/api/v1/sessions/{session_id}")
                    messages = client.get(
                        f"/api/v1/sessions/{session_id}/messages",
                        limit=HISTORY_LIMIT,
                        sort="desc",
                    )["messages"]
                    for message in reversed(messages):
                        printer.message(message)
                    printer.state(session["state"], session.get("error_message") or "")
                    if _settled(session["state"], follow, turn_ended=True):
                        return session["state"]
                continue
            last_id = event.get("id", last_id)
            if kind in (SESSION_MESSAGE_ADDED, SESSION_MESSAGE_UPDATED):
                printer.message(event["message"])
            elif kind in (SESSION_TURN_STARTED, SESSION_TURN_COMPLETED):
                turn_ended = kind == SESSION_TURN_COMPLETED
            elif kind == SESSION_STATE_CHANGED:
                state = event["state"]
                if session is not None and state != session["state"]:
                    session["state"] = state
                    printer.state(state, event.get("error_message") or "")
                    if _settled(state, follow, turn_ended=turn_ended):
                        return state
        # The server closed the stream (a restart?): pick up where it left off.


def _settled(state: str, follow: bool, *, turn_ended: bool) -> bool:
    if state in TERMINAL_STATES:
        return True
    return state == "IDLE" and turn_ended and not follow


# --- rendering ----------------------------------------------------------------------------


class Printer:
    def message(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

    def state(self, state: str, error: str) -> None:
        raise NotImplementedError

    def close_line(self) -> None:
        return None


class JsonPrinter(Printer):
    """--json: one JSON object a line (messages as they are now, and states)."""

    def message(self, message: dict[str, Any]) -> None:
        import json

        typer.echo(json.dumps({"message": message}, ensure_ascii=False))

    def state(self, state: str, error: str) -> None:
        import json

        typer.echo(json.dumps({"state": state, "error_message": error}))


class ConversationPrinter(Printer):
    """The conversation as a person reads it. Agent text streams in (a message grows with
    each `session.message.updated`); everything else is printed once per change."""

    def __init__(self, hint_url: str) -> None:
        self.hint_url = hint_url  # added to the answer command when not the default
        self.shown: dict[str, str] = {}  # message id → what was printed of it (text or status)
        self.tool_titles: dict[str, str] = {}
        self.open_line: str | None = None  # the message whose text the cursor follows
        self.bundles: dict[str, list[dict[str, Any]]] = {}  # pending id → question messages

    def close_line(self) -> None:
        if self.open_line is not None:
            typer.echo()
            self.open_line = None

    def _say(self, text: str) -> None:
        self.close_line()
        typer.echo(text)

    def state(self, state: str, error: str) -> None:
        self._say(f"-- session {state}{': ' + error if error else ''}")

    def message(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind in ("message", "thinking") and message["author_type"] != "user":
            self._stream(message, "agent: " if kind == "message" else "(thinking) ")
        elif kind == "message":
            self._once(message, message["content"], self._user)
        elif kind == "tool_call":
            self._tool_call(message)
        elif kind == "clarification_request":
            self._question(message)
        elif kind == "permission_request":
            status = message["metadata"].get("status", "")
            self._once(message, status, self._permission)
        elif kind == "error":
            self._once(message, message["content"], lambda m: f"error: {m['content']}")
        else:
            self._once(message, message["content"], lambda m: f"[{kind}] {m['content']}")

    def _once(self, message: dict[str, Any], key: str, render: Any) -> None:
        if self.shown.get(message["id"]) == key:
            return
        self.shown[message["id"]] = key
        self._say(render(message))

    def _user(self, message: dict[str, Any]) -> str:
        who = "kandev" if message["metadata"].get("clarification_resume") else "you"
        return f"> {who}: {message['content']}"

    def _stream(self, message: dict[str, Any], prefix: str) -> None:
        content = message["content"]
        printed = self.shown.get(message["id"])
        if printed is not None and printed.startswith(content):
            return  # an older copy of what is already on screen
        self.shown[message["id"]] = content
        if printed is not None and content.startswith(printed) and self.open_line == message["id"]:
            typer.echo(content[len(printed) :], nl=False)
            return
        self.close_line()
        typer.echo(prefix + content, nl=False)
        self.open_line = message["id"]

    def _tool_call(self, message: dict[str, Any]) -> None:
        metadata = message["metadata"]
        title = metadata.get("title") or self.tool_titles.get(message["id"]) or message["content"]
        self.tool_titles[message["id"]] = title
        status = metadata.get("status", "")
        self._once(message, status, lambda _: f"tool: {title} [{status or 'pending'}]")

    def _permission(self, message: dict[str, Any]) -> str:
        metadata = message["metadata"]
        call = metadata.get("tool_call") or {}
        options = ", ".join(
            f"{o.get('option_id')} ({o.get('name')})" for o in metadata.get("options") or []
        )
        return (
            f"permission {metadata.get('status', '')}: {call.get('title') or message['content']}"
            + (f"\n   options: {options}" if options else "")
        )

    def _question(self, message: dict[str, Any]) -> None:
        metadata = message["metadata"]
        pending_id = metadata.get("pending_id", "")
        status = metadata.get("status", "")
        if self.shown.get(message["id"]) == status:
            return
        first_sight = message["id"] not in self.shown
        self.shown[message["id"]] = status
        bundle = self.bundles.setdefault(pending_id, [])
        if first_sight:
            bundle.append(message)
            self._say(self._question_lines(message, pending_id, bundle, status == "pending"))
        if status != "pending":
            qid = metadata.get("question_id", "")
            self._say(f"-- question {qid} {status}{_response(metadata)}")

    def _question_lines(
        self, message: dict[str, Any], pending_id: str, bundle: list[dict[str, Any]], open_: bool
    ) -> str:
        metadata = message["metadata"]
        question = metadata.get("question") or {}
        qid = metadata.get("question_id") or question.get("id", "")
        lines = []
        if metadata.get("context") and metadata.get("question_index", 0) == 0:
            lines.append(f"   context: {metadata['context']}")
        lines.append(f"? {qid}: {message['content']}")
        for option in question.get("options") or []:
            lines.append(
                f"    {option['option_id']:<16} {option['label']} — {option['description']}"
            )
        if open_ and message.get("requests_input"):  # the last question of the bundle
            lines.append(f"  answer: {self._answer_command(pending_id, bundle)}")
        return "\n".join(lines)

    def _answer_command(self, pending_id: str, bundle: list[dict[str, Any]]) -> str:
        parts = ["kandev questions answer", pending_id]
        for row in bundle:
            metadata = row["metadata"]
            question = metadata.get("question") or {}
            options = question.get("options") or []
            qid = metadata.get("question_id") or question.get("id", "")
            choice = options[0]["option_id"] if options else "OPTION_ID"
            parts.append(f"--option {qid}={choice}")
        if self.hint_url:
            parts.append(f"--url {self.hint_url}")
        return " ".join(parts) + "   (or --text QID=TEXT, or --reject REASON)"


def _response(metadata: dict[str, Any]) -> str:
    """`: a, b 'text'` for an answered question's row (each row holds its own answer)."""
    response = metadata.get("response")
    if not isinstance(response, dict):
        return ""
    options = ", ".join(response.get("selected_options") or [])
    text = response.get("custom_text") or ""
    shown = " ".join(part for part in (options, repr(text) if text else "") if part)
    return f": {shown}" if shown else ""
