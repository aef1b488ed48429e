"""100 concurrent agent sessions of a trivial ACP agent, through Kandev vs the bare ACP SDK.

Measures, on this machine:
- memory: Kandev server RSS growth per session, and RSS of one agent process;
- prompt round trip: POST /prompt → `session.turn.completed` on the SSE stream, for all
  sessions at once and for one session alone, against the same prompt sent straight to the
  same agent with the ACP SDK (no Kandev in between).

Run:  .venv/bin/python bench/bench_sessions.py [--sessions 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

from bench.common import (
    child_pids,
    kandev_server,
    percentile,
    print_json_line,
    rss_kib,
    summary_ms,
)

AGENT = str(Path(__file__).with_name("trivial_agent.py"))


class _QuietClient:
    async def session_update(self, **_: Any) -> None:
        return None


async def bare_sdk(sessions: int, rounds: int) -> dict[str, Any]:
    """The same agent driven directly with the ACP SDK: the floor Kandev adds to."""
    async with AsyncExitStack() as stack:
        conns = []
        for _ in range(sessions):
            conn, proc = await stack.enter_async_context(
                spawn_agent_process(_QuietClient(), sys.executable, AGENT)
            )
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            new = await conn.new_session(cwd=tempfile.gettempdir(), mcp_servers=[])
            conns.append((conn, new.session_id, proc.pid))

        async def one(conn: Any, sid: str) -> float:
            start = time.perf_counter()
            await conn.prompt(session_id=sid, prompt=[text_block("hi")])
            return time.perf_counter() - start

        concurrent: list[float] = []
        for _ in range(rounds):
            concurrent += await asyncio.gather(*(one(c, s) for c, s, _ in conns))
        conn, sid, _ = conns[0]
        alone = [await one(conn, sid) for _ in range(50)]
        agent_rss = statistics.fmean(rss_kib(p) for _, _, p in conns)
    return {"concurrent": concurrent, "alone": alone, "agent_rss_kib": agent_rss}


class TurnWatcher:
    """Follows the SSE stream and timestamps every turn/state event by id."""

    def __init__(self) -> None:
        self.completed: dict[str, float] = {}
        self.idle: set[str] = set()
        self.changed = asyncio.Event()

    async def run(self, client: httpx.AsyncClient) -> None:
        async with client.stream("GET", "/api/v1/events", timeout=None) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event["type"] == "session.turn.completed":
                    self.completed[event["turn_id"]] = time.perf_counter()
                elif event["type"] == "session.state_changed" and event["state"] == "IDLE":
                    self.idle.add(event["session_id"])
                self.changed.set()

    async def until(self, predicate: Any, timeout: float = 300) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


async def through_kandev(url: str, server_pid: int, sessions: int, rounds: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=sessions + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        watcher = TurnWatcher()
        follower = asyncio.create_task(watcher.run(client))
        ws = (await client.post("/api/v1/workspaces", json={"name": "bench"})).json()
        flow = (
            await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "b"})
        ).json()
        profile = (
            await client.post(
                "/api/v1/agent-profiles",
                json={"name": "trivial", "command": [sys.executable, AGENT]},
            )
        ).json()
        rss_before = rss_kib(server_pid)
        sids = []
        for i in range(sessions):
            task = (
                await client.post(
                    "/api/v1/tasks",
                    json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": f"t{i}"},
                )
            ).json()
            r = await client.post(
                f"/api/v1/tasks/{task['id']}/sessions", json={"agent_profile_id": profile["id"]}
            )
            sids.append(r.json()["id"])
        await watcher.until(lambda: all(s in watcher.idle for s in sids))

        async def one(sid: str) -> float:
            start = time.perf_counter()
            r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "hi"})
            turn_id = r.json()["turn_id"]
            await watcher.until(lambda: turn_id in watcher.completed)
            return watcher.completed[turn_id] - start

        concurrent: list[float] = []
        for _ in range(rounds):
            concurrent += await asyncio.gather(*(one(s) for s in sids))
        alone = [await one(sids[0]) for _ in range(50)]
        rss_after = rss_kib(server_pid)
        agents = child_pids(server_pid)
        agent_rss = statistics.fmean(rss_kib(p) for p in agents) if agents else 0.0
        for sid in sids:
            await client.post(f"/api/v1/sessions/{sid}/stop", json={})
        follower.cancel()
    return {
        "concurrent": concurrent,
        "alone": alone,
        "server_rss_before_kib": rss_before,
        "server_rss_after_kib": rss_after,
        "agent_processes": len(agents),
        "agent_rss_kib": agent_rss,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    print(f"bare ACP SDK: {args.sessions} agents …", flush=True)
    bare = await bare_sdk(args.sessions, args.rounds)
    print(f"Kandev: {args.sessions} sessions …", flush=True)
    with tempfile.TemporaryDirectory() as home, kandev_server(Path(home)) as (url, proc):
        kandev = await through_kandev(url, proc.pid, args.sessions, args.rounds)

    per_session_kib = (kandev["server_rss_after_kib"] - kandev["server_rss_before_kib"]) / max(
        1, args.sessions
    )
    print()
    print(f"sessions: {args.sessions}, rounds: {args.rounds} (2-core machine)")
    print(f"  bare SDK, all at once : {summary_ms(bare['concurrent'])}")
    print(f"  Kandev,   all at once : {summary_ms(kandev['concurrent'])}")
    print(f"  bare SDK, one session : {summary_ms(bare['alone'])}")
    print(f"  Kandev,   one session : {summary_ms(kandev['alone'])}")
    for label, key in (("all at once", "concurrent"), ("one session", "alone")):
        ratio = percentile(kandev[key], 50) / percentile(bare[key], 50)
        print(f"  ratio Kandev/bare p50, {label}: {ratio:.1f}x")
    print(
        f"  Kandev server RSS: {kandev['server_rss_before_kib'] / 1024:.1f} MiB before, "
        f"{kandev['server_rss_after_kib'] / 1024:.1f} MiB after "
        f"→ {per_session_kib:.0f} KiB per session"
    )
    print(
        f"  agent process RSS: {kandev['agent_rss_kib'] / 1024:.1f} MiB each under Kandev "
        f"({kandev['agent_processes']} processes), {bare['agent_rss_kib'] / 1024:.1f} MiB bare"
    )
    print_json_line(
        "sessions",
        sessions=args.sessions,
        kandev_p50_ms=percentile(kandev["concurrent"], 50) * 1000,
        kandev_p95_ms=percentile(kandev["concurrent"], 95) * 1000,
        bare_p50_ms=percentile(bare["concurrent"], 50) * 1000,
        bare_p95_ms=percentile(bare["concurrent"], 95) * 1000,
        kandev_alone_p50_ms=percentile(kandev["alone"], 50) * 1000,
        bare_alone_p50_ms=percentile(bare["alone"], 50) * 1000,
        server_kib_per_session=per_session_kib,
        agent_rss_mib=kandev["agent_rss_kib"] / 1024,
    )


if __name__ == "__main__":
    asyncio.run(main())
