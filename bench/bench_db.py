"""One claim-like transaction through `Database.write()` against the same SQL on bare sqlite3.

The transaction is the shape of `clarification/claims.py`: a guarded UPDATE … RETURNING that
claims a pending row, then a guarded UPDATE that writes the answer, committed. It runs
(1) on stdlib `sqlite3` (the bare floor: same file settings, WAL, synchronous=NORMAL,
BEGIN IMMEDIATE), (2) through `Database.write()` with statements built once (SQLAlchemy Core,
compiled-cache hits), (3) a one-row read through `Database.read()` against the same SELECT on
sqlite3, and (4) the repository's own claim, `attempt_claim` (the bundle read under its
locks, then the one claim statement). Medians over `--runs` runs of `--n` transactions each.

Run:  .venv/bin/python -m bench.bench_db [--n 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Column, MetaData, String, Table, bindparam, select, update

from bench.common import bare_claim, print_json_line
from kandev.config import normalize_database_url
from kandev.db.engine import Database

_meta = MetaData()
items = Table(
    "bench_items",
    _meta,
    Column("id", String, primary_key=True),
    Column("status", String, nullable=False),
    Column("response", String),
)
CLAIM = (
    update(items)
    .where(items.c.id == bindparam("item_id"), items.c.status == "pending")
    .values(status="responding")
    .returning(items.c.id, items.c.status)
)
FINISH = (
    update(items)
    .where(items.c.id == bindparam("item_id"), items.c.status == "responding")
    .values(status="answered", response=bindparam("answer"))
)
READ = select(items.c.id, items.c.status, items.c.response).where(
    items.c.id == bindparam("item_id")
)
BARE_CLAIM = (
    "UPDATE bench_items SET status='responding' WHERE id=? AND status='pending' "
    "RETURNING id, status"
)
BARE_FINISH = (
    "UPDATE bench_items SET status='answered', response=? WHERE id=? AND status='responding'"
)
BARE_READ = "SELECT id, status, response FROM bench_items WHERE id=?"


def _seed(path: Path, n: int) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bench_items "
        "(id TEXT PRIMARY KEY, status TEXT NOT NULL, response TEXT)"
    )
    conn.execute("DELETE FROM bench_items")
    conn.executemany(
        "INSERT INTO bench_items VALUES (?, 'pending', NULL)", [(f"i{i}",) for i in range(n)]
    )
    conn.close()
    return path


class Timings:
    """Wall time and process CPU time (every thread's: aiosqlite's worker counts) per call.
    The CPU figure is the one that stays put on a loaded machine."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    @contextmanager
    def timed(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)


def bare_run(path: Path, n: int) -> tuple[Timings, Timings]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA synchronous=NORMAL")
    writes, reads = Timings(), Timings()
    for i in range(n):
        with writes.timed():
            conn.execute("BEGIN IMMEDIATE")
            claimed = conn.execute(BARE_CLAIM, (f"i{i}",)).fetchall()
            conn.execute(BARE_FINISH, ("yes", f"i{i}"))
            conn.execute("COMMIT")
        assert claimed, i
        with reads.timed():
            conn.execute("BEGIN")
            row = conn.execute(BARE_READ, (f"i{i}",)).fetchone()
            conn.execute("COMMIT")
        assert row[1] == "answered"
    conn.close()
    return writes, reads


async def kandev_run(path: Path, n: int) -> tuple[Timings, Timings, int]:
    db = Database(normalize_database_url(f"sqlite:///{path}", path.parent))
    writes, reads = Timings(), Timings()
    async with db.read() as conn:  # connect + warm the compiled cache outside the timing
        await conn.execute(READ, {"item_id": "none"})
    for i in range(n):
        with writes.timed():
            async with db.write() as conn:
                claimed = (await conn.execute(CLAIM, {"item_id": f"i{i}"})).all()
                await conn.execute(FINISH, {"item_id": f"i{i}", "answer": "yes"})
        assert claimed, i
        with reads.timed():
            async with db.read() as conn:
                row = (await conn.execute(READ, {"item_id": f"i{i}"})).one()
        assert row.status == "answered"
    cache = db.engine.sync_engine._compiled_cache
    entries = len(cache) if cache is not None else -1
    await db.dispose()
    return writes, reads, entries


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def mean_ms(values: list[float]) -> float:
    return statistics.fmean(values) * 1000


FIGURES = ("write", "read", "write_cpu", "read_cpu")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="transactions per run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--claims", type=int, default=200, help="repository claims per run")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {f"{who}_{f}": [] for who in ("bare", "db") for f in FIGURES}
    runs["repo_claim"] = []
    entries = 0
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            path = Path(tmp) / f"bench-{run}.db"
            bare_w, bare_r = bare_run(_seed(path, args.n), args.n)
            db_w, db_r, entries = await kandev_run(_seed(path, args.n), args.n)
            for who, w, r in (("bare", bare_w, bare_r), ("db", db_w, db_r)):
                runs[f"{who}_write"].append(median_ms(w.wall))
                runs[f"{who}_read"].append(median_ms(r.wall))
                runs[f"{who}_write_cpu"].append(mean_ms(w.cpu))
                runs[f"{who}_read_cpu"].append(mean_ms(r.cpu))
            claim_url = normalize_database_url("", Path(tmp) / f"claim-{run}")
            runs["repo_claim"].append(median_ms(await bare_claim(claim_url, args.claims)))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\nSQLite, median of {args.runs} runs (each over {args.n} transactions):")
    print(f"{'transaction':58} {'Kandev':>10} {'bare':>10} {'ratio':>7}")
    rows = [
        ("claim-like write: UPDATE…RETURNING + UPDATE (db.write)", "db_write", "bare_write"),
        ("  the same, process CPU per transaction (mean)", "db_write_cpu", "bare_write_cpu"),
        ("one-row read (db.read)", "db_read", "bare_read"),
        ("  the same, process CPU per transaction (mean)", "db_read_cpu", "bare_read_cpu"),
        ("attempt_claim (repository: the bundle read, the claim)", "repo_claim", "bare_write"),
    ]
    for label, ours, bare in rows:
        print(f"{label:58} {med[ours]:8.3f}ms {med[bare]:8.3f}ms {med[ours] / med[bare]:6.1f}x")
    print(f"compiled cache entries after a run: {entries} (3 statements, built once)")
    print_json_line(
        "db",
        runs=args.runs,
        n=args.n,
        **{f"{k}_ms": round(v, 4) for k, v in med.items()},
        write_ratio=round(med["db_write"] / med["bare_write"], 2),
        read_ratio=round(med["db_read"] / med["bare_read"], 2),
        write_cpu_ratio=round(med["db_write_cpu"] / med["bare_write_cpu"], 2),
        read_cpu_ratio=round(med["db_read_cpu"] / med["bare_read_cpu"], 2),
        repo_claim_ratio=round(med["repo_claim"] / med["bare_write"], 2),
    )


if __name__ == "__main__":
    asyncio.run(main())
