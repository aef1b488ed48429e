"""The durable record of agent processes and the killing of survivors at startup.

Real processes, real databases (both kinds): a "survivor" is a real process recorded with
its real start time, exactly as a dead server would have left it.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kandev.agents import process_repository
from kandev.agents.acp_runtime import AcpRuntime
from kandev.agents.processes import SESSION_ENV, AgentProcessLedger, read_stat, record_for
from kandev.clock import ManualClock
from kandev.db.engine import Database
from kandev.services import build_services
from tests.agents.conftest import Recorder
from tests.agents.procs import linux_only, marked, running, wait_until
from tests.agents.test_acp_runtime import launch_for
from tests.conftest import make_settings

pytestmark = linux_only

PAUSE = [sys.executable, "-c", "import signal; signal.pause()"]
WITH_CHILD = [
    sys.executable,
    "-c",
    "import subprocess, sys, signal\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
    "print(child.pid, flush=True)\n"
    "signal.pause()\n",
]


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def survivor(
    spawned: list[subprocess.Popen], session_id: str | None, argv: list[str] = PAUSE
) -> subprocess.Popen:
    """A process group like an agent's, marked with the session (if any), in its own session."""
    env = {k: v for k, v in os.environ.items() if k != SESSION_ENV}
    proc = subprocess.Popen(
        argv,
        env={**env, SESSION_ENV: session_id} if session_id else env,
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    spawned.append(proc)
    return proc


async def _records(db: Database) -> list[process_repository.ProcessRecord]:
    async with db.read() as conn:
        return await process_repository.list_records(conn)


async def _record(db: Database, record: process_repository.ProcessRecord) -> None:
    async with db.write() as conn:
        await process_repository.replace_record(conn, record, ManualClock().now())


async def _start_server(tmp_path: Path, database_url: str, clock: ManualClock):
    services = build_services(make_settings(tmp_path, database_url), clock=clock)
    await services.prepare()
    return services


async def test_startup_kills_a_recorded_survivor_and_its_group(
    db: Database, database_url: str, tmp_path: Path, clock: ManualClock, spawned
) -> None:
    leader = survivor(spawned, "sess-old", WITH_CHILD)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    record = record_for("sess-old", leader.pid)
    assert record is not None and record.pgid == leader.pid
    await _record(db, record)

    services = await _start_server(tmp_path, database_url, clock)
    try:
        assert leader.wait(5) == -signal.SIGKILL  # killed before prepare() returned
        wait_until(lambda: not running(child), 5, "the survivor's child is gone")
        assert await _records(db) == []
    finally:
        await services.close()


async def test_a_recycled_pid_is_never_killed(
    db: Database, database_url: str, tmp_path: Path, clock: ManualClock, spawned
) -> None:
    """The recorded pid now belongs to another process: its start time differs."""
    bystander = survivor(spawned, None)
    record = record_for("sess-old", bystander.pid)
    assert record is not None
    await _record(db, dataclasses.replace(record, start_ticks=record.start_ticks - 1))

    services = await _start_server(tmp_path, database_url, clock)
    try:
        assert bystander.poll() is None and running(bystander.pid)
        assert await _records(db) == []  # the stale record is gone all the same
    finally:
        await services.close()


async def test_records_of_another_boot_kill_nothing(
    db: Database, database_url: str, tmp_path: Path, clock: ManualClock, spawned
) -> None:
    bystander = survivor(spawned, "sess-old")
    record = record_for("sess-old", bystander.pid)
    assert record is not None
    await _record(db, dataclasses.replace(record, boot_id="another-boot"))
    services = await _start_server(tmp_path, database_url, clock)
    try:
        assert bystander.poll() is None
    finally:
        await services.close()


async def test_stragglers_whose_leader_is_gone_are_found_by_their_marker(
    db: Database, clock: ManualClock, spawned
) -> None:
    """The leader died (the guard was killed); its child lives on with the session marker."""
    leader = survivor(spawned, "sess-old", WITH_CHILD)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    record = record_for("sess-old", leader.pid)
    assert record is not None
    await _record(db, record)
    leader.kill()
    leader.wait(5)
    unrelated = survivor(spawned, "sess-other")  # marked for another session: left alone

    killed = await AgentProcessLedger(db, clock).reap()
    assert killed == [child]
    wait_until(lambda: not running(child), 5, "the straggler is gone")
    assert running(unrelated.pid)


async def test_a_running_agent_is_recorded_and_forgotten_when_it_stops(
    db: Database, tmp_path: Path, clock: ManualClock
) -> None:
    runtime = AcpRuntime(init_timeout=10.0, stop_grace=2.0, ledger=AgentProcessLedger(db, clock))
    handle = await runtime.start(launch_for(tmp_path, session_id="sess-live"), Recorder())
    try:
        (record,) = await _records(db)
        stat = read_stat(handle.pid)
        assert stat is not None
        assert (record.session_id, record.pid, record.pgid) == ("sess-live", handle.pid, handle.pid)
        assert record.start_ticks == stat.start_ticks
        # The guard and the agent both carry the session marker.
        assert handle.pid in marked("sess-live") and len(marked("sess-live")) == 2
    finally:
        await handle.stop()
    assert await _records(db) == []
    assert marked("sess-live") == []


async def test_a_launch_first_kills_a_survivor_of_the_same_session(
    db: Database, tmp_path: Path, clock: ManualClock, spawned
) -> None:
    """Never two agents for one session, even when the survivor appears after startup."""
    old = survivor(spawned, "sess-live")
    record = record_for("sess-live", old.pid)
    assert record is not None
    await _record(db, record)
    runtime = AcpRuntime(init_timeout=10.0, stop_grace=2.0, ledger=AgentProcessLedger(db, clock))
    handle = await runtime.start(launch_for(tmp_path, session_id="sess-live"), Recorder())
    try:
        assert old.wait(5) == -signal.SIGKILL
        (current,) = await _records(db)
        assert current.pid == handle.pid
    finally:
        await handle.stop()
