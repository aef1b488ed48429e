"""Answer latency and many blocked agents (the clarification hot paths), beside the bare app.

Every figure is measured on Kandev (SQLite file and/or PostgreSQL) and, in the same run, on
the bare same-stack app (bench/bare_apps.py: FastAPI + an MCP SDK tool awaiting an asyncio
future that a POST resolves, same uvicorn, no database), driven by the very same clients:

1. latency from a REST answer to the blocked agent's `ask_user_question_kandev` call
   returning (official MCP client over loopback), one agent waiting: measured paired, a
   bare-app server up beside each Kandev server and one question answered on each in
   alternation (each in turn first), so a machine whose load drifts slows both alike;
2. N agents (default 1,000) blocked at once in `ask_user_question_kandev` (simulated agents:
   MCP clients on loopback, no agent processes): server RSS per waiting agent, answer
   latency for 50 of them while the rest keep waiting (against the single-agent p50:
   target ≤ 1.5x), then the rest answered 50 at a time. Before the baseline RSS is read,
   one burst of RAMP agents blocks at once and is answered (what a burst opens once —
   database connections up to the pool's size, their prepared statements — is then in the
   baseline, not spread over the waiting agents); the second half's RSS per agent is also
   reported (what one more waiting agent costs);
3. the older floor, one bare claim transaction through the repository, per database.

Figures are medians over --repeat runs of each run's percentile.

Run:  .venv/bin/python -m bench.bench_answers [--database sqlite,postgres] [--repeat 3]
          [--blocked 1000] [--samples 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import (
    ONE_QUESTION,
    Postgres,
    Table,
    add_database_args,
    bare_claim,
    bare_server,
    bench_task,
    databases,
    in_turns,
    kandev_server,
    median,
    median_ms,
    per_run_ms,
    postgres_if,
    print_json_line,
    rss_kib,
)

QUESTIONS = ONE_QUESTION
RAMP = 50
ANSWER = {"answers": [{"question_id": "q", "selected_options": ["yes"]}]}


class QuestionWatcher:
    """Follows SSE and records each session's newest pending_id as questions appear."""

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}
        self.changed = asyncio.Event()

    async def run(self, client: httpx.AsyncClient) -> None:
        async with client.stream("GET", "/api/v1/events", timeout=None) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                message = event.get("message") or {}
                if event["type"] == "session.message.added" and message.get("requests_input"):
                    self.pending[message["session_id"]] = message["metadata"]["pending_id"]
                    self.changed.set()

    async def pending_id(self, session_id: str, timeout: float = 120) -> str:
        async with asyncio.timeout(timeout):
            while session_id not in self.pending:
                self.changed.clear()
                await self.changed.wait()
        return self.pending.pop(session_id)


async def _sessions(client: httpx.AsyncClient, count: int) -> list[tuple[str, dict[str, str]]]:
    task = await bench_task(client)
    out = []
    for _ in range(count):
        sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
        creds = (await client.post(f"/api/v1/sessions/{sid}/agent-token")).json()
        out.append((sid, creds))
    return out


async def _bare_sessions(url: str, count: int) -> list[tuple[str, dict[str, str]]]:
    """The bare app has no sessions: the agent names itself in the tool call."""
    return [(uuid.uuid4().hex, {"token": "", "mcp_url": f"{url}/mcp"}) for _ in range(count)]


class SimulatedAgent:
    """An agent reduced to its MCP client: it asks and blocks until answered. With no token
    (the bare app) it passes its session id as a tool argument instead."""

    def __init__(self, session_id: str, creds: dict[str, str]) -> None:
        self.session_id = session_id
        self.creds = creds
        self.returned_at: float | None = None
        self.result: Any = None
        self.done = asyncio.Event()

    async def ask(self) -> None:
        token = self.creds["token"]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        arguments: dict[str, Any] = {"questions": QUESTIONS}
        if not token:
            arguments["session_id"] = self.session_id
        timeout = httpx2.Timeout(120, read=None)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            Client(streamable_http_client(self.creds["mcp_url"], http_client=http)) as client,
        ):
            self.result = await client.call_tool(
                "ask_user_question_kandev", arguments, read_timeout_seconds=3600
            )
        self.returned_at = time.perf_counter()
        self.done.set()


async def answer_latency(
    client: httpx.AsyncClient,
    watcher: QuestionWatcher,
    n: int,
    sessions: list[tuple[str, dict[str, str]]] | None = None,
) -> list[float]:
    """One agent at a time: answer over REST, time until its tool call returned."""
    latencies = []
    for sid, creds in sessions if sessions is not None else await _sessions(client, n):
        agent = SimulatedAgent(sid, creds)
        call = asyncio.create_task(agent.ask())
        pending_id = await watcher.pending_id(sid)
        start = time.perf_counter()
        r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=ANSWER)
        assert r.status_code == 200, r.text
        await call
        assert agent.returned_at is not None and not agent.result.is_error
        latencies.append(agent.returned_at - start)
    return latencies


def _one_answer(
    client: httpx.AsyncClient, watcher: QuestionWatcher, sessions: list[tuple[str, dict[str, str]]]
) -> Callable[[int], Awaitable[float]]:
    """A measure for `in_turns`: round i answers a question of the i-th session."""

    async def measure(i: int) -> float:
        return (await answer_latency(client, watcher, 1, [sessions[i]]))[0]

    return measure


async def paired_latency(kandev_url: str, bare_url: str, n: int) -> tuple[list[float], list[float]]:
    """One agent waiting at a time, on Kandev and on the bare app in alternation (both
    servers up, each in turn first): (Kandev's latencies, the bare app's)."""
    async with (
        httpx.AsyncClient(base_url=kandev_url, timeout=120) as kandev,
        httpx.AsyncClient(base_url=bare_url, timeout=120) as bare,
    ):
        watchers = QuestionWatcher(), QuestionWatcher()
        followers = [
            asyncio.create_task(watchers[0].run(kandev)),
            asyncio.create_task(watchers[1].run(bare)),
        ]
        try:
            measures = [
                _one_answer(kandev, watchers[0], await _sessions(kandev, n + 3)),
                _one_answer(bare, watchers[1], await _bare_sessions(bare_url, n + 3)),
            ]
            latencies = await in_turns(measures, n, warmup=3)
        finally:
            for follower in followers:
                follower.cancel()
    return latencies[0], latencies[1]


async def bare_claim_on(kind: str, pg: Postgres | None, n: int) -> list[float]:
    """The older floor: one claim transaction through the same repository, on that database."""
    if kind == "postgres":
        assert pg is not None
        url = await pg.new_database("claim")
        return await bare_claim(url.replace("postgresql://", "postgresql+asyncpg://", 1), n)
    with tempfile.TemporaryDirectory() as tmp:
        return await bare_claim(f"sqlite+aiosqlite:///{tmp}/bare.db", n)


async def many_blocked(
    pid: int,
    client: httpx.AsyncClient,
    watcher: QuestionWatcher,
    sessions: list[tuple[str, dict[str, str]]],
    sample: int = 50,
) -> dict[str, Any]:
    """Block every agent of `sessions` at once (RAMP connecting at a time), then answer
    `sample` of them one by one while the others keep waiting, then the rest."""
    blocked = len(sessions)
    rss_before = rss_kib(pid)
    agents = [SimulatedAgent(sid, creds) for sid, creds in sessions]
    started = time.perf_counter()
    calls: list[asyncio.Task[None]] = []
    pending: dict[str, str] = {}
    ramp = asyncio.Semaphore(RAMP)  # agents connecting at once (the client is one process)

    async def block(agent: SimulatedAgent) -> None:
        async with ramp:
            call = asyncio.create_task(agent.ask())
            calls.append(call)
            asked = asyncio.create_task(watcher.pending_id(agent.session_id, timeout=600))
            await asyncio.wait([call, asked], return_when=asyncio.FIRST_COMPLETED)
            if not asked.done():  # the call ended without asking: an error
                asked.cancel()
                call.result()
                raise AssertionError(f"the tool call returned before asking: {agent.result}")
            pending[agent.session_id] = asked.result()

    half = blocked // 2
    await asyncio.gather(*(block(a) for a in agents[:half]))
    rss_half = rss_kib(pid)
    await asyncio.gather(*(block(a) for a in agents[half:]))
    all_blocked_s = time.perf_counter() - started
    rss_blocked = rss_kib(pid)
    # Answer `sample` of them one by one while the others keep waiting.
    one_by_one = []
    for agent in agents[:sample]:
        start = time.perf_counter()
        r = await client.post(
            f"/api/v1/clarification/{pending[agent.session_id]}/respond", json=ANSWER
        )
        assert r.status_code == 200, r.text
        async with asyncio.timeout(60):
            await agent.done.wait()
        assert agent.returned_at is not None
        one_by_one.append(agent.returned_at - start)
    # Then everyone else at once.
    start = time.perf_counter()
    limits = asyncio.Semaphore(50)

    async def answer(agent: SimulatedAgent) -> None:
        async with limits:
            r = await client.post(
                f"/api/v1/clarification/{pending[agent.session_id]}/respond", json=ANSWER
            )
            assert r.status_code == 200, r.text

    await asyncio.gather(*(answer(a) for a in agents[sample:]))
    await asyncio.gather(*calls)
    drain_s = time.perf_counter() - start
    errors = sum(1 for a in agents if a.result is None or a.result.is_error)
    return {
        "rss_before_kib": rss_before,
        "rss_blocked_kib": rss_blocked,
        "kib_per_agent": (rss_blocked - rss_before) / max(1, blocked),
        # the second half alone: what one more waiting agent costs once the first half waits
        "kib_per_agent_marginal": (rss_blocked - rss_half) / max(1, blocked - half),
        "all_blocked_s": all_blocked_s,
        "sample": one_by_one,
        "drain_s": drain_s,
        "errors": errors,
    }


async def one_run(url: str, pid: int, bare: bool, samples: int, blocked: int) -> dict[str, Any]:
    """One agent waiting (`samples` of it; 0: none) and the crowd, on one running server
    (Kandev or the bare app)."""
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        watcher = QuestionWatcher()
        follower = asyncio.create_task(watcher.run(client))
        try:

            async def sessions(n: int) -> list[tuple[str, dict[str, str]]]:
                return await _bare_sessions(url, n) if bare else await _sessions(client, n)

            # Warm-up: a few answers, then one burst as wide as the blocking ramp, so the
            # baseline RSS already holds what a burst opens once (connections and their
            # prepared statements, up to the pool's size), not per waiting agent.
            await answer_latency(client, watcher, 3, await sessions(3))
            burst = await many_blocked(pid, client, watcher, await sessions(RAMP), sample=0)
            assert not burst["errors"], burst
            latency = []  # samples=0: Kandev's single agent is measured paired beforehand
            if samples:
                latency = await answer_latency(client, watcher, samples, await sessions(samples))
            crowd = await many_blocked(pid, client, watcher, await sessions(blocked))
        finally:
            follower.cancel()
    return {"latency": latency, **crowd}


def _report(
    name: str, kandev: list[dict], bare: list[dict], claims: list[list[float]], blocked: int
) -> tuple[Table, dict[str, Any]]:
    def runs(results: list[dict], key: str) -> list[list[float]]:
        return [r[key] for r in results]

    table = Table(
        f"{name}: answer → blocked agent's tool call returns (medians of {len(kandev)} runs)"
    )
    # One agent waiting on Kandev: paired with a bare app up beside it (paired_latency);
    # the bare app's own phase measures its single agent for its crowd ratio.
    single_k = per_run_ms(runs(kandev, "latency"), 50)
    single_b = per_run_ms(runs(bare, "latency"), 50)
    table.add(
        f"answer, one agent waiting, p50 (paired) [{name}]",
        single_k,
        per_run_ms(runs(kandev, "paired_bare"), 50),
        target=("<=", 2.0),
    )
    table.add(
        f"answer, one agent waiting, p95 (paired) [{name}]",
        per_run_ms(runs(kandev, "latency"), 95),
        per_run_ms(runs(kandev, "paired_bare"), 95),
    )
    crowd_k = per_run_ms(runs(kandev, "sample"), 50)
    crowd_b = per_run_ms(runs(bare, "sample"), 50)
    table.add(f"answer, {blocked} waiting, p50 [{name}]", crowd_k, crowd_b)
    table.add(
        f"answer, {blocked} waiting, p95 [{name}]",
        per_run_ms(runs(kandev, "sample"), 95),
        per_run_ms(runs(bare, "sample"), 95),
    )
    kib_k = [r["kib_per_agent"] for r in kandev]
    kib_b = [r["kib_per_agent"] for r in bare]
    table.add(f"server RSS per waiting agent [{name}]", kib_k, kib_b, unit="KiB")
    table.add(
        f"server RSS per waiting agent, second {blocked - blocked // 2} [{name}]",
        [r["kib_per_agent_marginal"] for r in kandev],
        [r["kib_per_agent_marginal"] for r in bare],
        unit="KiB",
    )
    table.add(
        f"answering the other {blocked - 50}, 50 in flight [{name}]",
        [r["drain_s"] * 1000 for r in kandev],
        [r["drain_s"] * 1000 for r in bare],
    )
    table.add(
        f"answer p50 against one bare claim transaction [{name}]",
        single_k,  # per run, like the claims
        per_run_ms(claims, 50),
    )
    crowd_over_single = median([c / s for c, s in zip(crowd_k, single_k, strict=True) if s])
    bare_crowd_over_single = median([c / s for c, s in zip(crowd_b, single_b, strict=True) if s])
    table.check(
        f"{blocked} waiting p50 / one waiting p50, Kandev [{name}]",
        crowd_over_single,
        "x",
        "<=",
        1.5,
    )
    table.check(f"RSS per waiting agent, Kandev [{name}]", median(kib_k), "KiB", "<=", 64)
    table.check(f"errors, Kandev [{name}]", sum(r["errors"] for r in kandev), "", "<=", 0)
    table.print()
    print(
        f"  ({blocked} waiting p50 / one waiting p50 on the bare app: "
        f"{bare_crowd_over_single:.2f}x; errors on the bare app: "
        f"{sum(r['errors'] for r in bare)})"
    )
    extra = {
        f"{name}_crowd_over_single": round(crowd_over_single, 3),
        f"{name}_kib_per_blocked_agent": round(median(kib_k), 1),
        f"{name}_errors": sum(r["errors"] for r in kandev),
    }
    return table, extra


def ratio_or0(a: float, b: float) -> float:
    return a / b if b else 0.0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocked", type=int, default=300)
    parser.add_argument("--samples", type=int, default=30)
    add_database_args(parser)
    args = parser.parse_args()
    kinds = databases(args.database)
    blocked = max(args.blocked, 51)

    bare: list[dict[str, Any]] = []
    kandev: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    claims: dict[str, list[list[float]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp, postgres_if(kinds) as pg:
        for run in range(args.repeat):
            label = f"run {run + 1}/{args.repeat}"
            with bare_server(Path(tmp) / f"bare-{run}") as (url, proc):
                bare.append(await one_run(url, proc.pid, True, args.samples, blocked))
            print(
                f"{label} bare app: answer p50 {median_ms([bare[-1]['latency']], 50):.2f} ms",
                flush=True,
            )
            for kind in kinds:
                db_url = await pg.new_database("answers") if kind == "postgres" and pg else ""
                home = Path(tmp) / f"{kind}-{run}"
                with (
                    kandev_server(home, database_url=db_url) as (url, proc),
                    bare_server(Path(tmp) / f"bare-{kind}-{run}") as (bare_url, _),
                ):
                    paired = await paired_latency(url, bare_url, args.samples)
                    result = await one_run(url, proc.pid, False, 0, blocked)
                kandev[kind].append({**result, "latency": paired[0], "paired_bare": paired[1]})
                claims[kind].append(await bare_claim_on(kind, pg, 100))
                print(
                    f"{label} Kandev {kind}: answer p50 "
                    f"{median_ms([paired[0]], 50):.2f} ms, the bare app beside it "
                    f"{median_ms([paired[1]], 50):.2f} ms (alternating)",
                    flush=True,
                )

    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    figures: dict[str, Any] = {"blocked": blocked, "samples": args.samples, "repeat": args.repeat}
    for kind in kinds:
        name = "SQLite" if kind == "sqlite" else "PostgreSQL"
        table, extra = _report(name, kandev[kind], bare, claims[kind], blocked)
        rows += table.rows
        checks += table.checks
        figures.update(extra)
    print_json_line("answers", rows=rows, checks=checks, **figures)


if __name__ == "__main__":
    asyncio.run(main())
