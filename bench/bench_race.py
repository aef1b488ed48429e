"""500 concurrent answerers racing over 50 questions, half over REST and half over MCP.

Checks the one-winner property under load — exactly one `claimed: true` per question, every
loser replayed the winner's answer — and reports throughput.

Run:  .venv/bin/python -m bench.bench_race [--bundles 50] [--answerers 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    bench_task,
    kandev_server,
    percentile,
    print_json_line,
    summary_ms,
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=50)
    parser.add_argument("--answerers", type=int, default=500)
    args = parser.parse_args()
    per_bundle = args.answerers // args.bundles

    with tempfile.TemporaryDirectory() as home, kandev_server(Path(home)) as (url, _):
        limits = httpx.Limits(max_connections=args.answerers)
        async with (
            httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as rest,
            httpx2.AsyncClient(timeout=httpx2.Timeout(120)) as http2,
            Client(streamable_http_client(f"{url}/mcp", http_client=http2)) as mcp,
        ):
            pending = await _questions(rest, args.bundles)
            results: dict[str, list[dict[str, Any]]] = defaultdict(list)
            latencies: list[float] = []

            async def answer(pending_id: str, i: int) -> None:
                choice = ["yes", "no"][i % 2]
                answers = [{"question_id": "q", "selected_options": [choice]}]
                start = time.perf_counter()
                if i % 2 == 0:
                    r = await rest.post(
                        f"/api/v1/clarification/{pending_id}/respond", json={"answers": answers}
                    )
                    assert r.status_code == 200, r.text
                    body = r.json()
                else:
                    result = await mcp.call_tool(
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
    print()
    print(f"{total} answerers over {args.bundles} questions (half REST, half MCP):")
    print(f"  winners: {winners} (exactly one per question: {exactly_one})")
    print(f"  every loser got the winner's answer: {replayed}")
    print(f"  throughput: {total / elapsed:.0f} answers/s ({elapsed:.2f} s in all)")
    print(f"  answer latency under the race: {summary_ms(latencies)}")
    print_json_line(
        "race",
        answers=total,
        bundles=args.bundles,
        winners=winners,
        exactly_one_winner=exactly_one,
        losers_replayed_winner=replayed,
        answers_per_second=total / elapsed,
        p50_ms=percentile(latencies, 50) * 1000,
        p95_ms=percentile(latencies, 95) * 1000,
    )
    if not (exactly_one and replayed and winners == args.bundles):
        raise SystemExit("one-winner property violated")


if __name__ == "__main__":
    asyncio.run(main())
