"""The agent process guard: ties an agent's whole process group to the life of the server.

Kandev never starts an agent directly. It starts this file (``python -I -S process_guard.py
SERVER_PID LEASH_FD -- ARGV…``) as the leader of a new session and process group; the guard
forks the agent into that same group and waits. Standard library only, single-threaded, no
I/O relayed: the agent inherits the guard's stdin, stdout, stderr and cwd.

Why a guard process and not only ``PR_SET_PDEATHSIG`` on the agent:

- PDEATHSIG needs code between fork and exec. In the server that means ``preexec_fn``,
  which CPython documents as unsafe in a threaded process (asyncpg / aiosqlite / uvicorn
  threads). In the guard there is one thread, so doing it there is safe.
- PDEATHSIG only reaches the direct child. Agents spawn children in their group (``npx`` →
  ``node`` → tools); those must go too, so something that outlives the server has to kill
  the group. That is the guard.

How the guard learns that the server died, on every OS: the *leash*, a pipe whose read end
is the guard's ``LEASH_FD`` and whose write end only the server holds (close-on-exec, so no
other child inherits it). When the server dies, even by SIGKILL, the kernel closes the write
end; the guard sees EOF, lets the agent run LAST_READ_SECONDS more (so an answer the server
already wrote to it is read, not lost in its socket) and then sends SIGKILL to its whole
process group (itself included). On
Linux the guard also sets ``PR_SET_PDEATHSIG`` (SIGUSR1) on itself as a second trigger. Note
that PDEATHSIG fires when the *thread* that forked the guard exits: asyncio forks from the
event loop's thread, which lives as long as the server.

The agent (the guard's child) gets ``PR_SET_PDEATHSIG`` = SIGKILL on Linux, so if the guard
itself is killed the agent dies at once. macOS has no PDEATHSIG: the leash alone applies.

Exit status: the guard exits as the agent did (same code, or killed by the same signal), so
the server describes the agent's exit, not the guard's. A program that cannot be executed
makes the guard print one line on stderr and exit 127.

SIGTERM (the server's polite stop, sent to the group) does not end the guard: the agent gets
it too and decides; when the agent exits the guard follows. SIGKILL ends everything. A stop
that lands between the fork and the agent's exec is not lost: SIGTERM is blocked across the
fork and unblocked in the child only once its disposition is the default again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
GUARD_DEATH_SIGNAL = signal.SIGUSR1  # what the guard gets on Linux when the server dies
EXEC_FAILED_CODE = 127
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}  # the agent's to obey; the guard outlasts them
# After the server dies the agent may still hold an answer the server already wrote to it (a
# tool result in its socket, a prompt in its stdin): it gets this long to read (and persist)
# it before its group is killed — well inside CONTRACT §8's 5 s.
LAST_READ_SECONDS = 1.0


def _set_parent_death_signal(sig: int) -> bool:
    """Linux only: deliver `sig` to this process when its parent (thread) dies."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_group_and_exit() -> None:
    """The server is gone: everything in this process group goes, the guard included."""
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(EXEC_FAILED_CODE)  # not reached: SIGKILL ends this process too


def _server_gone(child: int, wake_r: int) -> None:
    """Give the agent LAST_READ_SECONDS (it may exit sooner), then end the whole group."""
    deadline = time.monotonic() + LAST_READ_SECONDS
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            pid, _ = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == child:
            break
        try:
            ready, _, _ = select.select([wake_r], [], [], remaining)
        except InterruptedError:
            continue
        if ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 64)
    _kill_group_and_exit()


def _exec_agent(argv: list[str], guard_pid: int, report_fd: int) -> None:
    """In the forked child: default signals, PDEATHSIG, then exec (never returns)."""
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(GUARD_DEATH_SIGNAL, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a pending stop ends us here
        _set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != guard_pid:  # the guard died before PDEATHSIG was armed
            os._exit(EXEC_FAILED_CODE)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(report_fd, str(exc.errno or errno.EINVAL).encode())
    finally:
        os._exit(EXEC_FAILED_CODE)


def _exit_like(status: int) -> None:
    """Exit the way the agent did: same exit code, or death by the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those cannot be caught anyway
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # only if the signal did not end us (it should)
    os._exit(os.waitstatus_to_exitcode(status))


def main(args: list[str]) -> None:
    if len(args) < 4 or args[2] != "--":
        sys.stderr.write("usage: process_guard.py SERVER_PID LEASH_FD -- PROGRAM [ARG…]\n")
        os._exit(2)
    server_pid, leash_fd, argv = int(args[0]), int(args[1]), args[3:]

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd is written
    signal.signal(GUARD_DEATH_SIGNAL, lambda *_: None)
    for sig in STOP_SIGNALS:
        # A no-op handler, not SIG_IGN: an ignored signal could be discarded in the child
        # before it restores the default (and SIG_IGN would survive its exec).
        signal.signal(sig, lambda *_: None)
    _set_parent_death_signal(GUARD_DEATH_SIGNAL)
    if os.getppid() != server_pid:  # the server died before we got here
        _kill_group_and_exit()

    report_r, report_w = os.pipe()  # close-on-exec: EOF without data means exec worked
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    # Taken before the fork: the child's own getppid() names the reaper once the guard has
    # died, and the check before exec would then pass (an agent nobody would ever end).
    guard_pid = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(report_r)
        for fd in (leash_fd, wake_r, wake_w):
            os.close(fd)
        _exec_agent(argv, guard_pid, report_w)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    os.close(report_w)
    failure = b""
    while chunk := os.read(report_r, 64):
        failure += chunk
    os.close(report_r)
    if failure:
        os.waitpid(child, 0)
        code = int(failure.decode() or errno.EINVAL)
        sys.stderr.write(f"kandev: cannot run {argv[0]}: {os.strerror(code)}\n")
        sys.stderr.flush()
        os._exit(EXEC_FAILED_CODE)
    # The agent owns stdio now: the guard must not hold the pipes open (the server sees EOF
    # on the agent's stdout when the agent closes it, not when the guard exits).
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)

    while True:
        try:
            ready, _, _ = select.select([leash_fd, wake_r], [], [])
        except InterruptedError:
            ready = [wake_r]
        if leash_fd in ready:
            try:
                data = os.read(leash_fd, 64)
            except OSError:
                data = b""
            if not data:  # the server's end closed: it exited or was killed
                _server_gone(child, wake_r)
        if wake_r in ready:
            try:
                signals = os.read(wake_r, 64)
            except BlockingIOError:
                signals = b""
            if GUARD_DEATH_SIGNAL in signals or os.getppid() != server_pid:
                _server_gone(child, wake_r)
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
