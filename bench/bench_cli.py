"""Wall time of whole `kandev` terminal processes (issue 13).

`kandev questions list` against a running `kandev serve` on 127.0.0.1 with a few agents
waiting on a question (simulated agents: MCP clients blocked in `ask_user_question_kandev`),
and `kandev --help`; each the wall time of the whole process (start, imports, work, exit),
median over --runs, beside the bare baselines measured in the same run, interleaved:

- `python -c 'import httpx'` of the same interpreter: the floor of any Python HTTP script;
- a bare MCP client script: the official MCP SDK client making the same one
  `list_pending_questions_kandev` call (the floor of a Python MCP client process).

Run:  .venv/bin/python -m bench.bench_cli [--runs 15] [--pending 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import ONE_QUESTION, bench_task, kandev_server, percentile, print_json_line

BARE_IMPORT = [sys.executable, "-c", "import httpx"]
BARE_MCP_CLIENT = """
import asyncio, sys
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def main():
    async with httpx2.AsyncClient() as http, Client(
        streamable_http_client(sys.argv[1] + "/mcp", http_client=http)
    ) as client:
        result = await client.call_tool("list_pending_questions_kandev", {"limit": 200})
        print(result.content[0].text)

asyncio.run(main())
"""
# What `questions list` has no use for: importing it would be waste (the MCP SDK brings
# its own pydantic, anyio and, through `mcp/__init__`, starlette and uvicorn).
KANDEV_SERVER_MODULES = ("fastapi", "sqlalchemy", "aiosqlite", "asyncpg", "alembic", "jinja2")
IMPORTS_PROBE = """
import sys
from kandev.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
roots = sorted({m.split(".")[0] for m in sys.modules})
print(" ".join(roots), file=sys.stderr)
"""


async def run_process(argv: list[str]) -> tuple[float, bytes]:
    """Wall time of one whole process, and its stdout (it must succeed)."""
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {err.decode()[-500:]}")
    return elapsed, out


async def ask_and_wait(creds: dict[str, str]) -> None:
    """A simulated agent: asks one question and waits (until the bench ends)."""
    headers = {"Authorization": f"Bearer {creds['token']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None)) as http,
        Client(streamable_http_client(creds["mcp_url"], http_client=http)) as client,
    ):
        await client.call_tool(
            "ask_user_question_kandev", {"questions": ONE_QUESTION}, read_timeout_seconds=3600
        )


async def waiting_agents(url: str, count: int) -> list[asyncio.Task[None]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        task = await bench_task(client)
        agents = []
        for _ in range(count):
            r = await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})
            session_id = r.json()["id"]
            creds = (await client.post(f"/api/v1/sessions/{session_id}/agent-token")).json()
            agents.append(asyncio.create_task(ask_and_wait(creds)))
    return agents


async def listed(url: str) -> int:
    argv = [sys.executable, "-m", "kandev", "questions", "list", "--url", url, "--json"]
    _, out = await run_process(argv)
    return len(json.loads(out))


async def measure(url: str, runs: int) -> dict[str, list[float]]:
    commands = {
        "baseline_import_httpx": BARE_IMPORT,
        "baseline_bare_mcp_client": [sys.executable, "-c", BARE_MCP_CLIENT, url],
        "questions_list": [sys.executable, "-m", "kandev", "questions", "list", "--url", url],
        "help": [sys.executable, "-m", "kandev", "--help"],
    }
    for argv in commands.values():  # warm the page cache and bytecode once
        await run_process(argv)
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved, so load on the machine hits all alike
        for name, argv in commands.items():
            timings[name].append((await run_process(argv))[0])
    return timings


async def imported_roots(url: str) -> list[str]:
    argv = [sys.executable, "-c", IMPORTS_PROBE, "questions", "list", "--url", url]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    return err.decode().strip().splitlines()[-1].split()


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def main(runs: int, pending: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, kandev_server(Path(tmp) / "home") as (url, _):
        agents = await waiting_agents(url, pending)
        deadline = time.monotonic() + 60
        while await listed(url) < pending:  # the agents' questions are in
            if time.monotonic() > deadline:
                raise RuntimeError("the simulated agents' questions did not appear")
            await asyncio.sleep(0.1)  # noqa: sleep-ok (a bounded poll)
        timings = await measure(url, runs)
        roots = await imported_roots(url)
        for agent in agents:
            agent.cancel()
        await asyncio.gather(*agents, return_exceptions=True)

    bare = ms(timings["baseline_import_httpx"])
    bare_mcp = ms(timings["baseline_bare_mcp_client"])
    rows: list[tuple[str, str, float, float]] = [
        ("kandev questions list", "python -c 'import httpx'", ms(timings["questions_list"]), bare),
        (
            "kandev questions list",
            "bare MCP SDK client script",
            ms(timings["questions_list"]),
            bare_mcp,
        ),
        ("kandev --help", "python -c 'import httpx'", ms(timings["help"]), bare),
    ]
    print(f"whole-process wall time, median of {runs} runs ({pending} questions pending)")
    print(f"{'command':24} {'median':>9}  {'baseline':30} {'median':>9}  ratio")
    for label, baseline, ours, floor in rows:
        print(f"{label:24} {ours:7.1f}ms  {baseline:30} {floor:7.1f}ms  {ours / floor:5.2f}x")
    p95 = {name: percentile(values, 95) * 1000 for name, values in timings.items()}
    print("p95: " + ", ".join(f"{name} {value:.1f}ms" for name, value in p95.items()))
    unneeded = [m for m in KANDEV_SERVER_MODULES if m in roots]
    print(f"server-side modules imported by `questions list`: {unneeded or 'none'}")
    print_json_line(
        "bench_cli",
        runs=runs,
        pending=pending,
        questions_list_ms=round(ms(timings["questions_list"]), 1),
        help_ms=round(ms(timings["help"]), 1),
        baseline_import_httpx_ms=round(bare, 1),
        baseline_bare_mcp_client_ms=round(bare_mcp, 1),
        questions_list_ratio=round(ms(timings["questions_list"]) / bare, 2),
        questions_list_vs_bare_mcp_ratio=round(ms(timings["questions_list"]) / bare_mcp, 2),
        help_ratio=round(ms(timings["help"]) / bare, 2),
        unneeded_modules=unneeded,
    )


def _args(argv: Any = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--pending", type=int, default=5)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _args()
    asyncio.run(main(max(10, args.runs), args.pending))
