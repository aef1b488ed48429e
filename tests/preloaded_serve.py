"""`kandev serve` processes forked from one interpreter that has already imported the server.

Starting `python -m kandev serve` costs seconds of CPU before the server touches its data:
importing the app, most of it the pydantic models of the ACP and MCP SDKs being built
(`python -X importtime -m kandev serve`). The crash tests start two servers per trial, so
that import was most of their time. Here it is paid once: `PreloadedServe` runs this module
as a child process (the "zygote"), which imports everything `kandev serve` imports and then
forks one child per start. Each child is set up as a fresh `python -m kandev serve` would be
— its own session (process group), the requested environment, cwd, stdin on /dev/null,
stdout and stderr appended to the log — reloads `kandev.faults` (the one module that reads
the environment at import: KANDEV_FAULT_INJECT), and runs `python -m kandev` with the given
arguments (`runpy`), exiting through the interpreter as usual. The server code, its data,
its SIGKILL and its restart are the real ones; only the import is shared.

Each start is one connection to the zygote's Unix socket: a JSON line (argv, env, cwd, log)
in, `{"pid": N}` back once forked, then `{"returncode": R}` when the child has exited (the
zygote reaps it; R as `subprocess.Popen.returncode`: -signal for a signal). `ForkedProcess`
gives the test the `Popen` methods it uses, waiting on that socket (bounded, no polling).
The zygote ends when its stdin (a pipe from the test process) closes.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SPAWN_TIMEOUT = 120.0  # the first spawn waits for the zygote's imports


class ForkedProcess:
    """A server child of the zygote, with the `subprocess.Popen` API the tests use."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self._conn = conn
        self._buffer = b""
        self.pid = pid
        self.returncode: int | None = None

    def _read_status(self, timeout: float | None) -> bool:
        """Wait (at most `timeout`; 0 = just look) for the zygote's exit report."""
        self._conn.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self._conn.recv(4096)
            except (TimeoutError, BlockingIOError):
                return False
            if not chunk:
                raise RuntimeError(f"the zygote went away before server {self.pid} exited")
            self._buffer += chunk
        self.returncode = int(json.loads(self._buffer.split(b"\n", 1)[0])["returncode"])
        self._conn.close()
        return True

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._read_status(timeout):
            raise subprocess.TimeoutExpired(f"kandev serve (pid {self.pid})", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped yet: the pid is still this process
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class PreloadedServe:
    """The zygote (started at once, importing in the background) and its `spawn`."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="kandev-zygote-")
        self.path = str(Path(self._dir) / "spawn.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(16)  # bound before the zygote starts: a spawn never races its start
        env = dict(os.environ)
        env.pop("KANDEV_FAULT_INJECT", None)  # each child's own value comes with its request
        self.log = Path(self._dir) / "zygote.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.preloaded_serve", str(listener.fileno())],
                stdin=subprocess.PIPE,  # the lifeline: the zygote ends when this closes
                stdout=log,  # not a terminal, as for a server logging to its file
                stderr=subprocess.STDOUT,
                pass_fds=[listener.fileno()],
                env=env,
                cwd=Path(__file__).resolve().parent.parent,
                start_new_session=True,
            )
        listener.close()

    def spawn(self, args: list[str], env: dict[str, str], log: Path) -> ForkedProcess:
        """Start `python -m kandev *args` (as a fork of the zygote) with exactly `env`."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the zygote exited with {self.proc.returncode}")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(SPAWN_TIMEOUT)
        conn.connect(self.path)
        request = {"args": args, "env": env, "cwd": os.getcwd(), "log": str(log)}
        conn.sendall(json.dumps(request).encode() + b"\n")
        reply = b""
        while b"\n" not in reply:
            chunk = conn.recv(4096)
            if not chunk:
                raise RuntimeError(
                    f"the zygote did not fork (exit {self.proc.poll()}):\n"
                    + self.log.read_text(errors="replace")[-3000:]
                )
            reply += chunk
        line, rest = reply.split(b"\n", 1)
        process = ForkedProcess(conn, int(json.loads(line)["pid"]))
        process._buffer = rest
        return process

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        shutil.rmtree(self._dir, ignore_errors=True)


# --- the zygote -----------------------------------------------------------------------------


# What `kandev serve` imports up to serving: its own import, and what it imports lazily as it
# starts (compared with sys.modules of a server that has started) or when its first agent
# starts (the ACP runtime: the crash tests' servers all run agents).
PRELOAD = (
    "kandev.cli",
    "kandev.startup",
    "kandev.app",
    "kandev.perimeter",
    "kandev.agents.acp_runtime",
    "uvicorn",
    "uvloop",
    "asyncpg",
    "anyio._backends._asyncio",
)


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def _read_request(conn: socket.socket) -> dict[str, Any]:
    conn.settimeout(30)
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("spawn request cut short")
        data += chunk
    return json.loads(data.split(b"\n", 1)[0])


def _serve_forks(listener: socket.socket) -> dict[str, Any]:
    """Fork a child per request; returns only in a child (with its request)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
    signal.set_wakeup_fd(wake_w)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "spawn")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "lifeline")
    children: dict[int, socket.socket] = {}
    while True:
        for key, _ in selector.select():
            if key.data == "lifeline":
                if not os.read(sys.stdin.fileno(), 4096):
                    return {}  # the test process is done
            elif key.data == "child":
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
                while children:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = children.pop(pid, None)
                    if conn is not None:
                        code = os.waitstatus_to_exitcode(status)
                        with contextlib.suppress(OSError):
                            conn.sendall(json.dumps({"returncode": code}).encode() + b"\n")
                        conn.close()
            else:
                conn, _ = listener.accept()
                try:
                    request = _read_request(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                # What Python's docs advise before a fork without exec: the imported objects
                # leave the collector's generations, so the child's collections (and its
                # exit) do not walk them and copy every page they sit on.
                gc.freeze()
                pid = os.fork()
                if pid == 0:
                    # The child: none of the zygote's machinery goes with it.
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    listener.close()
                    conn.close()
                    for other in children.values():
                        other.close()
                    return request
                children[pid] = conn
                with contextlib.suppress(OSError):  # the test went away: reaped all the same
                    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _become(request: dict[str, Any]) -> None:
    """Set this forked child up as a fresh `python -m kandev` started with `request`."""
    import importlib

    os.setsid()  # as Popen(start_new_session=True): its own session and process group
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    import kandev.faults

    importlib.reload(kandev.faults)  # it reads KANDEV_FAULT_INJECT at import
    sys.argv = ["kandev", *request["args"]]


def main() -> None:
    listener = socket.socket(fileno=int(sys.argv[1]))
    _preload()
    request = _serve_forks(listener)
    if not request:
        return
    _become(request)
    import runpy

    runpy.run_module("kandev", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
