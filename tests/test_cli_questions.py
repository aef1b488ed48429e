"""`kandev questions list|answer` against a real server, over its external MCP endpoint."""

from __future__ import annotations

import json

import httpx
from typer.testing import CliRunner

from kandev.cli import app
from tests.conftest import free_port

QUESTIONS = [
    {
        "id": "pick",
        "prompt": "Pick some",
        "options": [
            {"option_id": "a", "label": "Alpha", "description": "first"},
            {"option_id": "b", "label": "Beta", "description": "second"},
        ],
    },
    {
        "prompt": "Anything else?",
        "options": [
            {"label": "No", "description": "done"},
            {"label": "Yes", "description": "more"},
        ],
    },
]


def _question(url: str) -> str:
    with httpx.Client(base_url=url) as http:
        ws = http.post("/api/v1/workspaces", json={"name": "W"}).json()
        flow = http.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"}).json()
        task = http.post(
            "/api/v1/tasks",
            json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "T"},
        ).json()
        sid = http.post(f"/api/v1/tasks/{task['id']}/sessions", json={}).json()["id"]
        http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
        r = http.post(
            "/api/v1/clarification/request", json={"session_id": sid, "questions": QUESTIONS}
        )
        return r.json()["pending_id"]


def _answer_messages(url: str) -> list[dict]:
    with httpx.Client(base_url=url) as http:
        tasks = []
        for ws in http.get("/api/v1/workspaces").json()["workspaces"]:
            for flow in http.get("/api/v1/workflows", params={"workspace_id": ws["id"]}).json()[
                "workflows"
            ]:
                tasks += http.get("/api/v1/tasks", params={"workflow_id": flow["id"]}).json()[
                    "tasks"
                ]
        messages = []
        for task in tasks:
            for session in http.get(f"/api/v1/tasks/{task['id']}/sessions").json()["sessions"]:
                r = http.get(f"/api/v1/sessions/{session['id']}/messages", params={"limit": 500})
                messages += r.json()["messages"]
    return [m for m in messages if m["author_type"] == "user" and m["type"] == "answer"]


def test_list_and_answer_from_the_terminal(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    pending_id = _question(server.url)
    runner = CliRunner()
    env = {"KANDEV_URL": server.url, "KANDEV_TOKEN": ""}

    listed = runner.invoke(app, ["questions", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    assert pending_id in listed.output
    assert "Pick some" in listed.output and "Alpha" in listed.output
    assert "q2_opt1" in listed.output  # the ids to type come with the list

    missing = runner.invoke(app, ["questions", "answer", pending_id, "--option", "pick=a"], env=env)
    assert missing.exit_code == 2 and "q2" in missing.output, missing.output

    answered = runner.invoke(
        app,
        ["questions", "answer", pending_id, "-o", "pick=a", "-o", "pick=b", "-t", "q2=ship it"],
        env=env,
    )
    assert answered.exit_code == 0, answered.output
    assert "Answered" in answered.output and "pick: a, b" in answered.output
    # The conversation records where the answer came from: the terminal, not "mcp".
    (message,) = _answer_messages(server.url)
    assert message["content"].startswith("You answered:")
    assert message["metadata"]["via"] == "cli"

    again = runner.invoke(app, ["questions", "answer", pending_id, "--reject", "late"], env=env)
    assert again.exit_code == 0, again.output
    assert "Someone answered first (answered)" in again.output

    empty = runner.invoke(app, ["questions", "list"], env=env)
    assert "No agent is waiting" in empty.output


def test_declining_from_the_terminal_and_losing_to_a_decline(
    live_server_factory, sqlite_url
) -> None:
    url = live_server_factory(sqlite_url).url
    pending_id = _question(url)

    def answer(*flags: str):
        command = ["questions", "answer", pending_id, *flags]
        return CliRunner().invoke(app, command, env={"KANDEV_URL": url, "KANDEV_TOKEN": ""})

    declined = answer("--reject", "not this sprint")
    assert declined.exit_code == 0, declined.output
    assert declined.output == "Declined: the agent was told you skipped its questions.\n"
    late = answer("-o", "pick=a", "-o", "q2=q2_opt1")
    assert late.exit_code == 0, late.output
    assert late.output.splitlines()[:2] == [
        "Someone answered first (rejected); their answer stands:",
        "  the questions were declined",
    ]


def test_unreachable_server_is_a_clear_error() -> None:
    env = {"KANDEV_URL": f"http://127.0.0.1:{free_port()}"}
    result = CliRunner().invoke(app, ["questions", "list"], env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: could not reach Kandev at {env['KANDEV_URL']}: connection refused "
        "(is `kandev serve` running?)"
    ]


def test_the_mcp_url_works_and_an_answered_question_replays_the_winner(
    live_server_factory, sqlite_url
) -> None:
    server = live_server_factory(sqlite_url)
    pending_id = _question(server.url)
    runner = CliRunner()
    # The URL docs/mcp.md gives (…/mcp) is accepted as well as the server's root.
    env = {"KANDEV_URL": f"{server.url}/mcp/", "KANDEV_TOKEN": ""}

    listed = runner.invoke(app, ["questions", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    assert pending_id in listed.output

    answered = runner.invoke(
        app, ["questions", "answer", pending_id, "-o", "pick=b", "-o", "q2=q2_opt1"], env=env
    )
    assert answered.exit_code == 0, answered.output
    assert "Answered: the agent has your answer." in answered.output

    # Answering again, with an option or with --reject: the winner is replayed, exit 0.
    for late in (["-o", "pick=a", "-o", "q2=q2_opt2"], ["--reject", "too late"]):
        again = runner.invoke(app, ["questions", "answer", pending_id, *late], env=env)
        assert again.exit_code == 0, again.output
        assert again.stdout.splitlines() == [
            "Someone answered first (answered); their answer stands:",
            "  pick: b",
            "  q2: q2_opt1",
        ], late

    replayed = runner.invoke(
        app, ["questions", "answer", pending_id, "--reject", "late", "--json"], env=env
    )
    assert replayed.exit_code == 0, replayed.output
    body = json.loads(replayed.stdout)
    assert (body["claimed"], body["status"]) == (False, "answered")

    unknown = runner.invoke(app, ["questions", "answer", "no-such-id", "-o", "a=b"], env=env)
    assert unknown.exit_code == 1
    assert unknown.stderr.splitlines() == [
        "error: clarification request not found (an unknown id, or not in a workspace you can see)"
    ]


def test_a_url_with_no_mcp_endpoint_says_so(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    env = {"KANDEV_URL": f"{server.url}/elsewhere", "KANDEV_TOKEN": ""}
    result = CliRunner().invoke(app, ["questions", "list"], env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: no Kandev MCP endpoint at {server.url}/elsewhere/mcp; "
        "--url takes the server's root URL"
    ]
