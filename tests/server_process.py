"""`kandev serve` as a real process, for tests that need a crash or the real CLI."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx


def start_serve(home: Path, port: int, *args: str, env: dict[str, str] | None = None):
    full_env = {**os.environ, "KANDEV_HOME": str(home), **(env or {})}
    full_env.pop("KANDEV_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "kandev", "serve", "--port", str(port), *args],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: a test can kill it with its agents
    )


def wait_for_health(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            return httpx.get(f"{url}/health", timeout=1.0)
        except httpx.TransportError:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)  # a bounded poll that wakes early if the process dies
    raise AssertionError("server did not answer /health in time")
