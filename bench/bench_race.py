"""Concurrent answerers (default 250 over 25 questions; the issue: 500 over 50) racing, half
over REST and half over MCP.

Checks the one-winner property under load — exactly one `claimed: true` per question, every
loser replayed the winner's answer — and reports throughput and latency, per database
(SQLite file, PostgreSQL), beside the bare same-stack app (bench/bare_apps.py: the same REST
route and MCP tool answering with an in-memory claim, same uvicorn) raced by the same
clients in the same run; medians over --repeat runs (target: Kandev ≥ 60% of the bare
throughput). Each question's answerers have clients of their own (a REST pool, an MCP
client), set up before the race starts.

Run:  .venv/bin/python -m bench.bench_race [--database sqlite,postgres] [--repeat 3]
          [--bundles 25] [--answerers 250]      (the issue's size: --bundles 50 --answerers 500)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import (
    ONE_QUESTION,
    Table,
    add_database_args,
    bare_server,
    bench_task,
    databases,
    kandev_server,
    per_run_ms,
    postgres_if,
    print_json_line,
)


async def _questions(client: httpx.AsyncClient, count: int) -> list[str]:
    task = await bench_task(client, "race")
    pending = []
    for _ in range(count):
        sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
        await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
        r = await client.post(
            "/api/v1/clarification/request", json={"session_id": sid, "questions": ONE_QUESTION}
        )
        pending.append(r.json()["pending_id"])
    return pending


async def _bare_questions(client: httpx.AsyncClient, count: int) -> list[str]:
    pending = []
    for i in range(count):
        r = await client.post(
            "/api/v1/clarification/request", json={"session_id": f"s{i}", "questions": ONE_QUESTION}
        )
        pending.append(r.json()["pending_id"])
    return pending


async def race(url: str, bare: bool, bundles: int, answerers: int) -> dict[str, Any]:
    """One race on one running server (Kandev or the bare app), same clients for both."""
    per_bundle = answerers // bundles
    async with (
        contextlib.AsyncExitStack() as stack,
        httpx.AsyncClient(base_url=url, timeout=120) as rest,
    ):
        pending = await (_bare_questions if bare else _questions)(rest, bundles)
        # Each question's answerers get clients of their own — a REST pool (a connection
        # each) and an MCP client: one pool of hundreds of connections makes the client scan
        # all of them on every request and response (httpcore), so the client, not the
        # server, set the pace; and the slower the server, the more connections were open
        # at once, so that cost grew with the server's latency.
        tls = ssl.create_default_context()  # one for every pool (unused: plain http)
        pools = {
            pending_id: await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=url,
                    timeout=120,
                    verify=tls,
                    limits=httpx.Limits(max_connections=per_bundle),
                )
            )
            for pending_id in pending
        }

        async def mcp_client() -> Client:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(timeout=httpx2.Timeout(120), verify=tls)
            )
            return await stack.enter_async_context(
                Client(streamable_http_client(f"{url}/mcp", http_client=http))
            )

        mcp_clients = {pending_id: await mcp_client() for pending_id in pending}
        results: dict[str, list[dict[str, Any]]] = defaultdict(list)
        latencies: list[float] = []

        async def answer(pending_id: str, i: int) -> None:
            choice = ["yes", "no"][i % 2]
            answers = [{"question_id": "q", "selected_options": [choice]}]
            start = time.perf_counter()
            if i % 2 == 0:
                r = await pools[pending_id].post(
                    f"/api/v1/clarification/{pending_id}/respond", json={"answers": answers}
                )
                assert r.status_code == 200, r.text
                body = r.json()
            else:
                result = await mcp_clients[pending_id].call_tool(
                    "answer_question_kandev", {"pending_id": pending_id, "answers": answers}
                )
                assert not result.is_error, result.content
                body = json.loads(result.content[0].text)
            latencies.append(time.perf_counter() - start)
            results[pending_id].append(body)

        started = time.perf_counter()
        await asyncio.gather(*(answer(p, i) for p in pending for i in range(per_bundle)))
        elapsed = time.perf_counter() - started

    winners = sum(1 for bodies in results.values() for b in bodies if b["claimed"])
    exactly_one = all(sum(b["claimed"] for b in bodies) == 1 for bodies in results.values())
    replayed = all(
        all(b["response"] == next(w for w in bodies if w["claimed"])["response"] for b in bodies)
        for bodies in results.values()
    )
    total = sum(len(b) for b in results.values())
    return {
        "answers": total,
        "winners": winners,
        "ok": exactly_one and replayed and winners == bundles,
        "exactly_one": exactly_one,
        "replayed": replayed,
        "throughput": total / elapsed,
        "latencies": latencies,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=25)
    parser.add_argument("--answerers", type=int, default=250)
    add_database_args(parser)
    args = parser.parse_args()
    kinds = databases(args.database)

    bare: list[dict[str, Any]] = []
    kandev: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp, postgres_if(kinds) as pg:
        for run in range(args.repeat):
            label = f"run {run + 1}/{args.repeat}"
            with bare_server(Path(tmp) / f"bare-{run}") as (url, _):
                bare.append(await race(url, True, args.bundles, args.answerers))
            print(f"{label}: bare app {bare[-1]['throughput']:.0f} answers/s", flush=True)
            for kind in kinds:
                db_url = await pg.new_database("race") if kind == "postgres" and pg else ""
                with kandev_server(Path(tmp) / f"{kind}-{run}", database_url=db_url) as (url, _):
                    kandev[kind].append(await race(url, False, args.bundles, args.answerers))
                print(
                    f"{label}: Kandev {kind} {kandev[kind][-1]['throughput']:.0f} answers/s",
                    flush=True,
                )

    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    ok = all(r["ok"] for r in bare)
    for kind in kinds:
        name = "SQLite" if kind == "sqlite" else "PostgreSQL"
        k = kandev[kind]
        table = Table(
            f"{name}: {args.answerers} answerers over {args.bundles} questions "
            f"(half REST, half MCP; medians of {args.repeat} runs)"
        )
        table.add(
            f"race throughput [{name}]",
            [r["throughput"] for r in k],
            [r["throughput"] for r in bare],
            unit="answers/s",
            target=(">=", 0.6),
        )
        for p in (50, 95):
            table.add(
                f"race answer latency p{p} [{name}]",
                per_run_ms([r["latencies"] for r in k], p),
                per_run_ms([r["latencies"] for r in bare], p),
            )
        runs_ok = sum(r["ok"] for r in k)
        table.check(
            f"runs with exactly one winner, losers replayed [{name}]", runs_ok, "runs", ">=", len(k)
        )
        table.print()
        rows += table.rows
        checks += table.checks
        ok = ok and runs_ok == len(k)
    print_json_line(
        "race",
        rows=rows,
        checks=checks,
        answers=args.answerers,
        bundles=args.bundles,
        repeat=args.repeat,
        one_winner_everywhere=ok,
    )
    if not ok:
        raise SystemExit("one-winner property violated")


if __name__ == "__main__":
    asyncio.run(main())
