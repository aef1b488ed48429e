"""Crash a real `kandev serve` around an answer and count what the agent received.

One trial: a server subprocess (SQLite in its data dir, or a PostgreSQL database), a
session whose agent is the scripted ACP agent recording every answer it gets
(SCRIPTED_AGENT_RECORD), a question it asks (blocked in its call, or abandoned: the detached
path), an answer (or a rejection) over REST carrying a unique nonce, a SIGKILL of the server
at a chosen moment (after `respond` returned, or from inside the server at an injected fault
point), the agent's process group killed too (agents die with their server; done here as
well so the trial does not depend on it), a restart on the same data, and a bounded wait
until the session settled. Then the agent's record is counted: how many times the nonce
reached the agent, and how (tool call / resumed turn).

Used by tests/e2e/test_answer_fault.py (a deterministic set) and bench/bench_fault_answers.py
(randomized delays). Synchronizes on observable state only (bounded polling), never sleeps
except for the chosen kill delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.preloaded_serve import ForkedProcess, PreloadedServe

SCRIPTED_AGENT = str(Path(__file__).resolve().parent / "agents" / "scripted_agent.py")
SETTLE_TIMEOUT = 90.0
AGENT_READ_TIMEOUT = 10.0
POLL = 0.02
UNSETTLED_STATES = ("STARTING", "RUNNING")


@dataclass
class TrialResult:
    nonce: str
    claimed: bool | None  # None: respond got no answer (the server died inside it)
    respond_seconds: float | None
    via_tool_call: int = 0
    via_resume: int = 0
    delivered_via: list[str] = field(default_factory=list)  # response_delivered_via per row
    statuses: list[str] = field(default_factory=list)

    @property
    def deliveries(self) -> int:
        return self.via_tool_call + self.via_resume


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`kandev serve` as a subprocess on a fixed data dir / database across restarts."""

    def __init__(
        self,
        home: Path,
        database_url: str = "",
        env: dict[str, str] | None = None,
        launcher: PreloadedServe | None = None,
    ):
        self.home = home
        self.database_url = database_url
        self.env = env or {}
        self.launcher = launcher  # None: a fresh `python -m kandev serve` per start
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.log = home / "server.log"

    def start(self, fault: str = "") -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "KANDEV_HOME": str(self.home), **self.env}
        env.pop("KANDEV_DATABASE_URL", None)
        env.pop("KANDEV_FAULT_INJECT", None)
        if fault:
            env["KANDEV_FAULT_INJECT"] = fault
        args = ["--port", str(self.port)]
        if self.database_url:
            args += ["--database-url", self.database_url]
        if self.launcher is not None:
            self.proc = self.launcher.spawn(["serve", *args], env, self.log)
            return
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kandev", "serve", *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def wait_healthy(self, timeout: float = 60.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(
                        f"server exited with {self.proc.returncode}:\n{self.tail()}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{self.url}/health")).status_code == 200:
                        return
                await asyncio.sleep(POLL)  # noqa: sleep-ok (bounded /health polling)
        raise AssertionError(f"server did not answer /health in time:\n{self.tail()}")

    def agent_groups(self) -> list[int]:
        """Process groups of the server's children (each agent leads its own group)."""
        assert self.proc is not None
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.proc.pid:
                with contextlib.suppress(ProcessLookupError):
                    found.append(os.getpgid(int(entry.name)))
        return sorted(set(found) - {os.getpgid(0), self.proc.pid})

    def kill(self) -> None:
        """SIGKILL the server (a crash) and wait for it; its agents live on (kill_agents)."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    @staticmethod
    def kill_agents(agent_groups: list[int]) -> None:
        for group in agent_groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)

    def died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        groups = self.agent_groups()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


async def _until(check, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL)  # noqa: sleep-ok (bounded polling, deadline above)


async def _agent_has_read(record: Path, nonce: str, agent_groups: list[int]) -> None:
    """Until the nonce is in the record or every agent has exited (bounded; the trial's
    assertions judge what was recorded)."""

    def alive(group: int) -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True

    async def done() -> bool:
        return sum(count(record, nonce)) > 0 or not any(alive(g) for g in agent_groups)

    with contextlib.suppress(AssertionError):
        await _until(done, AGENT_READ_TIMEOUT, "the agent to read its tool result")


async def _rows(client: httpx.AsyncClient, session_id: str) -> list[dict]:
    r = await client.get(f"/api/v1/sessions/{session_id}/messages", params={"limit": 500})
    r.raise_for_status()
    return [m for m in r.json()["messages"] if m["type"] == "clarification_request"]


async def open_question(server: Server, record: Path, *, abandon: bool) -> tuple[str, str]:
    """A task and a scripted-agent session blocked on (or, `abandon`, detached from) a
    question; returns (session_id, pending_id)."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
        flow = (
            await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
        ).json()
        task = (
            await client.post(
                "/api/v1/tasks",
                json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "fault"},
            )
        ).json()
        profile = (
            await client.post(
                "/api/v1/agent-profiles",
                json={
                    "name": f"recording-{uuid.uuid4().hex[:6]}",
                    "command": [sys.executable, SCRIPTED_AGENT],
                    "env": {"SCRIPTED_AGENT_RECORD": str(record)},
                },
            )
        ).json()
        r = await client.post(
            f"/api/v1/tasks/{task['id']}/sessions",
            json={"agent_profile_id": profile["id"], "prompt": "ask-abandon" if abandon else "ask"},
        )
        r.raise_for_status()
        session_id = r.json()["id"]

        async def asked() -> str | None:
            rows = await _rows(client, session_id)
            if len(rows) < 2:
                return None
            if abandon:
                state = (await client.get(f"/api/v1/sessions/{session_id}")).json()["state"]
                if state != "WAITING_FOR_INPUT" or not all(
                    m["metadata"].get("agent_disconnected") for m in rows
                ):
                    return None
            return rows[0]["metadata"]["pending_id"]

        pending_id = await _until(asked, 60, "the question")
    return session_id, pending_id


def outcome_body(nonce: str, reject: bool) -> dict:
    if reject:
        return {"rejected": True, "reject_reason": f"not now {nonce}"}
    return {
        "answers": [
            {"question_id": "lang", "selected_options": ["py"]},
            {"question_id": "q2", "selected_options": ["q2_opt1"], "custom_text": nonce},
        ]
    }


async def respond(server: Server, pending_id: str, body: dict) -> tuple[bool | None, float | None]:
    """POST respond; (claimed, seconds), or (None, None) when the server died inside it."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        start = time.perf_counter()
        try:
            r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=body)
        except httpx.TransportError:
            return None, None
        elapsed = time.perf_counter() - start
    assert r.status_code == 200, r.text
    return bool(r.json()["claimed"]), elapsed


async def settle(server: Server, session_id: str, timeout: float = SETTLE_TIMEOUT) -> list[dict]:
    """Wait until no row carries a delivery intent and the session runs no turn."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:

        async def settled() -> list[dict] | None:
            rows = await _rows(client, session_id)
            if any("response_delivery_pending" in m["metadata"] for m in rows):
                return None
            state = (await client.get(f"/api/v1/sessions/{session_id}")).json()["state"]
            return None if state in UNSETTLED_STATES else rows

        return await _until(settled, timeout, "the session to settle")


def count(record: Path, nonce: str) -> tuple[int, int]:
    """(deliveries in the tool call, deliveries as a resumed turn) of the nonce."""
    tool = resume = 0
    if record.exists():
        for line in record.read_text().splitlines():
            entry = json.loads(line)
            if nonce in entry["text"]:
                if entry["via"] == "tool_call":
                    tool += 1
                else:
                    resume += 1
    return tool, resume


async def run_trial(
    home: Path,
    *,
    database_url: str = "",
    delay: float | None = 0.0,
    fault: str = "",
    abandon: bool = False,
    reject: bool = False,
    launcher: PreloadedServe | None = None,
) -> TrialResult:
    """One crash trial. `delay`: seconds between respond returning and the SIGKILL (None:
    no kill from outside, the injected `fault` kills the server). `launcher`: start the
    servers as forks of an interpreter that has imported kandev already (tests/
    preloaded_serve.py), instead of a fresh `python -m kandev serve` each."""
    record = home / "agent-record.jsonl"
    nonce = f"nonce-{uuid.uuid4().hex[:12]}"
    server = Server(
        home,
        database_url,
        env={"KANDEV_CLARIFICATION_PROGRESS_SECONDS": "0.2"},
        launcher=launcher,
    )
    server.start(fault=fault)
    try:
        await server.wait_healthy()
        session_id, pending_id = await open_question(server, record, abandon=abandon)
        groups = server.agent_groups()
        claimed, seconds = await respond(server, pending_id, outcome_body(nonce, reject))
        if delay and not fault:
            await asyncio.sleep(delay)  # noqa: sleep-ok (the chosen kill moment)
        server.kill()
        if claimed and not (abandon and reject):
            # respond returned after the answer was on the agent's socket (the tool result)
            # or its stdin (a detached question's resume prompt): the agent reads it even
            # though the server is gone, given the moment an agent needs — on a loaded
            # machine, more than the kill takes. (A detached rejection is only recorded.)
            await _agent_has_read(record, nonce, groups)
        server.kill_agents(groups)
        server.start()
        await server.wait_healthy()
        rows = await settle(server, session_id)
        tool, resume = count(record, nonce)
        return TrialResult(
            nonce=nonce,
            claimed=claimed,
            respond_seconds=seconds,
            via_tool_call=tool,
            via_resume=resume,
            delivered_via=[m["metadata"].get("response_delivered_via", "") for m in rows],
            statuses=[m["metadata"].get("status", "") for m in rows],
        )
    except BaseException:
        print("server log (last lines):\n" + server.tail(), file=sys.stderr)
        raise
    finally:
        server.stop()
