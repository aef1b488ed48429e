"""Agent processes outlive nothing: the durable record of them, and the killing of survivors.

While the server runs, `process_guard.py` ties every agent's process group to the server's
life (see its docstring). This module is the second line: each agent's group leader is
recorded in `agent_processes` when it starts (pid, process-group id, its start time from
`/proc/<pid>/stat` field 22 and the boot id) and forgotten when it has exited. A server
starting on the same database first kills whatever recorded agent survived (the guard
itself killed, say) — before any session is relaunched — so one session never runs two
agents. Before each launch the same check runs for that one session.

A process is only killed when it is provably the recorded one:

- the leader: same boot, same pid, same start time, same process group → the whole group;
- stragglers (a group whose leader is gone, or children that left it): processes started
  no earlier than the leader whose environment carries `KANDEV_SESSION_ID=<session>`.

A recycled pid has another start time (or environment) and is left alone. Only Linux has
`/proc`; elsewhere records are dropped without killing (the leash of the guard still ends
agents with their server).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kandev.agents import process_repository
from kandev.agents.process_repository import ProcessRecord
from kandev.clock import Clock
from kandev.db.engine import Database

log = logging.getLogger(__name__)

SESSION_ENV = "KANDEV_SESSION_ID"  # set in every agent's environment: marks its processes
PROC = Path("/proc")
REAP_WAIT_SECONDS = 5.0  # how long startup waits for killed survivors to be gone


@dataclass(frozen=True)
class ProcStat:
    state: str
    pgid: int
    start_ticks: int

    @property
    def running(self) -> bool:
        return self.state not in ("Z", "X", "x")  # a zombie has already exited


def proc_supported() -> bool:
    return sys.platform.startswith("linux") and PROC.is_dir()


def current_boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def read_stat(pid: int) -> ProcStat | None:
    """State, process group and start time (field 22) of a process; None when it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    # Field 2 (comm) is parenthesised and may contain anything: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(state=fields[0], pgid=int(fields[2]), start_ticks=int(fields[19]))
    except (IndexError, ValueError):
        return None


def record_for(session_id: str, pid: int) -> ProcessRecord | None:
    """The record of a just-started group leader, or None (no /proc, or already gone)."""
    if not proc_supported():
        return None
    stat = read_stat(pid)
    if stat is None:
        return None
    return ProcessRecord(session_id, pid, stat.pgid, stat.start_ticks, current_boot_id())


def _carries_marker(pid: int, marker: bytes) -> bool:
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:  # gone, or another user's process
        return False
    return marker in environ.split(b"\0")


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def survivors(records: list[ProcessRecord]) -> tuple[list[int], list[int]]:
    """(process groups, single pids) that provably belong to the recorded agents."""
    boot = current_boot_id()
    mine = [r for r in records if r.boot_id and r.boot_id == boot]
    groups: list[int] = []
    for record in mine:
        leader = read_stat(record.pid)
        if (
            leader is not None
            and leader.running
            and leader.start_ticks == record.start_ticks
            and leader.pgid == record.pgid
        ):
            groups.append(record.pgid)
    singles: list[int] = []
    if mine:
        own = os.getpid()
        markers = {r.session_id: (f"{SESSION_ENV}={r.session_id}".encode(), r) for r in mine}
        for pid in _all_pids():
            if pid == own:
                continue
            stat = read_stat(pid)
            if stat is None or not stat.running or stat.pgid in groups:
                continue
            for marker, record in markers.values():
                if stat.start_ticks >= record.start_ticks and _carries_marker(pid, marker):
                    singles.append(pid)
                    break
    return groups, singles


def _still_running(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.running


def kill_survivors(records: list[ProcessRecord]) -> list[int]:
    """SIGKILL what survived of the recorded agents; returns the pids that were killed."""
    if not records or not proc_supported():
        return []
    groups, singles = survivors(records)
    killed: list[int] = []
    for pgid in groups:
        members = [pid for pid in _all_pids() if (s := read_stat(pid)) and s.pgid == pgid]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
            killed.extend(members)
    for pid in singles:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


async def wait_gone(pids: list[int], timeout: float = REAP_WAIT_SECONDS) -> list[int]:
    """Wait (bounded) until none of `pids` runs; returns those still running at the end."""
    deadline = time.monotonic() + timeout
    left = [pid for pid in pids if _still_running(pid)]
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.02)  # SIGKILL is asynchronous; nothing to wait on but /proc
        left = [pid for pid in left if _still_running(pid)]
    return left


class AgentProcessLedger:
    """The durable record of this server's agent processes, and the reaping of survivors."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    async def record(self, session_id: str, pid: int) -> ProcessRecord | None:
        record = record_for(session_id, pid)
        if record is None:
            return None
        async with self.db.write() as conn:
            await process_repository.replace_record(conn, record, self.clock.now())
        return record

    async def forget(self, record: ProcessRecord) -> None:
        async with self.db.write() as conn:
            await process_repository.delete_record(conn, record)

    async def reap(self, session_id: str | None = None) -> list[int]:
        """Kill recorded survivors (all, or one session's) and forget their records."""
        async with self.db.read() as conn:
            records = await process_repository.list_records(conn, session_id)
        if not records:
            return []
        killed = await asyncio.to_thread(kill_survivors, records)
        if killed:
            log.warning(
                "killed %d agent process(es) left by an earlier server: pids %s",
                len(killed),
                ", ".join(map(str, killed)),
            )
            left = await wait_gone(killed)
            if left:
                log.error("agent processes still running after SIGKILL: %s", left)
        async with self.db.write() as conn:
            await process_repository.delete_records(conn, records)
        return killed
