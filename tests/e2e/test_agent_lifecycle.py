"""Agents live and die with their server and their task (CONTRACT §3, §8); launch failures
are readable (§4). Real `kandev serve` processes, real ACP agent subprocesses, real /proc."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from kandev.db.tables import agent_profiles
from tests.agents.procs import cmdline, linux_only, marked, running, wait_until
from tests.conftest import free_port
from tests.e2e.board_helpers import SCRIPTED_AGENT, make_task, messages, scripted_profile
from tests.server_process import start_serve, wait_for_health
from tests.sse_client import of_type, sse_stream

AGENT_DEATH_SECONDS = 5.0  # CONTRACT §8: agents exit within 5 s of their server's death


@pytest.fixture
def server(live_server_factory, sqlite_url: str):
    return live_server_factory(sqlite_url)


async def _session(client: httpx.AsyncClient, task: dict, profile: dict, prompt: str) -> dict:
    r = await client.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": profile["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    return r.json()


async def _running_sleeper(client: httpx.AsyncClient, task: dict) -> tuple[dict, int]:
    """A session whose agent runs and has spawned a grandchild; returns (session, its pid)."""
    profile = await scripted_profile(client)
    async with sse_stream(client, params={"task_id": task["id"]}) as events:
        session = await _session(client, task, profile, "sleeper")
        said = await events.wait_for(
            lambda e: (
                e.type == "session.message.added"
                and e.data["message"]["content"].startswith("spawned ")
            )
        )
        await events.wait_for(of_type("session.turn.completed"))
    return session, int(said.data["message"]["content"].removeprefix("spawned "))


def _agents(session_id: str) -> list[int]:
    """The agent processes proper of a session (not the guard, not their children)."""
    return [pid for pid in marked(session_id) if cmdline(pid)[1:2] == [SCRIPTED_AGENT]]


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# --- the server dies -----------------------------------------------------------------


@linux_only
async def test_a_sigkilled_server_takes_its_agents_and_a_restart_runs_one(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve(home, port)
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url) as client:
            task = await make_task(client)
            session, grandchild = await _running_sleeper(client, task)
        sid = session["id"]
        group = marked(sid)  # the guard, the agent, the agent's child
        assert len(group) == 3 and grandchild in group and len(_agents(sid)) == 1
        os.kill(proc.pid, signal.SIGKILL)  # the server alone: no shutdown, no cleanup
        proc.wait(timeout=30)
        took = wait_until(
            lambda: not any(running(pid) for pid in group),
            AGENT_DEATH_SECONDS,
            "every agent process exits after the server was SIGKILLed",
        )
        print(f"agent group gone {took * 1000:.0f} ms after the server's SIGKILL")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    proc = start_serve(home, port)
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get(f"/api/v1/sessions/{sid}")).json()["state"] == "IDLE"
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "echo hi"})
                assert r.status_code == 202, r.text
                await events.wait_for(of_type("session.turn.completed"))
            assert (await messages(client, sid))[-1]["content"] == "hi"
        assert len(_agents(sid)) == 1  # exactly one agent for the session
        assert len(marked(sid)) == 2  # and its guard; the old group is gone
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    wait_until(lambda: marked(sid) == [], AGENT_DEATH_SECONDS, "a stopped server ends its agents")


# --- the task goes -------------------------------------------------------------------


@linux_only
async def test_deleting_a_task_stops_its_agent_first(server, caplog) -> None:
    caplog.set_level(logging.WARNING)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        session, grandchild = await _running_sleeper(client, task)
        sid = session["id"]
        assert len(marked(sid)) == 3
        r = await client.delete(f"/api/v1/tasks/{task['id']}")
        assert r.status_code == 204
        assert _agents(sid) == []  # the agent was stopped before the 204
        wait_until(lambda: not running(grandchild), 5, "the agent's child is gone")
        assert marked(sid) == []
        assert (await client.get(f"/api/v1/tasks/{task['id']}")).status_code == 404
        assert (await client.get(f"/api/v1/sessions/{sid}")).status_code == 404
    assert not server.services.orchestrator.is_agent_running(sid)
    assert _errors(caplog) == []


@linux_only
async def test_archiving_a_task_stops_its_agent_and_ends_its_sessions(server, caplog) -> None:
    caplog.set_level(logging.WARNING)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        session, grandchild = await _running_sleeper(client, task)
        sid = session["id"]
        r = await client.post(f"/api/v1/tasks/{task['id']}/archive")
        assert r.status_code == 200, r.text
        assert r.json()["archived_at"] is not None
        assert _agents(sid) == []
        wait_until(lambda: not running(grandchild), 5, "the agent's child is gone")
        assert (await client.get(f"/api/v1/sessions/{sid}")).json()["state"] == "CANCELLED"
        listed = await client.get("/api/v1/tasks", params={"workflow_id": task["workflow_id"]})
        assert listed.json()["tasks"] == []  # off the board
        r = await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})
        assert r.status_code == 409 and "archived" in r.json()["error"]
        r = await client.post(f"/api/v1/tasks/{task['id']}/unarchive")
        assert r.status_code == 200 and r.json()["archived_at"] is None
        r = await client.post(f"/api/v1/tasks/{task['id']}/archive")
        assert r.status_code == 200  # nothing running: archiving is just that
    assert _errors(caplog) == []


# --- launches that fail --------------------------------------------------------------


async def _task_with(client: httpx.AsyncClient, **fields: object) -> httpx.Response:
    ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    ).json()
    body = {"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "T", **fields}
    return await client.post("/api/v1/tasks", json=body)


async def _failed_launch(client: httpx.AsyncClient, task: dict, profile: dict) -> dict:
    """Start a session that cannot launch; returns the FAILED event's data."""
    async with sse_stream(client, params={"task_id": task["id"]}) as events:
        session = await _session(client, task, profile, "echo never")
        failed = await events.wait_for(of_type("session.state_changed", state="FAILED"), 10)
    assert failed.data["session_id"] == session["id"]
    body = (await client.get(f"/api/v1/sessions/{session['id']}")).json()
    assert body["state"] == "FAILED" and body["error_message"] == failed.data["error_message"]
    history = await messages(client, session["id"])
    errors = [m for m in history if m["type"] == "error"]
    assert [(m["author_type"], m["content"]) for m in errors] == [("system", body["error_message"])]
    return failed.data


async def test_a_relative_local_path_is_refused(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        r = await _task_with(client, local_path="src/project")
        assert r.status_code == 400
        assert r.json()["error"].startswith("local_path:")
        assert "absolute" in r.json()["error"]
        r = await _task_with(client, local_path=str(Path.cwd()))
        assert r.status_code == 201, r.text


async def test_a_missing_local_path_fails_the_session_and_is_not_created(
    server, tmp_path: Path
) -> None:
    missing = tmp_path / "not-there" / "project"
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = (await _task_with(client, local_path=str(missing))).json()
        failed = await _failed_launch(client, task, await scripted_profile(client))
    assert failed["error_message"] == f"local_path is not an existing directory: {missing}"
    assert not missing.parent.exists()  # Kandev creates folders only in its data dir


async def test_a_missing_program_at_launch_fails_the_session_readably(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        profile = await scripted_profile(client, "soon-broken")
        # The program vanished after the profile was saved (edited here in the database).
        async with server.services.db.write() as conn:
            await conn.execute(
                update(agent_profiles)
                .where(agent_profiles.c.id == profile["id"])
                .values(command=["kandev-test-no-such-agent-xyz"])
            )
        failed = await _failed_launch(client, task, profile)
    assert failed["error_message"] == "agent command not found: kandev-test-no-such-agent-xyz"


async def test_an_agent_that_dies_during_init_fails_the_session_readably(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        r = await client.post(
            "/api/v1/agent-profiles",
            json={
                "name": "dies-at-once",
                "command": [sys.executable, "-c", "import sys; sys.exit('no api key')"],
            },
        )
        assert r.status_code == 201, r.text
        failed = await _failed_launch(client, task, r.json())
    assert "initialize" in failed["error_message"]
    assert "no api key" in failed["error_message"]  # the agent's last stderr line


async def test_a_task_folder_that_cannot_be_made_fails_the_session(server) -> None:
    (server.services.settings.data_dir / "tasks").parent.mkdir(parents=True, exist_ok=True)
    (server.services.settings.data_dir / "tasks").write_text("a file where folders go")
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        failed = await _failed_launch(client, task, await scripted_profile(client))
    assert failed["error_message"].startswith("could not create the task folder")


def test_the_guard_costs_little_to_start() -> None:
    """Measurement, printed: what running an agent under the guard adds to its start."""
    import subprocess

    from kandev.agents.acp_runtime import guarded_argv

    read_end, write_end = os.pipe()
    try:
        runs = []
        for argv in ([sys.executable, "-I", "-S", "-c", "pass"],) * 5:
            started = time.perf_counter()
            subprocess.run(argv, check=True)
            bare = time.perf_counter() - started
            started = time.perf_counter()
            subprocess.run(guarded_argv(argv, read_end), pass_fds=(read_end,), check=True)
            runs.append((bare, time.perf_counter() - started))
    finally:
        os.close(read_end)
        os.close(write_end)
    bare, guarded = min(r[0] for r in runs), min(r[1] for r in runs)
    print(f"start: bare {bare * 1000:.1f} ms, guarded {guarded * 1000:.1f} ms")
    assert guarded < bare + 1.0
