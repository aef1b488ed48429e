"""Answer latency and many blocked agents (the clarification hot paths).

1. Latency from a REST answer to the blocked agent's `ask_user_question_kandev` call returning
   (official MCP client over loopback), against the bare cost of one claim transaction on
   the same kind of database (SQLite file).
2. N agents (default 1,000) blocked at once in `ask_user_question_kandev` (simulated agents:
   MCP clients on loopback, no agent processes): server memory while they wait, and answer
   latency for some of them while the rest keep waiting.

Run:  .venv/bin/python -m bench.bench_answers [--blocked 1000] [--samples 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import (
    ONE_QUESTION,
    bare_claim,
    bench_task,
    kandev_server,
    percentile,
    print_json_line,
    rss_kib,
    summary_ms,
)

QUESTIONS = ONE_QUESTION
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


class SimulatedAgent:
    """An agent reduced to its MCP client: it asks and blocks until answered."""

    def __init__(self, session_id: str, creds: dict[str, str]) -> None:
        self.session_id = session_id
        self.creds = creds
        self.returned_at: float | None = None
        self.result: Any = None
        self.done = asyncio.Event()

    async def ask(self) -> None:
        headers = {"Authorization": f"Bearer {self.creds['token']}"}
        timeout = httpx2.Timeout(30, read=None)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            Client(streamable_http_client(self.creds["mcp_url"], http_client=http)) as client,
        ):
            self.result = await client.call_tool(
                "ask_user_question_kandev", {"questions": QUESTIONS}, read_timeout_seconds=3600
            )
        self.returned_at = time.perf_counter()
        self.done.set()


async def answer_latency(
    client: httpx.AsyncClient, watcher: QuestionWatcher, n: int
) -> list[float]:
    """One agent at a time: answer over REST, time until its tool call returned."""
    latencies = []
    for sid, creds in await _sessions(client, n):
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


async def bare_claim_sqlite(n: int) -> list[float]:
    """The floor: one claim transaction on a SQLite file, through the same repository."""
    with tempfile.TemporaryDirectory() as tmp:
        return await bare_claim(f"sqlite+aiosqlite:///{tmp}/bare.db", n)


async def many_blocked(
    url: str, pid: int, client: httpx.AsyncClient, watcher: QuestionWatcher, blocked: int
) -> dict[str, Any]:
    sessions = await _sessions(client, blocked)
    rss_before = rss_kib(pid)
    agents = [SimulatedAgent(sid, creds) for sid, creds in sessions]
    started = time.perf_counter()
    calls = [asyncio.create_task(a.ask()) for a in agents]
    pending = {a.session_id: await watcher.pending_id(a.session_id, timeout=600) for a in agents}
    all_blocked_s = time.perf_counter() - started
    rss_blocked = rss_kib(pid)
    # Answer 50 of them one by one while the others keep waiting.
    sample = []
    for agent in agents[:50]:
        start = time.perf_counter()
        r = await client.post(
            f"/api/v1/clarification/{pending[agent.session_id]}/respond", json=ANSWER
        )
        assert r.status_code == 200, r.text
        async with asyncio.timeout(60):
            await agent.done.wait()
        assert agent.returned_at is not None
        sample.append(agent.returned_at - start)
    # Then everyone else at once.
    start = time.perf_counter()
    limits = asyncio.Semaphore(50)

    async def answer(agent: SimulatedAgent) -> None:
        async with limits:
            r = await client.post(
                f"/api/v1/clarification/{pending[agent.session_id]}/respond", json=ANSWER
            )
            assert r.status_code == 200, r.text

    await asyncio.gather(*(answer(a) for a in agents[50:]))
    await asyncio.gather(*calls)
    drain_s = time.perf_counter() - start
    errors = sum(1 for a in agents if a.result is None or a.result.is_error)
    return {
        "rss_before_kib": rss_before,
        "rss_blocked_kib": rss_blocked,
        "all_blocked_s": all_blocked_s,
        "sample": sample,
        "drain_s": drain_s,
        "errors": errors,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocked", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()

    bare = await bare_claim_sqlite(200)
    with tempfile.TemporaryDirectory() as home, kandev_server(Path(home)) as (url, proc):
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
            watcher = QuestionWatcher()
            follower = asyncio.create_task(watcher.run(client))
            latency = await answer_latency(client, watcher, args.samples)
            crowd = await many_blocked(url, proc.pid, client, watcher, args.blocked)
            follower.cancel()

    per_agent = (crowd["rss_blocked_kib"] - crowd["rss_before_kib"]) / max(1, args.blocked)
    print()
    print("answer → blocked agent's tool call returns (one agent waiting):")
    print(f"  Kandev end to end   : {summary_ms(latency)}")
    print(f"  bare claim (SQLite) : {summary_ms(bare)}")
    ratio = percentile(latency, 50) / percentile(bare, 50)
    print(f"  ratio p50 end-to-end / bare claim: {ratio:.1f}x")
    print(f"{args.blocked} agents blocked at once:")
    print(f"  all blocked after   : {crowd['all_blocked_s']:.1f} s")
    print(
        f"  server RSS          : {crowd['rss_before_kib'] / 1024:.1f} MiB before, "
        f"{crowd['rss_blocked_kib'] / 1024:.1f} MiB with all waiting → {per_agent:.1f} KiB each"
    )
    print(f"  answer latency while the rest wait: {summary_ms(crowd['sample'])}")
    print(
        f"  answering the other {args.blocked - 50} (50 in flight): {crowd['drain_s']:.1f} s, "
        f"errors: {crowd['errors']}"
    )
    print_json_line(
        "answers",
        answer_p50_ms=percentile(latency, 50) * 1000,
        answer_p95_ms=percentile(latency, 95) * 1000,
        bare_claim_p50_ms=percentile(bare, 50) * 1000,
        bare_claim_p95_ms=percentile(bare, 95) * 1000,
        blocked=args.blocked,
        kib_per_blocked_agent=per_agent,
        crowd_answer_p50_ms=percentile(crowd["sample"], 50) * 1000,
        crowd_answer_p95_ms=percentile(crowd["sample"], 95) * 1000,
        crowd_answer_mean_ms=statistics.fmean(crowd["sample"]) * 1000,
        errors=crowd["errors"],
    )


if __name__ == "__main__":
    asyncio.run(main())
