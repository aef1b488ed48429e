"""A real `kandev serve` for CLI tests, with its output drained (a long-running server's
access log would otherwise fill the pipe and stall it), and a line reader for CLI processes
that keep running (`kandev session watch`)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import free_port
from tests.server_process import start_serve, wait_for_health


class LineReader:
    """Lines of a process's stdout as they come, waited for with a timeout (no sleeps)."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for raw in stream:
            self._queue.put(raw.decode(errors="replace"))
        self._queue.put(None)

    def until(self, predicate: Callable[[str], bool], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching line in time; got:\n{self.text}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the stream ended; got:\n{self.text}")
            self.lines.append(line)
            if predicate(line):
                return line

    def rest(self, timeout: float = 30.0) -> str:
        """Everything until the stream ends."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            if line is None:
                return self.text
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)


class ServeProcess:
    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = start_serve(home, self.port, *args, env=env)
        self.output = LineReader(self.proc.stdout)
        wait_for_health(self.url, self.proc)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def cli_env(url: str, token: str = "") -> dict[str, str]:
    env = {**os.environ, "KANDEV_URL": url, "KANDEV_TOKEN": token}
    env.pop("KANDEV_HOME", None)
    return env


def run_cli(*args: str, url: str, token: str = "", timeout: float = 60.0):
    """The real `kandev` in its own process; returns the CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "kandev", *args],
        env=cli_env(url, token),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_cli(*args: str, url: str, token: str = "") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kandev", *args],
        env=cli_env(url, token),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
