"""1,000 prompts at once over REST against `kandev serve` on PostgreSQL, against a bare app.

Kandev: N bring-your-own-agent sessions (no agent process: a prompt is database work only,
recorded as a new turn), then one `POST /api/v1/sessions/{id}/prompt` per session, all sent
at once (`--sessions K`: the prompts spread over K sessions, several per session).
Bare: the same N POSTs, at once, to a FastAPI endpoint on the same uvicorn that runs
one PostgreSQL transaction each (INSERT a turn row) through an asyncpg pool of the same size
as Kandev's bound. Both talk to the same throwaway PostgreSQL server (tests/pg_server.py), or
to `--postgres URL`. Reports responses by status (target: every one 202, no 500 and no 503),
transport errors, p50/p95 latency, the burst's wall time, and the ratios; medians over runs.

`--kandev-src DIR` runs `kandev serve` from another source tree (e.g. an export of an older
commit: `git archive <rev> src | tar -x -C DIR`), for before/after figures.

Run:  .venv/bin/python -m bench.bench_burst [--prompts 1000] [--runs 3] [--postgres URL|auto]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench import common
from bench.common import free_port, percentile, print_json_line

ROOT = Path(__file__).resolve().parents[1]
BARE_POOL_SIZE = 30  # Kandev's bound (kandev.db.engine.POSTGRES_MAX_TRANSACTIONS)


# --- the bare app ----------------------------------------------------------------------------


def bare_app(dsn: str) -> Any:
    """FastAPI: POST /api/v1/sessions/{id}/prompt = one PostgreSQL transaction."""
    from contextlib import asynccontextmanager

    import asyncpg
    from fastapi import FastAPI

    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        state["pool"] = await asyncpg.create_pool(
            dsn, min_size=BARE_POOL_SIZE, max_size=BARE_POOL_SIZE
        )
        async with state["pool"].acquire() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS bare_turns (id TEXT PRIMARY KEY, session_id TEXT "
                "NOT NULL, prompt TEXT NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        yield
        await state["pool"].close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/v1/sessions/{session_id}/prompt", status_code=202)
    async def prompt(session_id: str, body: dict[str, Any]) -> dict[str, Any]:
        turn_id = uuid.uuid4().hex
        async with state["pool"].acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO bare_turns (id, session_id, prompt) VALUES ($1, $2, $3)",
                turn_id,
                session_id,
                str(body.get("text", "")),
            )
        return {"session_id": session_id, "turn_id": turn_id, "queued": False}

    return app


def serve_bare(port: int, dsn: str) -> None:
    import uvicorn

    from kandev.perimeter import uvicorn_options

    uvicorn.run(
        bare_app(dsn),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        backlog=2048,
        **uvicorn_options(),
    )


# --- servers -----------------------------------------------------------------------------------


@contextmanager
def kandev(home: Path, database_url: str, kandev_src: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "KANDEV_HOME": str(home), "KANDEV_DATABASE_URL": database_url}
    if kandev_src:
        env["PYTHONPATH"] = kandev_src
    argv = [sys.executable, "-m", "kandev", "serve", "--port", str(port)]
    with common.served(argv, env, home / "server.log", port, "kandev serve") as (url, _):
        yield url


@contextmanager
def bare(home: Path, dsn: str) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "bench.bench_burst", "--serve-bare", str(port), "--dsn", dsn]
    with common.served(argv, {**os.environ}, home / "bare.log", port, "the bare app") as (url, _):
        yield url


async def postgres(arg: str) -> tuple[str, Callable[[], Awaitable[None]]]:
    """The admin URL of a PostgreSQL server (a throwaway one for `auto`) and its cleanup."""
    if arg != "auto":
        return arg.replace("postgresql+asyncpg://", "postgresql://"), _noop
    sys.path.insert(0, str(ROOT))
    from tests.pg_server import start_pg_server

    server = start_pg_server()
    if server is None:
        raise SystemExit("no PostgreSQL installed (give --postgres URL)")

    async def stop() -> None:
        server.stop()

    return server.admin_url, stop


async def _noop() -> None:
    return None


async def fresh_database(admin: str, name: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return admin.rpartition("/")[0] + "/" + name


# --- the burst ---------------------------------------------------------------------------------


async def kandev_sessions(client: httpx.AsyncClient, n: int) -> list[str]:
    ws = (await client.post("/api/v1/workspaces", json={"name": "burst"})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "burst"})
    ).json()
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> str:
        async with gate:
            task = await client.post(
                "/api/v1/tasks",
                json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": f"t{i}"},
            )
            task.raise_for_status()
            r = await client.post(f"/api/v1/tasks/{task.json()['id']}/sessions", json={})
            r.raise_for_status()
            return str(r.json()["id"])

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def burst(url: str, session_ids: list[str]) -> dict[str, Any]:
    """One POST per session, all at once: statuses, latencies, wall time."""
    limits = httpx.Limits(max_connections=len(session_ids), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        latencies: list[float] = []
        statuses: Counter[str] = Counter()

        async def one(sid: str) -> None:
            start = time.perf_counter()
            try:
                r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
                statuses[str(r.status_code)] += 1
            except httpx.TransportError as exc:
                statuses[type(exc).__name__] += 1
            latencies.append(time.perf_counter() - start)

        started = time.perf_counter()
        await asyncio.gather(*(one(s) for s in session_ids))
        wall = time.perf_counter() - started
    return {
        "statuses": dict(statuses),
        "errors": sum(v for k, v in statuses.items() if k != "202"),
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "wall": wall,
    }


def show(name: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    med = {k: statistics.median(r[k] for r in runs) for k in ("p50", "p95", "wall")}
    med["errors"] = sum(r["errors"] for r in runs)
    statuses: Counter[str] = Counter()
    for r in runs:
        statuses.update(r["statuses"])
    print(
        f"{name:8} errors (all runs) {med['errors']:5.0f}   p50 {med['p50'] * 1000:8.1f} ms   "
        f"p95 {med['p95'] * 1000:8.1f} ms   burst {med['wall']:6.2f} s   "
        f"statuses over all runs: {dict(sorted(statuses.items()))}"
    )
    return med


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument(
        "--sessions", type=int, default=0, help="prompt this many sessions (default: one each)"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default="auto", help="an admin URL, or auto")
    parser.add_argument("--kandev-src", default="", help="run kandev serve from this src dir")
    args = parser.parse_args()
    admin, stop_pg = await postgres(args.postgres)
    try:
        kandev_url_db = await fresh_database(admin, f"kandev_burst_{os.getpid()}")
        bare_dsn = await fresh_database(admin, f"bare_burst_{os.getpid()}")
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            kandev_runs, bare_runs = [], []
            with kandev(home, kandev_url_db, args.kandev_src) as url:
                async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                    sessions = await kandev_sessions(client, args.sessions or args.prompts)
                sids = [sessions[i % len(sessions)] for i in range(args.prompts)]
                for _ in range(args.runs):
                    kandev_runs.append(await burst(url, sids))
            bare_ids = [f"s{i % len(sessions)}" for i in range(args.prompts)]
            with bare(home, bare_dsn) as url:
                for _ in range(args.runs):
                    bare_runs.append(await burst(url, bare_ids))
    finally:
        await stop_pg()

    print(
        f"\n{args.prompts} prompts at once over REST to {len(sessions)} sessions, PostgreSQL, "
        f"median of {args.runs} runs:"
    )
    k = show("Kandev", kandev_runs)
    b = show("bare", bare_runs)
    print(
        f"ratio    p50 {k['p50'] / b['p50']:.1f}x   p95 {k['p95'] / b['p95']:.1f}x   "
        f"burst {k['wall'] / b['wall']:.1f}x"
    )
    print_json_line(
        "burst",
        prompts=args.prompts,
        sessions=len(sessions),
        runs=args.runs,
        kandev_errors=k["errors"],
        kandev_statuses=[r["statuses"] for r in kandev_runs],
        kandev_p50_ms=round(k["p50"] * 1000, 2),
        kandev_p95_ms=round(k["p95"] * 1000, 2),
        kandev_burst_s=round(k["wall"], 3),
        bare_errors=b["errors"],
        bare_p50_ms=round(b["p50"] * 1000, 2),
        bare_p95_ms=round(b["p95"] * 1000, 2),
        bare_burst_s=round(b["wall"], 3),
        p50_ratio=round(k["p50"] / b["p50"], 2),
        p95_ratio=round(k["p95"] / b["p95"], 2),
        burst_ratio=round(k["wall"] / b["wall"], 2),
    )
    if k["errors"]:
        raise SystemExit(f"{k['errors']:.0f} prompts did not get a 202")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-bare"]:  # the bare app's own process (see `bare`)
        serve_bare(int(sys.argv[2]), sys.argv[4])
    else:
        asyncio.run(main())
