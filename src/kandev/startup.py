"""Starting `kandev serve`: one server per data dir, and every startup failure said in one line.

Why the startup runs before uvicorn serves, not inside uvicorn's lifespan: uvicorn reports an
exception in the lifespan (a database it cannot reach, a recovery error) by logging the whole
traceback, then "Application startup failed. Exiting." and `sys.exit(3)`; a port in use is
logged and exits the same way. None of it reaches the caller as an exception, so none of it
can become one clear line. So `serve()` does, in order, in one event loop:

1. takes the data-dir lock (`DataDirLock`) — before the database is touched, for SQLite and
   PostgreSQL alike (the data dir also holds the agents' folders);
2. binds and listens on the port itself (`listen_socket`), so "port in use" is an OSError here;
3. enters the app's own lifespan (`app.router.lifespan_context`: `Services.prepare()` — the
   database ownership check, migrations, recovery — and the MCP session managers) as a plain
   `async with`, so any failure is an ordinary exception;
4. only then hands the open socket to uvicorn (`lifespan="off"`: the lifespan is already
   running, and it is exited after uvicorn stops, which closes the services).

The CLI turns any exception from here into `kandev: <one line>` and exit status 2
(`describe_failure`); `--debug` adds the traceback.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kandev.config import Settings
from kandev.errors import KandevError

if TYPE_CHECKING:
    import asyncio

LOCK_FILE_NAME = "kandev.lock"
LISTEN_BACKLOG = 2048


class StartupError(Exception):
    """A reason the server cannot start, already phrased for the user (one line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DataDirLock:
    """An exclusive flock on `<data dir>/kandev.lock`, holding the owner's pid.

    The kernel drops a flock when its process dies, however it dies (SIGKILL included), so a
    crashed server never leaves a stale lock. The descriptor is not inherited by agent
    processes (Python opens files non-inheritable), so an agent that outlives its server does
    not keep the data dir locked either.
    """

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE_NAME
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        data_dir = Path(os.path.abspath(data_dir.expanduser()))
        if data_dir.exists() and not data_dir.is_dir():
            raise StartupError(
                f"the data dir {data_dir} is a file, not a directory; pick another --data-dir"
            )
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StartupError(
                f"cannot create the data dir {data_dir}: {_strerror(exc)}; pick another --data-dir"
            ) from exc
        try:
            fd = os.open(data_dir / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StartupError(
                f"cannot write to the data dir {data_dir}: {_strerror(exc)}; "
                "fix its permissions or pick another --data-dir"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise StartupError(
                f"another Kandev server (pid {holder}) is using {data_dir}; "
                "stop it or pick another --data-dir"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StartupError(f"cannot lock the data dir {data_dir}: {_strerror(exc)}") from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise StartupError(
                f"cannot write to the data dir {data_dir}: {_strerror(exc)}"
            ) from exc
        return cls(data_dir, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def live_server_pid(data_dir: Path) -> str | None:
    """The pid of the server holding `data_dir`'s lock, or None when no live server does.
    (A shared lock taken and dropped at once: the kernel says whether anyone holds it.)"""
    path = Path(os.path.abspath(data_dir.expanduser())) / LOCK_FILE_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        if text.isdigit():
            return text
    return "unknown"


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port, or a StartupError saying why not."""
    bare = host.strip("[]")
    try:
        infos = socket.getaddrinfo(
            bare or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on --host {host}: {exc.strerror}") from exc
    # Prefer IPv4 for names like `localhost` that resolve to both; an IPv6 literal stays IPv6.
    family, kind, proto, _, address = sorted(infos, key=lambda i: i[0] != socket.AF_INET)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(
                f"port {port} on {host} is already in use; stop what holds it or pick "
                "another --port"
            ) from exc
        if exc.errno == errno.EACCES:
            raise StartupError(
                f"not allowed to listen on port {port} on {host}; pick another --port"
            ) from exc
        raise StartupError(f"cannot listen on {host}:{port}: {_strerror(exc)}") from exc
    return sock


def serve(settings: Settings, *, on_started: Callable[[Settings, str], None]) -> None:
    """Lock the data dir, listen, prepare the app, then serve until SIGINT / SIGTERM.

    `settings.port` 0 picks a free port; `on_started` gets the settings with the real one
    and the auth mode the database put the server in ("disabled", "setup" or "enabled").
    Raises on any startup failure (see the module docstring); returns after a clean stop.
    """
    import asyncio

    lock = DataDirLock.acquire(settings.data_dir)
    try:
        sock = listen_socket(settings.host, settings.port)
        try:
            settings = settings.model_copy(update={"port": sock.getsockname()[1]})
            with asyncio.Runner(loop_factory=server_loop_factory()) as runner:
                runner.run(_serve(settings, sock, on_started))
        finally:
            sock.close()
    finally:
        lock.release()


def server_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop uvicorn itself would pick (`--loop auto`): uvloop when installed
    (uvicorn[standard] brings it), else asyncio's own. `asyncio.run` would always take the
    latter: a selector loop whose transports, handles and timers cost about twice the
    memory and CPU per connection of uvloop's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] depends on it
        return None
    return uvloop.new_event_loop


async def _serve(
    settings: Settings, sock: socket.socket, on_started: Callable[[Settings, str], None]
) -> None:
    import uvicorn

    from kandev.app import create_app
    from kandev.heap import settle_heap
    from kandev.perimeter import uvicorn_options

    log_kandev_lines(settings.log_level)
    app = create_app(settings)
    config = uvicorn.Config(
        _ending_streams_on_shutdown(app),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        interface="asgi3",
        lifespan="off",  # the app's lifespan is entered below, where its failures surface
        # Open SSE streams end when the shutdown begins (`_ending_streams_on_shutdown`); this
        # only bounds a request that still does not finish.
        timeout_graceful_shutdown=2,
        # proxy_headers=False: forwarded headers are the perimeter's call (--trust-proxy);
        # uvicorn's default believes X-Forwarded-For from any loopback peer.
        **uvicorn_options(),
    )

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Before uvicorn waits for open requests: streams end, waiting asks return, the
            # agents stop — so nothing is left for its graceful timeout to cancel.
            await app.state.services.begin_shutdown()
            await super().shutdown(sockets)

    async with (
        _holding_the_database(settings, app.state.services.db),
        app.router.lifespan_context(app),
    ):
        settle_heap()  # after the startup work (recovery included), before any request
        on_started(settings, app.state.services.auth.mode)
        with _replayed_signal_ignored():
            await Server(config).serve(sockets=[sock])


@contextlib.asynccontextmanager
async def _holding_the_database(settings: Settings, db: Any) -> AsyncIterator[None]:
    """One server per database (kandev.db.serve_lock), checked before the startup's
    recovery could touch another server's sessions. SQLite in the data dir needs nothing
    more than the data dir's lock."""
    from kandev.db.ownership import check_database_is_kandevs
    from kandev.db.serve_lock import serving

    if not settings.database_url and db.is_sqlite:
        yield
        return
    await check_database_is_kandevs(db)  # an unreachable database says so, by name
    async with serving(db):
        yield


def log_kandev_lines(level: str) -> None:
    """Kandev's own log lines (`agent started …`, `question answered …`, the perimeter's
    refusals) on stderr, formatted as uvicorn's are. Without a handler of their own they
    would reach only the root logger, which the MCP SDK sets to WARNING: no INFO line
    would ever show."""
    import logging

    from uvicorn.logging import DefaultFormatter

    logger = logging.getLogger("kandev")
    if any(getattr(h, "kandev_serve", False) for h in logger.handlers):
        return  # set up already (a second server in this process)
    handler = logging.StreamHandler()
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s"))
    handler.kandev_serve = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False  # not again through the root's handler


def _ending_streams_on_shutdown(app: Any) -> Any:
    """The app, with every GET request seeing its client disconnect once the shutdown begins
    (`bus.shutting_down`): a streaming response (the SSE event stream, an MCP GET stream)
    then ends as it does when the browser goes away, with no error and no traceback."""
    import asyncio

    def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        # Other requests get the app's own coroutine: no frame of this wrapper waits with an
        # agent's hours-long ask (uvicorn is told the interface: this is not `async def`).
        if scope["type"] != "http" or scope.get("method") != "GET":
            return app(scope, receive, send)
        return streaming(scope, receive, send)

    async def streaming(scope: dict[str, Any], receive: Any, send: Any) -> None:
        shutting_down: asyncio.Event = app.state.services.bus.shutting_down

        async def receive_until_shutdown() -> dict[str, Any]:
            if shutting_down.is_set():
                return {"type": "http.disconnect"}
            message = asyncio.ensure_future(receive())
            stop = asyncio.ensure_future(shutting_down.wait())
            try:
                await asyncio.wait({message, stop}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # cancelled (the response ended): no receive left behind
                message.cancel()
                raise
            finally:
                stop.cancel()
            if message.done():
                return message.result()
            message.cancel()
            return {"type": "http.disconnect"}

        started = completed = False

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started, completed
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                completed = True
            await send(message)

        await app(scope, receive_until_shutdown, tracking_send)
        if started and not completed and shutting_down.is_set():
            # The stream was cut by the shutdown, not by its client: end it properly, so
            # the client sees the stream close (and uvicorn logs no incomplete response).
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    return wrapped


@contextlib.contextmanager
def _replayed_signal_ignored() -> Iterator[None]:
    """uvicorn re-raises the SIGINT/SIGTERM that stopped it once it has stopped serving. The
    lifespan still has to close the services after that, so the replay is ignored here: the
    server is already shutting down, and exits 0 when it is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handled = (signal.SIGINT, signal.SIGTERM)
    # A Python-level no-op rather than SIG_IGN: an ignored signal would stay ignored in any
    # process started meanwhile, a handler is reset to the default on exec.
    previous: dict[int, Any] = {sig: signal.signal(sig, _ignore) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ignore(_signum: int, _frame: Any) -> None:
    return None


def describe_failure(exc: BaseException, *, serving: bool = False) -> str:
    """The one line a failure is reported as (without the `kandev: ` prefix).

    Errors Kandev raised on purpose (StartupError, the domain errors: a foreign database,
    recovery) already say what is wrong; anything else is named by its type and message.
    """
    if isinstance(exc, StartupError | KandevError):
        text = exc.message
    else:
        if isinstance(exc, OSError) and exc.strerror:
            detail = exc.strerror + (f" ({exc.filename})" if exc.filename else "")
        else:
            detail = f"{type(exc).__name__}: {exc}"
        text = f"{'stopped on an error' if serving else 'could not start'}: {detail}"
    return " ".join(text.split())


def _strerror(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()
