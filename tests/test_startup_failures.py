"""`kandev serve` refusing to start, as a user sees it: the real command in a subprocess, one
line on stderr, exit status 2, nothing touched (CONTRACT §8)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port, missing
from tests.server_process import start_serve, wait_for_health

STARTUP_TIMEOUT = 90


def run_serve(home: Path, *args: str, port: int | None = None) -> tuple[int, list[str]]:
    """Run `kandev serve` to its exit; (status, stderr lines). It must not get as far as serving."""
    env = {**os.environ, "KANDEV_HOME": str(home)}
    env.pop("KANDEV_DATABASE_URL", None)
    env.pop("KANDEV_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "-m", "kandev", "serve", "--port", str(port or free_port()), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT,
    )
    return result.returncode, result.stderr.splitlines()


def assert_one_line(status: int, lines: list[str], *fragments: str) -> str:
    assert status == 2, lines
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("kandev: "), line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert "Traceback" not in line
    return line


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=30)[0].decode()


# --- one server per data dir --------------------------------------------------------------


def test_a_second_server_on_the_same_data_dir_names_the_first(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    first = start_serve(home, port)
    try:
        wait_for_health(f"http://127.0.0.1:{port}", first)
        status, lines = run_serve(home)
        line = assert_one_line(
            status, lines, f"another Kandev server (pid {first.pid}) is using {home}"
        )
        assert "--data-dir" in line
        # The lock comes before the database, whatever the database: also for PostgreSQL.
        status, lines = run_serve(home, "--database-url", "postgresql://nobody@127.0.0.1:1/x")
        assert_one_line(status, lines, f"(pid {first.pid})")
        assert (home / "kandev.lock").read_text().strip() == str(first.pid)
    finally:
        first.send_signal(signal.SIGKILL)  # no cleanup at all: the kernel drops the flock
        first.wait(timeout=30)
    second = start_serve(home, port)
    try:
        assert wait_for_health(f"http://127.0.0.1:{port}", second).status_code == 200
        assert (home / "kandev.lock").read_text().strip() == str(second.pid)
    finally:
        output = stop(second)
    assert "Kandev" in output and "SQLite at" in output
    assert second.returncode == 0


def test_the_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        status, lines = run_serve(tmp_path / "home", port=port)
    assert_one_line(status, lines, f"port {port} on 127.0.0.1 is already in use", "--port")


# --- the data dir -------------------------------------------------------------------------


def test_a_data_dir_that_is_a_file(tmp_path: Path) -> None:
    plain = tmp_path / "not-a-dir"
    plain.write_text("x")
    status, lines = run_serve(plain)
    assert_one_line(status, lines, f"the data dir {plain} is a file", "--data-dir")
    status, lines = run_serve(plain / "below")
    assert_one_line(status, lines, f"cannot create the data dir {plain / 'below'}")
    assert plain.read_text() == "x"


def test_a_data_dir_that_cannot_be_written(tmp_path: Path) -> None:
    # Runs as root too (where file modes do not stop writes): the lock file cannot be made.
    home = tmp_path / "home"
    (home / "kandev.lock").mkdir(parents=True)
    status, lines = run_serve(home)
    assert_one_line(status, lines, f"cannot write to the data dir {home}", "--data-dir")
    # The database file cannot be opened: named, in one line.
    home = tmp_path / "home2"
    (home / "kandev.db").mkdir(parents=True)
    status, lines = run_serve(home)
    assert_one_line(status, lines, f"cannot open the database sqlite:///{home / 'kandev.db'}")


def test_a_read_only_data_dir(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: file modes do not stop root from writing (see the file case)")
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)
    try:
        status, lines = run_serve(home)
    finally:
        home.chmod(0o700)
    assert_one_line(status, lines, f"cannot write to the data dir {home}", "permission denied")


# --- the database -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        (
            "postgresql://nobody@127.0.0.1:1/x",
            ["cannot open the database postgresql://nobody@127.0.0.1:1/x", "connection refused"],
        ),
        ("postgresql://nobody:hunter2@host:notaport/x", ["--database-url: cannot parse"]),
        ("mysql://x/y", ["--database-url:", "postgresql://"]),
    ],
)
def test_a_bad_database_url_is_one_line(tmp_path: Path, url: str, fragments: list[str]) -> None:
    status, lines = run_serve(tmp_path / "home", "--database-url", url)
    line = assert_one_line(status, lines, *fragments)
    assert "hunter2" not in line


def test_postgresql_errors_are_one_line(tmp_path: Path, pg_server) -> None:
    if pg_server is None:
        missing("PostgreSQL")
    from sqlalchemy.engine import make_url

    stranger = make_url(pg_server.url_for("postgres")).set(
        username="kandev_no_such_role", password="pw"
    )
    cases = [
        (pg_server.url_for("kandev_no_such_database"), 'database "kandev_no_such_database"'),
        (stranger.render_as_string(hide_password=False), 'role "kandev_no_such_role"'),
    ]
    for url, fragment in cases:
        status, lines = run_serve(tmp_path / "home", "--database-url", url)
        line = assert_one_line(status, lines, "cannot open the database", fragment)
        assert ":pw@" not in line


def test_a_sqlite_file_of_someone_else_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    theirs = home / "kandev.db"
    conn = sqlite3.connect(theirs)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.commit()
    conn.close()
    before = checksum(theirs)
    status, lines = run_serve(home)
    assert_one_line(status, lines, "is not Kandev's", "customers", "--database-url")
    assert checksum(theirs) == before
    assert sorted(p.name for p in home.iterdir()) == ["kandev.db", "kandev.lock"]  # no -wal

    # Named with --database-url, outside the data dir: the same.
    elsewhere = tmp_path / "shop.db"
    elsewhere.write_bytes(theirs.read_bytes())
    status, lines = run_serve(tmp_path / "home2", "--database-url", f"sqlite:///{elsewhere}")
    assert_one_line(status, lines, "is not Kandev's")
    assert checksum(elsewhere) == before


def test_a_file_that_is_not_sqlite_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    text = home / "kandev.db"
    text.write_text("these are my notes, not a database\n" * 20)
    before = checksum(text)
    status, lines = run_serve(home)
    assert_one_line(status, lines, f"{text} is not a SQLite database")
    assert checksum(text) == before


def test_a_foreign_postgresql_database_is_refused(tmp_path: Path, pg_server) -> None:
    if pg_server is None:
        missing("PostgreSQL")
    import asyncpg

    name = f"kandev_foreign_{os.getpid()}"

    async def create() -> None:
        admin = await asyncpg.connect(pg_server.admin_url)
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.close()
        conn = await asyncpg.connect(pg_server.url_for(name))
        await conn.execute("CREATE TABLE customers (id serial PRIMARY KEY)")
        await conn.close()

    async def tables() -> list[str]:
        conn = await asyncpg.connect(pg_server.url_for(name))
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        await conn.close()
        return sorted(r["tablename"] for r in rows)

    asyncio.run(create())
    status, lines = run_serve(tmp_path / "home", "--database-url", pg_server.url_for(name))
    assert_one_line(status, lines, "is not Kandev's", "customers")
    assert asyncio.run(tables()) == ["customers"]


def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    plain = tmp_path / "not-a-dir"
    plain.write_text("x")
    status, lines = run_serve(plain, "--debug")
    assert status == 2
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1].startswith("kandev: the data dir")
    assert any("StartupError" in line for line in lines)


def test_a_recovery_error_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = start_serve(home, port)
    try:
        wait_for_health(url, first)
        ws = httpx.post(f"{url}/api/v1/workspaces", json={"name": "w"}).json()
        flow = httpx.post(
            f"{url}/api/v1/workflows", json={"workspace_id": ws["id"], "name": "f"}
        ).json()
        task = httpx.post(
            f"{url}/api/v1/tasks",
            json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "t"},
        ).json()
        session = httpx.post(f"{url}/api/v1/tasks/{task['id']}/sessions", json={}).json()
    finally:
        stop(first)
    # A question whose answer is marked "being delivered" but names no question: recovery
    # cannot settle it, and the server must not start on top of it.
    conn = sqlite3.connect(home / "kandev.db")
    with conn:
        conn.execute(
            "INSERT INTO task_session_messages (id, session_id, task_id, type, content, "
            "metadata, created_at, updated_at) SELECT 'broken-message', id, task_id, "
            "'clarification_request', 'q', '{\"response_delivery_pending\": true}', "
            "updated_at, updated_at FROM task_sessions WHERE id = ?",
            (session["id"],),
        )
    conn.close()
    status, lines = run_serve(home)
    assert_one_line(
        status,
        lines,
        "clarification startup recovery failed",
        "clarification message broken-message has a delivery intent but no pending_id",
    )
