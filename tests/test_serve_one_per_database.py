"""One `kandev serve` per database: a second server on the database of a live one — from
another data dir — refuses to start, naming the database and the server holding it, and
leaves the live one's agents alone (it used to take them for an earlier server's leftovers
and kill them). A server that dies, SIGKILL included, lets the next one start."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import httpx

from kandev.db.ownership import display_url
from tests.conftest import free_port
from tests.server_process import start_serve, wait_for_health


def _serve(home: Path, database_url: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return start_serve(home, port, "--database-url", database_url), f"http://127.0.0.1:{port}"


def _waiting_question(url: str, server: subprocess.Popen) -> dict:
    """The demo agent's question, once it is asked (a bounded poll that ends early if the
    server dies, as `wait_for_health` does)."""
    ws = httpx.post(f"{url}/api/v1/workspaces", json={"name": "Live"}).json()
    flow = httpx.post(f"{url}/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    task = httpx.post(
        f"{url}/api/v1/tasks",
        json={"workspace_id": ws["id"], "workflow_id": flow.json()["id"], "title": "Busy"},
    ).json()
    demo = httpx.get(f"{url}/api/v1/agent-profiles").json()["agent_profiles"][0]
    started = httpx.post(
        f"{url}/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": demo["id"], "prompt": "go"},
    )
    assert started.status_code == 201, started.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        bundles = httpx.get(f"{url}/api/v1/clarification", timeout=10).json()["bundles"]
        if bundles:
            return bundles[0]
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=0.05)
        assert server.poll() is None, "the server died"
    raise AssertionError("the demo agent asked nothing")


async def test_a_second_server_on_a_live_database_refuses_and_harms_nothing(
    tmp_path: Path, database_url: str
) -> None:
    # Blocking clients and processes: in a worker thread, off the test's event loop.
    await anyio.to_thread.run_sync(_second_server_refuses, tmp_path, database_url)


def _second_server_refuses(tmp_path: Path, database_url: str) -> None:
    first, url = _serve(tmp_path / "a", database_url)
    try:
        wait_for_health(url, first)
        question = _waiting_question(url, first)
        second, _ = _serve(tmp_path / "b", database_url)
        try:
            output = second.communicate(timeout=60)[0].decode()
        finally:
            if second.poll() is None:  # it started after all: stop it, then fail below
                os.killpg(second.pid, signal.SIGKILL)
                output = second.communicate(timeout=30)[0].decode()
        assert second.returncode == 2, output
        (line,) = output.strip().splitlines()
        assert line.startswith("kandev: another Kandev server (")
        assert f"is using the database {display_url(database_url)}" in line
        if "postgresql" in database_url:  # the holder, as PostgreSQL names it
            assert f"kandev serve pid {first.pid} on " in line
        # The live server's agent still waits for its answer; answering reaches it.
        session = httpx.get(f"{url}/api/v1/sessions/{question['session_id']}").json()
        assert session["state"] == "WAITING_FOR_INPUT"
        answer = {"answers": [{"question_id": "next_step", "selected_options": ["go_ahead"]}]}
        r = httpx.post(
            f"{url}/api/v1/clarification/{question['pending_id']}/respond",
            json=answer,
            timeout=30,
        )
        assert r.status_code == 200 and r.json()["claimed"] is True, r.text
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # a crash: the server and its agents
        first.communicate(timeout=30)
    # The dead server's hold went with it: the next one starts.
    third, url = _serve(tmp_path / "c", database_url)
    try:
        assert wait_for_health(url, third).status_code == 200
    finally:
        third.send_signal(signal.SIGINT)
        third.communicate(timeout=30)
    assert third.returncode == 0
