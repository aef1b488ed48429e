"""Concurrent sessions of a trivial ACP agent: Kandev beside the bare app and the bare SDK.

Measures, on this machine, per database (SQLite file, PostgreSQL), medians over --repeat runs:
- prompt turn: POST /prompt → `session.turn.completed` on the SSE stream, one session alone
  and all sessions at once, against the bare same-stack app (bench/bare_apps.py: a FastAPI
  POST that sends the ACP prompt to the same trivial agent subprocess with the ACP SDK and
  publishes the completion on an SSE stream; same uvicorn, same client, same watcher), and
  against the same prompt sent straight to the agent with the ACP SDK (no HTTP at all);
  one session alone is prompted in alternation with one on the bare app, both servers up
  (paired turn by turn, so a drifting machine load slows both alike);
- a streamed reply: the same turn when the agent answers in STREAM_CHUNKS chunks sent back
  to back (prompt "stream N"), one session, against the bare app (which keeps the chunks in
  memory) and the ACP SDK direct; with the message events and SSE bytes Kandev sent for it;
- memory: server RSS growth per session (Kandev and the bare app), RSS of one agent process.

Run:  .venv/bin/python -m bench.bench_sessions [--database sqlite,postgres] [--repeat 3]
          [--sessions 10] [--rounds 5] [--alone 30]      (the issue's size: --sessions 100)
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
    Table,
    add_database_args,
    bare_server,
    child_pids,
    databases,
    in_turns,
    kandev_server,
    median_ms,
    per_run_ms,
    postgres_if,
    print_json_line,
    rss_kib,
    tree_rss_kib,
)

AGENT = str(Path(__file__).with_name("trivial_agent.py"))
STREAM_CHUNKS = 500  # a reply of ~2 KB in four-character chunks
STREAM_PROMPT = f"stream {STREAM_CHUNKS}"


def client_limits(connections: int) -> httpx.Limits:
    """The client drops a connection idle for 2 s: uvicorn closes one idle for 5 s, and a
    client keeping it as long (httpx's default) may send a prompt on it as the server closes
    it — a reset seen under load, with a hundred sessions and rounds of several seconds."""
    return httpx.Limits(max_connections=connections, keepalive_expiry=2.0)


class _QuietClient:
    async def session_update(self, **_: Any) -> None:
        return None


async def bare_sdk(sessions: int, rounds: int, alone_n: int) -> dict[str, Any]:
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

        async def one(conn: Any, sid: str, text: str = "hi") -> float:
            start = time.perf_counter()
            await conn.prompt(session_id=sid, prompt=[text_block(text)])
            return time.perf_counter() - start

        concurrent: list[float] = []
        for _ in range(rounds):
            concurrent += await asyncio.gather(*(one(c, s) for c, s, _ in conns))
        conn, sid, _ = conns[0]
        alone = [await one(conn, sid) for _ in range(alone_n)]
        streamed = [await one(conn, sid, STREAM_PROMPT) for _ in range(_streamed_n(alone_n))]
        agent_rss = statistics.fmean(rss_kib(p) for _, _, p in conns)
    return {
        "concurrent": concurrent,
        "alone": alone,
        "streamed": streamed,
        "agent_rss_kib": agent_rss,
    }


def _streamed_n(alone_n: int) -> int:
    return max(3, alone_n // 3)


class TurnWatcher:
    """Follows the SSE stream and timestamps every turn/state event by id."""

    def __init__(self) -> None:
        self.completed: dict[str, float] = {}
        self.idle: set[str] = set()
        self.changed = asyncio.Event()
        self.message_events = 0  # session.message.added / .updated seen
        self.data_bytes = 0  # of every event's data line

    async def run(self, client: httpx.AsyncClient) -> None:
        async with client.stream("GET", "/api/v1/events", timeout=None) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                self.data_bytes += len(line)
                event = json.loads(line[5:])
                if event["type"] in ("session.message.added", "session.message.updated"):
                    self.message_events += 1
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


async def prompt_turn(
    client: httpx.AsyncClient, watcher: TurnWatcher, sid: str, text: str = "hi"
) -> float:
    """One turn: the prompt's POST until `session.turn.completed` arrives on the stream."""
    start = time.perf_counter()
    r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": text})
    assert r.status_code in (200, 201, 202), r.text
    turn_id = r.json()["turn_id"]
    await watcher.until(lambda: turn_id in watcher.completed)
    return watcher.completed[turn_id] - start


async def measure_turns(
    client: httpx.AsyncClient, watcher: TurnWatcher, sids: list[str], rounds: int, alone_n: int
) -> dict[str, Any]:
    """The same prompt loop on Kandev and on the bare app: all at once, then one session
    with a streamed reply (and what the stream carried for those). One session alone is
    measured paired (`paired_alone`)."""
    for _ in range(3):  # warm-up
        await prompt_turn(client, watcher, sids[0])
    concurrent: list[float] = []
    for _ in range(rounds):
        concurrent += await asyncio.gather(*(prompt_turn(client, watcher, s) for s in sids))
    events, data = watcher.message_events, watcher.data_bytes
    streamed = [
        await prompt_turn(client, watcher, sids[0], STREAM_PROMPT)
        for _ in range(_streamed_n(alone_n))
    ]
    return {
        "concurrent": concurrent,
        "streamed": streamed,
        "stream_message_events": (watcher.message_events - events) / len(streamed),
        "stream_kib": (watcher.data_bytes - data) / len(streamed) / 1024,
    }


async def paired_alone(bare_url: str, kandev_url: str, alone_n: int) -> dict[str, list[float]]:
    """One session alone on each server, prompted in alternation (bare then Kandev, then
    Kandev then bare, …): a machine whose load drifts during the run slows both alike, so
    their ratio is paired turn by turn rather than one phase against another."""
    async with AsyncExitStack() as stack:
        followed = []
        for url in (bare_url, kandev_url):
            client = await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, timeout=120, limits=client_limits(4))
            )
            watcher = TurnWatcher()
            stack.callback(asyncio.create_task(watcher.run(client)).cancel)
            followed.append((client, watcher))
        (bare_client, bare_watcher), (kandev_client, kandev_watcher) = followed
        bare_sid = (await bare_client.post("/api/v1/sessions", json={})).json()["id"]
        setup = await kandev_setup(kandev_client, "paired")
        (kandev_sid,) = await kandev_sessions(kandev_client, kandev_watcher, setup, 1)
        bare, kandev = await in_turns(  # three warm-up pairs
            [
                lambda _: prompt_turn(bare_client, bare_watcher, bare_sid),
                lambda _: prompt_turn(kandev_client, kandev_watcher, kandev_sid),
            ],
            alone_n,
            warmup=3,
        )
        await kandev_client.post(f"/api/v1/sessions/{kandev_sid}/stop", json={})
    return {"bare": bare, "kandev": kandev}


async def kandev_setup(client: httpx.AsyncClient, name: str) -> dict[str, str]:
    """A workspace, a workflow and the trivial agent's profile (`name`, unique on the
    server): ids for kandev_sessions."""

    async def created(path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await client.post(path, json=body)
        assert r.status_code == 201, r.text
        return r.json()

    ws = await created("/api/v1/workspaces", {"name": name})
    flow = await created("/api/v1/workflows", {"workspace_id": ws["id"], "name": name})
    command = [sys.executable, AGENT]
    profile = await created("/api/v1/agent-profiles", {"name": name, "command": command})
    return {"workspace_id": ws["id"], "workflow_id": flow["id"], "profile_id": profile["id"]}


async def kandev_sessions(
    client: httpx.AsyncClient, watcher: TurnWatcher, setup: dict[str, str], count: int
) -> list[str]:
    """`count` tasks with a session of the trivial agent each, once every agent is up."""
    sids = []
    for i in range(count):
        task = (
            await client.post(
                "/api/v1/tasks",
                json={
                    "workspace_id": setup["workspace_id"],
                    "workflow_id": setup["workflow_id"],
                    "title": f"t{i}",
                },
            )
        ).json()
        r = await client.post(
            f"/api/v1/tasks/{task['id']}/sessions", json={"agent_profile_id": setup["profile_id"]}
        )
        sids.append(r.json()["id"])
    await watcher.until(lambda: all(s in watcher.idle for s in sids))
    return sids


async def through_bare(
    url: str, server_pid: int, sessions: int, rounds: int, alone_n: int
) -> dict[str, Any]:
    limits = client_limits(sessions + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        watcher = TurnWatcher()
        follower = asyncio.create_task(watcher.run(client))
        try:
            rss_before = rss_kib(server_pid)
            sids = [
                (await client.post("/api/v1/sessions", json={})).json()["id"]
                for _ in range(sessions)
            ]
            turns = await measure_turns(client, watcher, sids, rounds, alone_n)
            rss_after = rss_kib(server_pid)
        finally:
            follower.cancel()
    return {**turns, "kib_per_session": (rss_after - rss_before) / max(1, sessions)}


async def through_kandev(
    url: str, server_pid: int, sessions: int, rounds: int, alone_n: int
) -> dict[str, Any]:
    limits = client_limits(sessions + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        watcher = TurnWatcher()
        follower = asyncio.create_task(watcher.run(client))
        setup = await kandev_setup(client, "trivial")
        rss_before = rss_kib(server_pid)
        sids = await kandev_sessions(client, watcher, setup, sessions)
        turns = await measure_turns(client, watcher, sids, rounds, alone_n)
        rss_after = rss_kib(server_pid)
        agents = child_pids(server_pid)
        # Each child is Kandev's guard process with the agent under it: the whole tree.
        agent_rss = statistics.fmean(tree_rss_kib(p) for p in agents) if agents else 0.0
        for sid in sids:
            await client.post(f"/api/v1/sessions/{sid}/stop", json={})
        follower.cancel()
    return {
        **turns,
        "server_rss_before_kib": rss_before,
        "server_rss_after_kib": rss_after,
        "kib_per_session": (rss_after - rss_before) / max(1, sessions),
        "agent_processes": len(agents),
        "agent_rss_kib": agent_rss,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--alone", type=int, default=30, help="one-session prompts per run")
    add_database_args(parser)
    args = parser.parse_args()
    kinds = databases(args.database)
    n, rounds, alone = args.sessions, args.rounds, args.alone

    sdk: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    kandev: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp, postgres_if(kinds) as pg:
        for run in range(args.repeat):
            label = f"run {run + 1}/{args.repeat}"
            sdk.append(await bare_sdk(n, rounds, alone))
            with bare_server(Path(tmp) / f"bare-{run}") as (bare_url, bare_proc):
                bare.append(await through_bare(bare_url, bare_proc.pid, n, rounds, alone))
                for kind in kinds:
                    db_url = await pg.new_database("sessions") if kind == "postgres" and pg else ""
                    home = Path(tmp) / f"{kind}-{run}"
                    with kandev_server(home, database_url=db_url) as (url, proc):
                        kandev[kind].append(await through_kandev(url, proc.pid, n, rounds, alone))
                        kandev[kind][-1]["paired"] = await paired_alone(bare_url, url, alone)
                    paired = kandev[kind][-1]["paired"]
                    print(
                        f"{label}: one session alone, p50: Kandev {kind} "
                        f"{median_ms([paired['kandev']], 50):.2f} ms, bare app "
                        f"{median_ms([paired['bare']], 50):.2f} ms (alternating), ACP SDK "
                        f"direct {median_ms([sdk[-1]['alone']], 50):.2f} ms",
                        flush=True,
                    )

    def runs(results: list[dict[str, Any]], key: str) -> list[list[float]]:
        return [r[key] for r in results]

    rows: list[dict[str, Any]] = []
    for kind in kinds:
        name = "SQLite" if kind == "sqlite" else "PostgreSQL"
        k = kandev[kind]
        table = Table(
            f"{name}: prompt turn, REST prompt → SSE session.turn.completed "
            f"({n} sessions, medians of {args.repeat} runs)"
        )
        paired = [r["paired"] for r in k]
        for p in (50, 95):
            table.add(
                f"turn, one session, p{p} [{name}]",
                per_run_ms(runs(paired, "kandev"), p),
                per_run_ms(runs(paired, "bare"), p),
                target=("<=", 3.0) if p == 50 else None,
            )
        for p in (50, 95):
            table.add(
                f"turn, {n} sessions at once, p{p} [{name}]",
                per_run_ms(runs(k, "concurrent"), p),
                per_run_ms(runs(bare, "concurrent"), p),
            )
        table.add(
            f"turn, one session, p50, against the ACP SDK direct [{name}]",
            per_run_ms(runs(paired, "kandev"), 50),
            per_run_ms(runs(sdk, "alone"), 50),
        )
        p50_rows = (
            (f"turn, {n} at once, p50, against the ACP SDK direct [{name}]", "concurrent", sdk),
            (
                f"streamed reply ({STREAM_CHUNKS} chunks), one session, p50 [{name}]",
                "streamed",
                bare,
            ),
            (f"streamed reply, p50, against the ACP SDK direct [{name}]", "streamed", sdk),
        )
        for figure, key, baseline in p50_rows:
            table.add(figure, per_run_ms(runs(k, key), 50), per_run_ms(runs(baseline, key), 50))
        table.add(
            f"server RSS per session [{name}]",
            [r["kib_per_session"] for r in k],
            [r["kib_per_session"] for r in bare],
            unit="KiB",
        )
        table.add(
            f"agent process RSS (Kandev: with its guard) [{name}]",
            [r["agent_rss_kib"] / 1024 for r in k],
            [r["agent_rss_kib"] / 1024 for r in sdk],
            unit="MiB",
        )
        table.print()
        print(f"  agent processes under Kandev: {k[-1]['agent_processes']}")
        print(
            f"  per streamed reply ({STREAM_CHUNKS} chunks), last run: "
            f"{k[-1]['stream_message_events']:.0f} message events, "
            f"{k[-1]['stream_kib']:.0f} KiB of event data on the stream"
        )
        rows += table.rows
    print_json_line("sessions", rows=rows, sessions=n, rounds=rounds, repeat=args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
