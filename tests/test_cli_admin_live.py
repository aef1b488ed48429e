"""An offline admin command run while a server serves the same data dir touches nothing live:
`kandev user create` used to run the server's startup recovery, which killed the running
server's agents as "survivors" and settled their open questions."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.cli_harness import ServeProcess


def _open_questions(client: httpx.Client) -> list[dict]:
    return client.get("/api/v1/clarification").json()["bundles"]


def _wait_for(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)  # noqa: sleep-ok (polls a condition, with a deadline)
    raise AssertionError(f"timed out waiting for {what}")


def test_user_create_while_the_server_runs_leaves_its_agents_and_questions(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    server = ServeProcess(home)
    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            workspace = client.post("/api/v1/workspaces", json={"name": "w"}).json()
            workflow = client.post(
                "/api/v1/workflows", json={"workspace_id": workspace["id"], "name": "wf"}
            ).json()
            task = client.post(
                "/api/v1/tasks",
                json={"workspace_id": workspace["id"], "workflow_id": workflow["id"], "title": "t"},
            ).json()
            profiles = client.get("/api/v1/agent-profiles").json()["agent_profiles"]
            demo = next(p["id"] for p in profiles if p["name"] == "demo")
            created = client.post(
                f"/api/v1/tasks/{task['id']}/sessions",
                json={"agent_profile_id": demo, "prompt": "ask me"},
            )
            assert created.status_code == 201, created.text
            bundle = _wait_for(lambda: _open_questions(client), "the demo agent's question")[0]

            env = {**os.environ, "KANDEV_HOME": str(home)}
            env.pop("KANDEV_DATABASE_URL", None)
            admin = subprocess.run(
                [sys.executable, "-m", "kandev", "user", "create", "--email", "a@example.com"],
                env={**env, "KANDEV_USER_PASSWORD": "cli-password-1"},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert admin.returncode == 0, admin.stderr
            assert "killed" not in admin.stderr  # no agent was taken for a survivor

            # The question is still open, and answering it reaches the same agent.
            assert [b["pending_id"] for b in _open_questions(client)] == [bundle["pending_id"]]
            question = bundle["questions"][0]
            answer = client.post(
                f"/api/v1/clarification/{bundle['pending_id']}/respond",
                json={
                    "answers": [
                        {
                            "question_id": question["question_id"],
                            "selected_options": [question["options"][0]["option_id"]],
                        }
                    ]
                },
            )
            assert answer.status_code == 200, answer.text
            session_id = bundle["session_id"]

            def agent_replied() -> bool:
                messages = client.get(f"/api/v1/sessions/{session_id}/messages").json()
                return any("you chose" in (m.get("content") or "") for m in messages["messages"])

            _wait_for(agent_replied, "the agent's reply to the answer")
    finally:
        server.stop()


def _user_create(home: Path, email: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KANDEV_HOME": str(home), "KANDEV_USER_PASSWORD": "cli-password-1"}
    env.pop("KANDEV_DATABASE_URL", None)
    command = [sys.executable, "-m", "kandev", "user", "create", "--email", email, *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_an_offline_command_on_a_data_dir_whose_server_uses_another_database_refuses(
    tmp_path: Path,
) -> None:
    """The server holds `home` but keeps its data elsewhere (PostgreSQL, or here a SQLite
    file of its own): `user create` without --database-url would write to a new SQLite file
    in `home` that no server reads. It refuses, and creates nothing; with the server's
    database named, it works."""
    home = tmp_path / "home"
    database = f"sqlite:///{tmp_path / 'elsewhere' / 'kandev.db'}"
    server = ServeProcess(home, "--database-url", database)
    try:
        refused = _user_create(home, "lost@example.com")
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.strip() == (
            f"error: the Kandev server using {home} (pid {server.proc.pid}) runs on another "
            "database; give that database with --database-url (or KANDEV_DATABASE_URL)"
        )
        assert not (home / "kandev.db").exists()
        named = _user_create(home, "found@example.com", "--database-url", database)
        assert named.returncode == 0, named.stderr
        assert "created member found@example.com" in named.stdout
    finally:
        server.stop()
    # No server holds it any more: the data dir's own database is the user's choice again.
    alone = _user_create(home, "later@example.com")
    assert alone.returncode == 0, alone.stderr
