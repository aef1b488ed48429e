"""`kandev workspace|task|session …` against a real `kandev serve` (CONTRACT §12): tables and
--json, one-line failures with exit 1 (refused, unreachable) or 2 (usage), `-h`, and the
live `session watch` with the demo agent."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from kandev.cli import app
from tests.cli_harness import LineReader, ServeProcess, run_cli, start_cli
from tests.conftest import free_port

PASSWORD = "terminal-password-1"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    served = ServeProcess(tmp_path_factory.mktemp("cli-terminal") / "home")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    """Auth on, with an admin and a PAT made offline before the server starts."""
    home = tmp_path_factory.mktemp("cli-terminal-auth") / "home"
    admin = ["--email", "root@example.com", "--data-dir", str(home)]
    made = CliRunner().invoke(app, ["user", "create", "--admin", "--password", PASSWORD, *admin])
    assert made.exit_code == 0, made.output
    minted = CliRunner().invoke(app, ["token", "create", *admin])
    assert minted.exit_code == 0, minted.output
    token = minted.stdout.strip().splitlines()[-1]
    served = ServeProcess(home, "--auth")
    yield served, token
    served.stop()


def kandev(url: str, *args: str, token: str = ""):
    return CliRunner().invoke(app, list(args), env={"KANDEV_URL": url, "KANDEV_TOKEN": token})


def ok(url: str, *args: str, token: str = "") -> str:
    result = kandev(url, *args, token=token)
    assert result.exit_code == 0, result.output
    return result.stdout


def ok_json(url: str, *args: str, token: str = ""):
    return json.loads(ok(url, *args, "--json", token=token))


def test_workspace_and_task_commands_print_tables_and_json(server: ServeProcess) -> None:
    url = server.url
    created = ok(url, "workspace", "create", "Main", "--description", "the main one")
    (ws_id,) = re.findall(r"Created workspace Main \((\S+)\)", created)
    other = ok_json(url, "workspace", "create", "Side")
    assert other["name"] == "Side" and other["owner_id"] == ""

    listed = ok(url, "workspace", "list")
    assert ok(url, "workspace", "list", "--url", f"{url}/mcp") == listed  # the MCP URL works
    header, *rows = listed.splitlines()
    assert header.split() == ["ID", "NAME", "DESCRIPTION"]
    assert any(r.split()[:2] == [ws_id, "Main"] and "the main one" in r for r in rows)
    assert {w["id"] for w in ok_json(url, "workspace", "list")} >= {ws_id, other["id"]}

    # No --workflow on a workspace without one: the default board is created, then reused.
    first = ok(url, "task", "create", "Fix the login bug", "--workspace", ws_id)
    assert re.search(r"Created task Fix the login bug \(\S+\) in Backlog", first), first
    second = ok_json(
        url, "task", "create", "Write docs", "--workspace", ws_id, "--step", "Review",
        "--description", "all of them",
    )  # fmt: skip
    workflows = ok_json(url, "task", "list", "--workspace", ws_id)
    assert {t["workflow_id"] for t in workflows} == {second["workflow_id"]}
    board = kandev(url, "task", "show", second["id"]).stdout
    assert "Review" in board and "all of them" in board
    by_id = ok_json(
        url, "task", "create", "By id", "--workspace", ws_id,
        "--workflow", second["workflow_id"], "--step", second["workflow_step_id"],
    )  # fmt: skip
    assert by_id["workflow_step_id"] == second["workflow_step_id"]

    table = ok(url, "task", "list", "--workspace", ws_id)
    header, *rows = table.splitlines()
    assert header.split() == ["ID", "TITLE", "STEP", "STATE", "NEEDS", "INPUT"]
    assert len(rows) == 3
    assert any("Fix the login bug" in r and "Backlog" in r for r in rows)
    assert any("Write docs" in r and "Review" in r for r in rows)

    shown = ok_json(url, "task", "show", second["id"])
    assert shown["title"] == "Write docs" and shown["task_pending_action"] is None
    text = ok(url, "task", "show", second["id"])
    assert re.search(r"^title\s+Write docs$", text, re.M) and "No sessions yet" in text

    moved = ok(url, "task", "move", second["id"], "done")  # a step name, any case
    assert f"Moved Write docs ({second['id']}) to Done" in moved
    back = ok_json(url, "task", "move", second["id"], second["workflow_step_id"])
    assert back["task"]["workflow_step_id"] == second["workflow_step_id"]
    assert back["workflow_step"]["name"] == "Review"

    nowhere = kandev(url, "task", "move", second["id"], "Nowhere")
    assert nowhere.exit_code == 1
    assert nowhere.stderr.startswith("error: no step 'Nowhere' in the task's workflow; its steps:")


def test_refusals_are_one_line_with_the_server_s_reason(server: ServeProcess) -> None:
    cases = [
        (("task", "show", "no-such-task"), "error: task not found"),
        (("task", "list", "--workspace", "no-such-ws"), "error: workspace not found"),
        (("task", "create", "T", "--workspace", "no-such-ws"), "error: workspace not found"),
        (("session", "prompt", "no-such-session", "hi"), "error: session not found"),
        (("session", "watch", "no-such-session"), "error: session not found"),
    ]
    for args, line in cases:
        result = kandev(server.url, *args)
        assert result.exit_code == 1, (args, result.output)
        assert result.stderr.splitlines() == [line], args
        assert result.stdout == ""


def test_sessions_start_prompt_and_watch_with_the_demo_agent(server: ServeProcess) -> None:
    url = server.url
    ws = ok_json(url, "workspace", "create", "Agents")
    task = ok_json(url, "task", "create", "Try the demo", "--workspace", ws["id"])

    bare = ok(url, "session", "start", task["id"])  # no profile: bring your own agent
    assert re.search(r"^state\s+(CREATED|IDLE)$", bare, re.M), bare
    assert "kandev session watch" in bare
    unknown = kandev(url, "session", "start", task["id"], "--profile", "nobody")
    assert unknown.exit_code == 1
    assert unknown.stderr.strip() == "error: no agent profile 'nobody' (profiles: demo)"

    session = ok_json(
        url, "session", "start", task["id"], "--profile", "demo", "--prompt", "tidy the logs"
    )
    assert session["task_id"] == task["id"] and session["agent_profile_id"]
    watcher = start_cli("session", "watch", session["id"], url=url)
    try:
        out = LineReader(watcher.stdout)
        out.until(lambda line: line.startswith("> you: tidy the logs"))
        out.until(lambda line: line.startswith("? next_step: How should I proceed"))
        out.until(lambda line: "go_ahead" in line and "Go ahead" in line)
        answer_line = out.until(lambda line: "answer: kandev questions answer" in line)
        out.until(lambda line: "session WAITING_FOR_INPUT" in line)
        assert watcher.poll() is None  # waiting for input: it keeps watching

        # The command it printed answers the question, exactly as printed.
        command = shlex.split(answer_line.split("answer: ", 1)[1].split("   (or", 1)[0])
        assert command[:3] == ["kandev", "questions", "answer"]
        answered = run_cli(*command[1:], url=url)
        assert answered.returncode == 0, answered.stderr
        assert "Answered: the agent has your answer." in answered.stdout

        out.until(lambda line: "question next_step answered: go_ahead" in line)
        out.until(lambda line: line.startswith("agent: ") and "Go ahead" in line)
        out.until(lambda line: "session IDLE" in line)
        assert watcher.wait(timeout=30) == 0  # settled: idle after the turn
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()

    # More prompts: a new turn, or queued behind the running one.
    sent = ok_json(url, "session", "prompt", session["id"], "and now?")
    assert sent["session_id"] == session["id"] and sent["turn_id"]
    queued_or_sent = ok(url, "session", "prompt", session["id"], "one more")
    assert queued_or_sent.startswith(("Sent: turn ", "Queued: "))


def test_the_server_logs_agent_and_question_lines(server: ServeProcess) -> None:
    """The lines docs/agents.md lists reach the server's output, as uvicorn's do (they were
    dropped: the MCP SDK sets the root logger to WARNING)."""
    url = server.url
    ws = ok_json(url, "workspace", "create", "Logged")
    task = ok_json(url, "task", "create", "Log me", "--workspace", ws["id"])
    session = ok_json(url, "session", "start", task["id"], "--profile", "demo", "--prompt", "go")
    sid = f"session_id={session['id']}"
    started = server.output.until(lambda line: "agent started" in line and sid in line)
    assert started.startswith("INFO:") and "pid=" in started and "resumed=False" in started
    asked = server.output.until(lambda line: "question asked" in line and sid in line)
    pending = re.search(r"pending_id=(\S+)", asked)
    assert pending and "questions=1" in asked
    answered = httpx.post(
        f"{url}/api/v1/clarification/{pending[1]}/respond",
        json={"answers": [{"question_id": "next_step", "selected_options": ["go_ahead"]}]},
    )
    assert answered.status_code == 200, answered.text
    line = server.output.until(lambda line: "question answered" in line and sid in line)
    assert f"pending_id={pending[1]}" in line and "status=answered via=rest" in line


def test_a_watch_whose_server_stops_says_the_connection_was_lost(tmp_path: Path) -> None:
    served = ServeProcess(tmp_path / "home")
    try:
        ws = ok_json(served.url, "workspace", "create", "Stopping")
        task = ok_json(served.url, "task", "create", "Watched", "--workspace", ws["id"])
        session = ok_json(
            served.url, "session", "start", task["id"], "--profile", "demo", "--prompt", "go"
        )
        watcher = start_cli("session", "watch", session["id"], "--follow", url=served.url)
        out = LineReader(watcher.stdout)
        out.until(lambda line: "answer: kandev questions answer" in line)
    finally:
        assert served.stop() == 0
    rest = out.rest()
    assert watcher.wait(timeout=30) == 1
    last = rest.strip().splitlines()[-1]
    assert last.startswith(f"error: lost the connection to Kandev at {served.url} (")
    assert last.endswith("the session goes on without this watch")


def test_watch_json_and_ctrl_c(server: ServeProcess) -> None:
    url = server.url
    ws = ok_json(url, "workspace", "create", "Watch")
    task = ok_json(url, "task", "create", "Watch me", "--workspace", ws["id"])
    session = ok_json(url, "session", "start", task["id"], "--profile", "demo", "--prompt", "hi")

    watcher = start_cli("session", "watch", session["id"], "--json", url=url)
    out = LineReader(watcher.stdout)
    out.until(lambda line: '"WAITING_FOR_INPUT"' in line)
    watcher.send_signal(signal.SIGINT)  # Ctrl-C: stop watching, quietly
    rest = out.rest()
    assert watcher.wait(timeout=30) == 0
    assert "Traceback" not in rest and "Aborted" not in rest
    events = [json.loads(line) for line in rest.splitlines() if line.strip()]
    prompts = [e["message"] for e in events if "message" in e]
    assert any(m["author_type"] == "user" and m["content"] == "hi" for m in prompts)
    assert any(m["type"] == "clarification_request" for m in prompts)
    assert {"state": "WAITING_FOR_INPUT", "error_message": ""} in events

    # A terminal session: the watch shows it and returns at once.
    stopped = kandev(url, "session", "start", task["id"])
    sid = re.search(r"^id\s+(\S+)$", stopped.stdout, re.M).group(1)
    httpx.post(f"{url}/api/v1/sessions/{sid}/stop", json={})
    ended = ok(url, "session", "watch", sid)
    assert ended.strip().endswith("-- session CANCELLED")


def test_auth_on_needs_a_valid_token(auth_server: tuple[ServeProcess, str]) -> None:
    served, token = auth_server
    commands = [
        ("workspace", "list"),
        ("workspace", "create", "X"),
        ("task", "create", "T", "--workspace", "w"),
        ("task", "list", "--workspace", "w"),
        ("task", "show", "t"),
        ("task", "move", "t", "s"),
        ("session", "start", "t"),
        ("session", "prompt", "s", "hi"),
        ("session", "watch", "s"),
        ("questions", "list"),
        ("questions", "answer", "p", "--reject", "no"),
    ]
    for args in commands:
        anonymous = kandev(served.url, *args)
        assert anonymous.exit_code == 1, (args, anonymous.output)
        assert anonymous.stderr.splitlines() == [
            "error: authentication required: pass --token or set KANDEV_TOKEN"
        ], args
        refused = kandev(served.url, *args, token="kandev_pat_00000000_" + "x" * 43)
        assert refused.exit_code == 1, (args, refused.output)
        (line,) = refused.stderr.splitlines()
        assert line.startswith("error: the token was refused (invalid or expired): "), args

    ws = ok_json(served.url, "workspace", "create", "Mine", token=token)
    assert ws["owner_id"]
    assert [w["id"] for w in ok_json(served.url, "workspace", "list", token=token)] == [ws["id"]]
    assert "No agent is waiting" in ok(served.url, "questions", "list", token=token)


def test_an_unreachable_server_is_named(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (
        ("workspace", "list"),
        ("task", "show", "t"),
        ("session", "watch", "s"),
        ("questions", "list"),
    ):
        result = run_cli(*args, url=url)
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.splitlines() == [
            f"error: could not reach Kandev at {url}: connection refused "
            "(is `kandev serve` running?)"
        ], args


def test_usage_errors_exit_2_and_h_is_help() -> None:
    runner = CliRunner()
    env = {"KANDEV_URL": None, "KANDEV_TOKEN": None}
    for args in (
        ["task", "create"],  # no title
        ["task", "create", "T"],  # no --workspace
        ["task", "list"],
        ["session", "prompt", "s"],
        ["workspace", "list", "--bogus"],
        ["workspace", "list", "--url", "localhost:8420"],  # not a URL
    ):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 2, (args, result.output)
    for args in (
        ["-h"],
        ["workspace", "-h"],
        ["task", "create", "-h"],
        ["session", "watch", "-h"],
        ["questions", "answer", "-h"],
        ["serve", "-h"],
        ["user", "create", "-h"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert "Usage: kandev" in result.output, args


def test_help_imports_no_server_or_database_library() -> None:
    """`kandev --help` stays quick: uvicorn, FastAPI, SQLAlchemy, the MCP SDK and httpx are
    imported by the commands that use them, not by the CLI's modules."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kandev", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "Usage" in result.stdout
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "kandev" in imported and "typer" in imported
    heavy = {"uvicorn", "fastapi", "starlette", "sqlalchemy", "alembic", "mcp", "httpx", "httpx2"}
    assert imported & heavy == set()
