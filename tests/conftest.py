"""Shared fixtures: real SQLite files, a real PostgreSQL server, a real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import uvicorn

from kandev.clock import ManualClock
from kandev.config import Settings, normalize_database_url
from kandev.db.engine import Database
from kandev.db.migrate import upgrade_to_head
from kandev.perimeter import uvicorn_options
from kandev.services import Services, build_services
from tests.pg_server import PgServer, start_pg_server

REQUIRE_ALL = os.environ.get("KANDEV_TEST_REQUIRE_ALL") == "1"
DATABASE_KINDS = ["sqlite", "postgres"]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    # Every async test runs on anyio's asyncio backend without repeating the marker; it has
    # to be added before anyio's own collection hook looks for it.
    if collector.funcnamefilter(name) and inspect.iscoroutinefunction(obj):
        pytest.mark.anyio(obj)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


def missing(what: str) -> None:
    """Skip, or fail under KANDEV_TEST_REQUIRE_ALL=1 (CI), when a real part is missing."""
    if REQUIRE_ALL:
        pytest.fail(f"{what} is required (KANDEV_TEST_REQUIRE_ALL=1) but not available")
    pytest.skip(f"{what} not available")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer | None]:
    try:
        server = start_pg_server()
    except Exception as exc:  # initdb/pg_ctl failed: report why, then skip or fail
        print(f"PostgreSQL could not start: {exc!r}")
        server = None
    yield server
    if server is not None:
        server.stop()


_db_counter = iter(range(1, 1_000_000))


async def _create_pg_database(server: PgServer) -> str:
    import asyncpg

    name = f"kandev_test_{os.getpid()}_{next(_db_counter)}"
    conn = await asyncpg.connect(server.admin_url)
    try:
        # FILE_COPY copies the (tiny) template's files; PostgreSQL 15's default, WAL_LOG,
        # writes every page of it through the WAL: ~0.07 s more per database, ~450 of them.
        strategy = " STRATEGY FILE_COPY" if conn.get_server_version().major >= 15 else ""
        await conn.execute(f'CREATE DATABASE "{name}"{strategy}')
    finally:
        await conn.close()
    return server.url_for(name)


@pytest.fixture(params=DATABASE_KINDS)
def database_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def database_url(database_kind: str, tmp_path: Path, pg_server: PgServer | None) -> str:
    """A fresh, empty database of each kind (async URL)."""
    if database_kind == "sqlite":
        return normalize_database_url("", tmp_path)
    if pg_server is None:
        missing("PostgreSQL")
    return normalize_database_url(await _create_pg_database(pg_server), tmp_path)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return normalize_database_url("", tmp_path)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A migrated database of each kind."""
    database = Database(database_url)
    await upgrade_to_head(database)
    yield database
    await database.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make_settings(tmp_path: Path, database_url: str = "", **overrides: object) -> Settings:
    return Settings(data_dir=tmp_path / "home", database_url=database_url, **overrides)


@pytest.fixture
async def services(
    database_url: str, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[Services]:
    """Prepared services (auth off) on each database kind."""
    built = build_services(make_settings(tmp_path, database_url), clock=clock)
    await built.prepare()
    yield built
    await built.close()


# --- a real uvicorn on 127.0.0.1 ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """uvicorn serving a Kandev app in a background thread (its own event loop)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.port = services.settings.port
        self.url = f"http://127.0.0.1:{self.port}"
        from kandev.app import create_app

        config = uvicorn.Config(
            create_app(services.settings, services=services),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=3,
            **uvicorn_options(),  # exactly as `kandev serve` runs it (proxy headers off)
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's, once it runs

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start()
            self.error = exc

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self.server.serve()

    def start(self, timeout: float = 30.0) -> LiveServer:
        self.thread.start()
        waiter = threading.Event()
        deadline = timeout
        while not self.server.started:
            if self.error is not None or not self.thread.is_alive():
                raise RuntimeError(f"server did not start: {self.error!r}")
            if deadline <= 0:
                raise TimeoutError("server did not start in time")
            waiter.wait(0.02)
            deadline -= 0.02
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def live_server_factory(tmp_path: Path) -> Iterator:
    """Start servers with chosen settings: factory(database_url, clock=…, auth=True)."""
    started: list[LiveServer] = []

    def factory(
        database_url: str,
        *,
        clock: ManualClock | None = None,
        runtime: object | None = None,
        **settings: object,
    ):
        settings.setdefault("port", free_port())
        built = build_services(
            make_settings(tmp_path, database_url, **settings), clock=clock, runtime=runtime
        )
        server = LiveServer(built).start()
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()
