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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
def kandev_server(data_dir: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`kandev serve` on a free loopback port; yields (base URL, process)."""
    port = free_port()
    env = {**os.environ, "KANDEV_HOME": str(data_dir)}
    env.pop("KANDEV_DATABASE_URL", None)
    log_path = data_dir / "server.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kandev", "serve", "--port", str(port), *extra],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
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
            raise RuntimeError("kandev serve did not start")
        time.sleep(0.05)
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
            claimed = await claims.claim_active_bundle(
                conn, db, f"p{i}", kinds.ANSWERED, {"q": answer}, clock.now()
            )
        timings.append(time.perf_counter() - start)
        assert claimed
    await db.dispose()
    return timings
