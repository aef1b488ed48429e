"""Ctrl-C (or SIGTERM) while an agent waits on its question: a clean, bounded stop (issue 14.6).

A real `kandev serve`, the real demo agent (it asks on every prompt), an open SSE stream:
the server exits 0 within the bound, logs no traceback, leaves no agent process behind, and
the question is still open after a restart — answering it resumes the agent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.e2e.board_helpers import make_task, messages
from tests.server_process import start_serve, wait_for_health
from tests.sse_client import of_type, sse_stream

SHUTDOWN_BOUND_SECONDS = 3.0
PROGRESS_ENV = {"KANDEV_CLARIFICATION_PROGRESS_SECONDS": "0.2"}


def _is_question(event) -> bool:
    return (
        event.type == "session.message.added"
        and event.data["message"]["type"] == "clarification_request"
        and event.data["message"]["requests_input"]
    )


def _descendants(root: int) -> set[int]:
    """Every live process below `root` (the agents' guards and the agents themselves)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has exited


def _wait_gone(pids: set[int], timeout: float = 5.0) -> set[int]:
    deadline = time.monotonic() + timeout
    alive = {p for p in pids if _alive(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)  # noqa: sleep-ok (bounded polling on the process table)
        alive = {p for p in alive if _alive(p)}
    return alive


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_stop_while_the_agent_waits_is_clean_and_the_question_survives(
    tmp_path: Path, sig: signal.Signals
) -> None:
    home, port = tmp_path / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve(home, port, env=PROGRESS_ENV)
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url) as client:
            task = await make_task(client, "Stop me")
            profiles = (await client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
            demo = next(p for p in profiles if p["name"] == "demo")
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                r = await client.post(
                    f"/api/v1/tasks/{task['id']}/sessions",
                    json={"agent_profile_id": demo["id"], "prompt": "tidy the README"},
                )
                assert r.status_code == 201, r.text
                sid = r.json()["id"]
                meta = (await events.wait_for(_is_question)).data["message"]["metadata"]
                await events.wait_for(of_type("session.state_changed", state="WAITING_FOR_INPUT"))
                agents = _descendants(proc.pid)
                assert agents, "the agent runs under the server"
                # The agent is blocked in its tool call and an SSE client is connected.
                started = time.monotonic()
                proc.send_signal(sig)
                code = proc.wait(timeout=30)
                elapsed = time.monotonic() - started
        output = proc.stdout.read().decode(errors="replace")
        assert code == 0, output
        assert elapsed < SHUTDOWN_BOUND_SECONDS, f"{elapsed:.2f}s\n{output}"
        assert "Traceback" not in output, output
        assert "Exception in ASGI application" not in output, output
        assert "ERROR:" not in output, output
        assert not _wait_gone(agents), "agent processes outlived the server"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    proc = start_serve(home, port, env=PROGRESS_ENV)
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url) as client:
            request = (await client.get(f"/api/v1/clarification/{meta['pending_id']}")).json()
            assert request["status"] == "pending", request
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                r = await client.post(
                    f"/api/v1/clarification/{meta['pending_id']}/respond",
                    json={
                        "answers": [
                            {
                                "question_id": meta["question_id"],
                                "selected_options": ["go_ahead"],
                                "custom_text": "after the restart",
                            }
                        ]
                    },
                )
                assert r.status_code == 200, r.text
                await events.wait_for(of_type("session.turn.completed"))
            reply = (await messages(client, sid))[-1]["content"]
            assert '"Go ahead"' in reply and "after the restart" in reply, reply
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
