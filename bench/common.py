"""Shared pieces for benchmarks: a Kandev server subprocess, RSS readings, percentiles."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from kandev.catalog import messages as kinds

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    """Resident set size of one process, in KiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def child_pids(parent: int) -> list[int]:
    """Direct children of `parent` (agents run in their own process group, same parent)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent:
            found.append(int(entry.name))
    return found


def tree_rss_kib(pid: int) -> int:
    """RSS of a process and all its descendants (an agent under Kandev's guard process)."""
    return rss_kib(pid) + sum(tree_rss_kib(child) for child in child_pids(pid))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary_ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"p50 {percentile(ms, 50):7.2f} ms  p95 {percentile(ms, 95):7.2f} ms  "
        f"mean {statistics.fmean(ms):7.2f} ms  (n={len(ms)})"
    )


@contextmanager
def kandev_server(
    data_dir: Path, *extra: str, database_url: str = ""
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`kandev serve` on a free loopback port (SQLite in `data_dir`, or `database_url`);
    yields (base URL, process)."""
    port = free_port()
    env = {**os.environ, "KANDEV_HOME": str(data_dir)}
    env.pop("KANDEV_DATABASE_URL", None)
    if database_url:
        env["KANDEV_DATABASE_URL"] = database_url
    with served(
        [sys.executable, "-m", "kandev", "serve", "--port", str(port), *extra],
        env,
        data_dir / "server.log",
        port,
        "kandev serve",
    ) as (url, proc):
        yield url, proc


@contextmanager
def bare_server(
    log_dir: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """The bare same-stack app (bench/bare_apps.py) on a free loopback port (`env`: more
    of its environment, e.g. the list benchmark's BARE_LIST_*)."""
    port = free_port()
    with served(
        [sys.executable, "-m", "bench.bare_apps", "--port", str(port)],
        {**os.environ, **(env or {})},
        log_dir / "bare.log",
        port,
        "the bare app",
    ) as (url, proc):
        yield url, proc


@contextmanager
def served(
    argv: list[str], env: dict[str, str], log_path: Path, port: int, what: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = log_path.open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            tail = log_path.read_text(errors="replace").splitlines()[-30:]
            raise RuntimeError(f"{what} did not start:\n  " + "\n  ".join(tail))
        time.sleep(0.05)  # noqa: sleep-ok (bounded start-up poll)
    try:
        yield url, proc
    except BaseException:
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        print("server log (last lines):", *tail, sep="\n  ", file=sys.stderr)
        raise
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log_file.close()


def print_json_line(name: str, **figures: object) -> None:
    """A machine-readable line after the human table (for collecting results)."""
    print(f"RESULT {name} {json.dumps(figures, sort_keys=True)}")


ONE_QUESTION = [
    {
        "id": "q",
        "prompt": "Proceed?",
        "options": [
            {"option_id": "yes", "label": "Yes", "description": "go on"},
            {"option_id": "no", "label": "No", "description": "stop"},
        ],
    }
]


async def bench_task(client: httpx.AsyncClient, name: str = "bench") -> dict:
    """A workspace, a default workflow and one task on it; returns the task."""
    ws = (await client.post("/api/v1/workspaces", json={"name": name})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": name})
    ).json()
    r = await client.post(
        "/api/v1/tasks",
        json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": name},
    )
    return r.json()


async def bare_claim(url: str, n: int = 200) -> list[float]:
    """The floor: one claim transaction through the same repository, on that database."""
    from kandev.clarification import bundles, claims
    from kandev.clock import SystemClock
    from kandev.db.engine import Database
    from kandev.db.migrate import upgrade_to_head
    from kandev.db.tables import task_session_turns, task_sessions, tasks
    from kandev.ids import new_id

    clock = SystemClock()
    db = Database(url)
    await upgrade_to_head(db)
    now = clock.now()
    async with db.write() as conn:
        await conn.execute(tasks.insert().values(id="t", title="t", created_at=now, updated_at=now))
    answer = {"question_id": "q", "selected_options": ["yes"], "custom_text": ""}
    timings = []
    for i in range(n):
        now = clock.now()
        async with db.write() as conn:
            await conn.execute(
                task_sessions.insert().values(
                    id=f"s{i}", task_id="t", state="RUNNING", started_at=now, updated_at=now
                )
            )
            await conn.execute(
                task_session_turns.insert().values(
                    id=f"turn{i}",
                    session_id=f"s{i}",
                    task_id="t",
                    started_at=now,
                    created_at=now,
                    updated_at=now,
                )
            )
            await bundles.insert_bundle(
                conn,
                pending_id=f"p{i}",
                session_id=f"s{i}",
                task_id="t",
                turn_id=f"turn{i}",
                questions=ONE_QUESTION,
                context="",
                now=now,
                new_id=new_id,
            )
        start = time.perf_counter()
        async with db.write() as conn:
            claimed = (
                await claims.attempt_claim(
                    conn, db, f"p{i}", kinds.ANSWERED, {"q": answer}, clock.now()
                )
            ).claimed
        timings.append(time.perf_counter() - start)
        assert claimed
    await db.dispose()
    return timings


# --- side-by-side reporting: Kandev | bare | ratio, medians over repeated runs ---------------

DATABASES = ("sqlite", "postgres")


def add_database_args(parser: Any, repeat: int = 3) -> None:
    """The flags every side-by-side benchmark takes: --database, --repeat."""
    parser.add_argument(
        "--database",
        default="sqlite,postgres",
        help="sqlite, postgres or both (comma-separated); PostgreSQL is a throwaway server "
        "from /usr/lib/postgresql/*/bin unless KANDEV_TEST_POSTGRES_URL names one",
    )
    parser.add_argument(
        "--repeat", type=int, default=repeat, help="runs; figures are medians of run medians"
    )


def databases(arg: str) -> list[str]:
    kinds = [k.strip() for k in arg.split(",") if k.strip()]
    for kind in kinds:
        if kind not in DATABASES:
            raise SystemExit(f"--database: unknown {kind!r} (sqlite, postgres)")
    return kinds


class Postgres:
    """A throwaway PostgreSQL server (tests/pg_server.py) handing out fresh databases."""

    def __init__(self) -> None:
        from tests.pg_server import start_pg_server

        server = start_pg_server()
        if server is None:
            raise SystemExit("PostgreSQL is not installed (no initdb): use --database sqlite")
        self.server = server
        self.count = 0

    async def new_database(self, label: str = "bench") -> str:
        """A new empty database; returns its postgresql:// URL."""
        import asyncpg

        self.count += 1
        name = f"kandev_{label}_{os.getpid()}_{self.count}"
        conn = await asyncpg.connect(self.server.admin_url)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.server.url_for(name)

    def stop(self) -> None:
        self.server.stop()


@contextmanager
def postgres_if(kinds: list[str]) -> Iterator[Postgres | None]:
    pg = Postgres() if "postgres" in kinds else None
    try:
        yield pg
    finally:
        if pg is not None:
            pg.stop()


async def elapsed(call: Awaitable[Any]) -> float:
    """Seconds `call` takes to complete."""
    start = time.perf_counter()
    await call
    return time.perf_counter() - start


async def in_turns(
    measures: Sequence[Callable[[int], Awaitable[float]]], rounds: int, warmup: int = 0
) -> list[list[float]]:
    """Paired measurement: every measure once a round, in an order that rotates each round
    (each in turn first), so a machine whose load drifts during the run slows them alike.
    Each measure gets the round's index; returns each measure's figures, the first
    `warmup` rounds left out."""
    out: list[list[float]] = [[] for _ in measures]
    for i in range(warmup + rounds):
        shift = i % len(measures)
        for k in [*range(shift, len(measures)), *range(shift)]:
            value = await measures[k](i)
            if i >= warmup:
                out[k].append(value)
    return out


def median_ms(runs: list[list[float]], p: float) -> float:
    """The median over runs of each run's p-th percentile, in ms (0 with no samples)."""
    per_run = [percentile(r, p) * 1000 for r in runs if r]
    return statistics.median(per_run) if per_run else 0.0


def per_run_ms(runs: list[list[float]], p: float) -> list[float]:
    """Each run's p-th percentile, in ms (runs with no samples left out)."""
    return [percentile(r, p) * 1000 for r in runs if r]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def ratio(kandev: float, bare: float) -> float:
    return kandev / bare if bare else 0.0


class Table:
    """Rows of `figure | Kandev | bare | ratio [target]`, printed together after all runs;
    `rows` is the same as JSON for the RESULT line (bench.summary collects them)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []

    def add(
        self,
        figure: str,
        kandev: float | list[float],
        bare: float | list[float],
        unit: str = "ms",
        target: tuple[str, float] | None = None,
    ) -> float:
        """One row; `target` is ("<=", 2.0) or (">=", 0.6) on the ratio Kandev / bare.

        With per-run lists (run i of both measured back to back), the figures are their
        medians and the ratio is the median of the per-run ratios (robust to the load of a
        shared machine drifting between runs)."""
        if isinstance(kandev, list) and isinstance(bare, list) and len(kandev) == len(bare):
            r = median([ratio(k, b) for k, b in zip(kandev, bare, strict=True)])
        else:
            r = 0.0
        if isinstance(kandev, list):
            kandev = median(kandev)
        if isinstance(bare, list):
            bare = median(bare)
        if not r:
            r = ratio(kandev, bare)
        row: dict[str, Any] = {
            "figure": figure,
            "kandev": round(kandev, 3),
            "bare": round(bare, 3),
            "unit": unit,
            "ratio": round(r, 3),
        }
        if target is not None:
            op, limit = target
            row["target"] = f"{op} {limit:g}"
            row["met"] = r <= limit if op == "<=" else r >= limit
        self.rows.append(row)
        return r

    def check(self, figure: str, value: float, unit: str, op: str, limit: float) -> bool:
        """A Kandev-only figure against an absolute target (no bare column)."""
        met = value <= limit if op == "<=" else value >= limit
        self.checks.append(
            {
                "figure": figure,
                "value": round(value, 3),
                "unit": unit,
                "target": f"{op} {limit:g}",
                "met": met,
            }
        )
        return met

    def print(self) -> None:
        print(f"\n{self.title}")
        print_rows(self.rows)
        for c in self.checks:
            print(f"  {format_check(c)}")


def format_check(c: dict[str, Any]) -> str:
    verdict = "met" if c["met"] else "MISSED"
    return (
        f"{c['figure']}: {c['value']:.2f} {c['unit']} (target {c['target']} {c['unit']}, {verdict})"
    )


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    head = ("figure", "Kandev", "bare", "ratio", "target")
    cells = [head]
    for row in rows:
        target = ""
        if "target" in row:
            target = f"{row['target']}x {'met' if row['met'] else 'MISSED'}"
        cells.append(
            (
                row["figure"],
                f"{row['kandev']:.2f} {row['unit']}",
                f"{row['bare']:.2f} {row['unit']}",
                f"{row['ratio']:.2f}x",
                target,
            )
        )
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return [
        " | ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells
    ]


def print_rows(rows: list[dict[str, Any]]) -> None:
    for line in format_rows(rows):
        print("  " + line)
