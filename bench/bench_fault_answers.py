"""Crash fault test: SIGKILL the server 0-200 ms after `respond` returned `claimed: true`.

CONTRACT §8: once respond returned claimed: true the agent receives the answer exactly once
(in its waiting tool call, or as a resumed turn after the restart). For each database (a
SQLite data dir; PostgreSQL on a throwaway server), N trials (tests/answer_fault.py): a
real `kandev serve`, a real ACP agent (the scripted agent, recording every answer it gets),
a question, an answer over REST carrying a nonce, a seeded random delay in [0, max], SIGKILL
(and the agent's process group), restart on the same data, wait until the session settled,
count how often the nonce reached the agent. Trials cycle through: live waiter answered
(3 of 5), detached (the agent's call was abandoned: resume turn), live waiter rejected.

Printed per database: trials, delivered in the tool call / as a resumed turn, lost (0
deliveries), duplicated (2 or more), and respond latency against the bare claim
transaction on the same database — each with its baseline and ratio. Every trial's respond
is the first one of a fresh server (cold); the warm figure answers `--warm` questions in a
row on one server (agents reduced to their MCP client, as bench_answers does).

Run:  .venv/bin/python -m bench.bench_fault_answers [--trials 30] [--seed N]
      [--databases sqlite,postgres] [--max-delay-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

import httpx

from bench.bench_answers import ANSWER, SimulatedAgent, _sessions
from bench.common import bare_claim, percentile, print_json_line
from tests.answer_fault import Server, TrialResult, run_trial

MODES = ("live", "live", "live", "detached", "reject")
# What the tester measured before the fix (same procedure, kill 5-45 ms after respond).
BEFORE_FIX = {"sqlite": (5, 21), "postgres": (3, 10)}


async def _pg_database(pg, name: str) -> str:  # type: ignore[no-untyped-def]
    import asyncpg

    conn = await asyncpg.connect(pg.admin_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return pg.url_for(name)


def _pct(seconds: list[float], p: float) -> float:
    """Percentile in ms (0 with no samples)."""
    return percentile(seconds, p) * 1000 if seconds else 0.0


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


async def warm_respond(home: Path, database_url: str, n: int) -> list[float]:
    """respond latency to a live waiter, n answers in a row on one (warm) server."""
    server = Server(home, database_url)
    server.start()
    latencies: list[float] = []
    try:
        await server.wait_healthy()
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            for sid, creds in await _sessions(client, n + 1):
                agent = SimulatedAgent(sid, creds)
                call = asyncio.create_task(agent.ask())
                deadline = time.monotonic() + 60
                pending_id = None
                while pending_id is None:
                    found = (
                        await client.get(f"/api/v1/sessions/{sid}/messages", params={"limit": 50})
                    ).json()["messages"]
                    rows = [m for m in found if m["type"] == "clarification_request"]
                    pending_id = rows[0]["metadata"]["pending_id"] if rows else None
                    if pending_id is None:
                        assert time.monotonic() < deadline, "no question"
                        await asyncio.sleep(0.005)
                start = time.perf_counter()
                r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=ANSWER)
                latencies.append(time.perf_counter() - start)
                assert r.status_code == 200 and r.json()["claimed"], r.text
                await call
    finally:
        server.stop()
    return latencies[1:]  # the first one warms the server up


async def run_database(  # type: ignore[no-untyped-def]
    kind: str, trials: int, rng: random.Random, max_delay: float, pg, warm: int
) -> dict:
    results: list[tuple[str, float, TrialResult]] = []
    with tempfile.TemporaryDirectory(prefix=f"kandev-fault-{kind}-") as tmp:
        if kind == "postgres":
            bare = await bare_claim(
                (await _pg_database(pg, "kandev_fault_bare")).replace(
                    "postgresql://", "postgresql+asyncpg://", 1
                )
            )
        else:
            bare = await bare_claim(f"sqlite+aiosqlite:///{tmp}/bare.db")
        warm_url = await _pg_database(pg, "kandev_fault_warm") if kind == "postgres" else ""
        warm_latencies = await warm_respond(Path(tmp) / "warm", warm_url, warm) if warm else []
        for i in range(trials):
            mode = MODES[i % len(MODES)]
            delay = rng.uniform(0, max_delay)
            url = await _pg_database(pg, f"kandev_fault_{i}") if kind == "postgres" else ""
            result = await run_trial(
                Path(tmp) / f"trial-{i}",
                database_url=url,
                delay=delay,
                abandon=mode == "detached",
                reject=mode == "reject",
            )
            results.append((mode, delay, result))
            mark = (
                "ok" if result.deliveries == 1 else ("LOST" if not result.deliveries else "TWICE")
            )
            print(
                f"  {kind} trial {i + 1:2}/{trials} {mode:8} kill +{delay * 1000:5.1f} ms: "
                f"tool {result.via_tool_call} resume {result.via_resume} "
                f"claimed={result.claimed} {mark}",
                flush=True,
            )
    latencies = [r.respond_seconds for m, _, r in results if m == "live" and r.respond_seconds]
    figures = {
        "trials": len(results),
        "acknowledged": sum(1 for _, _, r in results if r.claimed),
        "tool_call": sum(1 for _, _, r in results if r.via_tool_call and r.deliveries == 1),
        "resumed": sum(1 for _, _, r in results if r.via_resume and r.deliveries == 1),
        "lost": sum(1 for _, _, r in results if r.deliveries == 0),
        "duplicated": sum(1 for _, _, r in results if r.deliveries >= 2),
        "respond_p50_ms": _pct(latencies, 50),
        "respond_p95_ms": _pct(latencies, 95),
        "bare_claim_p50_ms": percentile(bare, 50) * 1000,
        "bare_claim_p95_ms": percentile(bare, 95) * 1000,
        "warm_respond_p50_ms": _pct(warm_latencies, 50),
        "warm_respond_p95_ms": _pct(warm_latencies, 95),
        "warm_samples": len(warm_latencies),
        "by_mode": {
            mode: sum(1 for m, _, _ in results if m == mode) for mode in dict.fromkeys(MODES)
        },
    }
    return figures


def report(kind: str, f: dict) -> None:
    lost_before, trials_before = BEFORE_FIX[kind]
    n = max(1, f["trials"])
    before = lost_before / trials_before
    print(f"\n{kind}: {n} trials ({', '.join(f'{k} {v}' for k, v in f['by_mode'].items())})")
    print(f"  acknowledged (claimed: true)  : {f['acknowledged']}/{n}")
    print(f"  delivered in the tool call    : {f['tool_call']}/{n}")
    print(f"  delivered as a resumed turn   : {f['resumed']}/{n}")
    print(
        f"  lost                          : {f['lost']}/{n} ({f['lost'] / n:.0%})   "
        f"baseline before the fix: {lost_before}/{trials_before} "
        f"({before:.0%}) → ratio {f['lost'] / n / before:.2f}"
    )
    print(f"  delivered twice               : {f['duplicated']}/{n}   baseline: 0 (must stay 0)")
    p50, p95 = f["respond_p50_ms"], f["respond_p95_ms"]
    b50, b95 = f["bare_claim_p50_ms"], f["bare_claim_p95_ms"]
    w50, w95 = f["warm_respond_p50_ms"], f["warm_respond_p95_ms"]
    print(
        f"  respond, live waiter, cold    : p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  "
        f"(first respond of a fresh server, n={f['by_mode']['live']})\n"
        f"  respond, live waiter, warm    : p50 {w50:7.2f} ms  p95 {w95:7.2f} ms  "
        f"(n={f['warm_samples']})\n"
        f"  bare claim transaction        : p50 {b50:7.2f} ms  p95 {b95:7.2f} ms\n"
        f"  ratio cold respond / bare     : p50 {_ratio(p50, b50):5.1f}x  "
        f"p95 {_ratio(p95, b95):5.1f}x\n"
        f"  ratio warm respond / bare     : p50 {_ratio(w50, b50):5.1f}x  "
        f"p95 {_ratio(w95, b95):5.1f}x"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--max-delay-ms", type=float, default=200.0)
    parser.add_argument("--warm", type=int, default=30, help="warm respond samples (0: none)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}  (rerun with --seed {seed})  kill delay 0-{args.max_delay_ms:g} ms")
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    pg = None
    if "postgres" in kinds:
        from tests.pg_server import start_pg_server

        pg = start_pg_server()
        if pg is None:
            print("PostgreSQL is not installed: skipping it")
            kinds.remove("postgres")
    all_figures = {}
    try:
        for kind in kinds:
            rng = random.Random(f"{seed}-{kind}")
            all_figures[kind] = await run_database(
                kind, args.trials, rng, args.max_delay_ms / 1000, pg, args.warm
            )
    finally:
        if pg is not None:
            pg.stop()
    for kind, figures in all_figures.items():
        report(kind, figures)
    for kind, figures in all_figures.items():
        print_json_line(f"fault_answers_{kind}", seed=seed, **figures)


if __name__ == "__main__":
    asyncio.run(main())
