"""The process guard (kandev/agents/process_guard.py) run as Kandev runs it: real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kandev.agents.acp_runtime import guarded_argv
from tests.agents.procs import linux_only, running, wait_until

SLEEP_WITH_CHILD = [
    sys.executable,
    "-c",
    "import subprocess, sys, signal\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
    "print(child.pid, flush=True)\n"
    "signal.pause()\n",
]


@pytest.fixture
def leash() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def guard(argv: list[str], leash: tuple[int, int], **kwargs: object) -> subprocess.Popen:
    read_end, _ = leash
    return subprocess.Popen(
        guarded_argv(argv, read_end),
        pass_fds=(read_end,),
        start_new_session=True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_guard_exits_as_the_agent_did(leash) -> None:
    assert guard([sys.executable, "-c", "raise SystemExit(3)"], leash).wait(10) == 3
    assert guard([sys.executable, "-c", "pass"], leash).wait(10) == 0
    killed = guard([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], leash)
    assert killed.wait(10) == -signal.SIGKILL


def test_a_program_that_cannot_run_is_one_line_on_stderr_and_127(leash, tmp_path) -> None:
    proc = guard([str(tmp_path / "nope")], leash, stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 127
    assert (
        err.decode().strip() == f"kandev: cannot run {tmp_path / 'nope'}: No such file or directory"
    )


def test_the_agent_owns_stdio_the_guard_holds_none_of_it(leash) -> None:
    # The agent closes stdout and lives on: the reader sees EOF (the guard does not hold it).
    proc = guard(
        [sys.executable, "-c", "import os, signal; os.close(1); signal.pause()"],
        leash,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.read() == b""  # returns at EOF, while both processes still run
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_sigterm_to_the_group_ends_the_agent_and_the_guard_follows(leash) -> None:
    proc = guard([sys.executable, "-c", "import signal; signal.pause()"], leash)
    wait_until(lambda: len(_group(proc.pid)) == 2, 10, "guard and agent run")
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(10) == -signal.SIGTERM  # the agent's death, mirrored


@linux_only
def test_when_the_server_end_of_the_leash_closes_the_whole_group_dies(leash) -> None:
    """What happens when the server dies, even by SIGKILL: the kernel closes its end."""
    _, write_end = leash
    proc = guard(SLEEP_WITH_CHILD, leash, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    members = _group(proc.pid)
    assert len(members) == 3 and grandchild in members
    os.close(write_end)
    assert proc.wait(5) == -signal.SIGKILL
    wait_until(lambda: not any(running(pid) for pid in members), 5, "the group is gone")


@linux_only
def test_the_agent_dies_with_its_guard(leash) -> None:
    """PR_SET_PDEATHSIG on the agent: killing only the guard still ends the agent."""
    proc = guard([sys.executable, "-c", "import signal; signal.pause()"], leash)
    wait_until(lambda: len(_group(proc.pid)) == 2, 10, "guard and agent run")
    (agent,) = [pid for pid in _group(proc.pid) if pid != proc.pid]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(5)
    wait_until(lambda: not running(agent), 5, "the agent is gone")


def _group(pgid: int) -> list[int]:
    from kandev.agents.processes import read_stat

    members = []
    for name in os.listdir("/proc"):
        stat = read_stat(int(name)) if name.isdigit() else None
        if stat is not None and stat.running and stat.pgid == pgid:
            members.append(int(name))
    return members
