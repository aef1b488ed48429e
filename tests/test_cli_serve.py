"""`kandev serve` as a user runs it: a real process, migrations applied, /health answering."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from kandev.cli import app
from tests.conftest import free_port, missing
from tests.server_process import start_serve, wait_for_health


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return start_serve(tmp_path / "home", port, *args), f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen) -> str:
    """SIGINT, as Ctrl-C does; a clean stop exits 0. Returns the output (stdout + stderr)."""
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, output
    return output


def test_serve_starts_on_sqlite_and_applies_migrations(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path)
    try:
        r = wait_for_health(url, proc)
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        assert (tmp_path / "home" / "kandev.db").exists()
        me = httpx.get(f"{url}/api/v1/auth/me").json()
        assert me["mode"] == "disabled"
        profiles = httpx.get(f"{url}/api/v1/agent-profiles").json()["agent_profiles"]
        assert [p["name"] for p in profiles] == ["demo"]
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=30)[0].decode()
    assert "SQLite at" in output and "auth off" in output


def test_serve_passes_the_perimeter_flags_and_leaves_forwarded_headers_to_them(
    tmp_path: Path,
) -> None:
    proc, url = _serve(tmp_path, "--allowed-hosts", "kandev.example, board.example")
    try:
        wait_for_health(url, proc)
        for host in ("kandev.example", "board.example:8420"):
            r = httpx.get(f"{url}/health", headers={"Host": host})
            assert r.status_code == 200, host
        r = httpx.get(f"{url}/health", headers={"Host": "evil.example"})
        assert r.status_code == 421
        # No --trust-proxy: uvicorn must not believe X-Forwarded-For from a loopback peer
        # either (its access log shows the client address it settled on).
        r = httpx.get(f"{url}/health", headers={"X-Forwarded-For": "203.0.113.7"})
        assert r.status_code == 200
    finally:
        output = _stop(proc)
    assert "203.0.113.7" not in output
    assert "127.0.0.1:" in output and '"GET /health HTTP/1.1" 200' in output


def test_serve_takes_the_flags_from_the_environment(tmp_path: Path) -> None:
    port = free_port()
    proc = start_serve(
        tmp_path / "home",
        port,
        env={"KANDEV_ALLOWED_HOSTS": "kandev.example", "KANDEV_TRUST_PROXY": "10.1.2.3"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc)
        assert httpx.get(f"{url}/health", headers={"Host": "kandev.example"}).status_code == 200
    finally:
        _stop(proc)


def test_serve_help_lists_the_flags() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    for flag in ("--allowed-hosts", "--trust-proxy", "--debug", "KANDEV_ALLOWED_HOSTS"):
        assert flag in result.output, flag


def test_help_lists_the_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("serve", "user", "token"):
        assert command in result.output


def test_serve_refuses_an_unknown_database_url(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["serve", "--data-dir", str(tmp_path), "--database-url", "mysql://x/y"]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "kandev: --database-url: database URL must start with postgresql:// or sqlite:// "
        "(got 'mysql')"
    ]
    assert not tmp_path.joinpath("kandev.lock").exists()  # refused before anything is touched


def test_serve_on_postgresql_migrates_and_serves(tmp_path: Path, pg_server) -> None:
    if pg_server is None:
        missing("PostgreSQL")
    import asyncio

    import asyncpg

    async def create() -> None:
        conn = await asyncpg.connect(pg_server.admin_url)
        await conn.execute('CREATE DATABASE "kandev_cli_serve"')
        await conn.close()

    asyncio.run(create())
    proc, url = _serve(tmp_path, "--database-url", pg_server.url_for("kandev_cli_serve"))
    try:
        assert wait_for_health(url, proc).status_code == 200
        r = httpx.post(f"{url}/api/v1/workspaces", json={"name": "on postgres"})
        assert r.status_code == 201
        assert httpx.get(f"{url}/api/v1/workspaces").json()["total"] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=30)[0].decode()
    assert "PostgreSQL" in output
    assert not (tmp_path / "home" / "kandev.db").exists()


def test_serve_takes_host_and_port_from_the_environment_and_prints_where_things_are(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = {**os.environ, "KANDEV_HOME": str(tmp_path / "home"), "KANDEV_PORT": str(port)}
    env["KANDEV_HOST"] = "localhost"  # the banner names it
    env.pop("KANDEV_DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kandev", "serve", "--auth"],  # no --port: KANDEV_PORT
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for_health(url, proc).status_code == 200
        assert httpx.get(f"{url}/api/v1/auth/me").json()["mode"] == "setup"
    finally:
        output = _stop(proc)
    base = f"http://localhost:{port}"
    banner = dict(re.findall(r"^  (\S.*?)\s{2,}(\S+)", output, re.M))
    assert banner["Web UI"] == f"{base}/"
    assert banner["REST"] == f"{base}/api/v1"
    assert banner["MCP"] == f"{base}/mcp"
    assert banner["Agent MCP"] == f"{base}/agent/mcp"
    assert banner["Health"] == f"{base}/health"
    # Setup mode (auth on, no admin yet): how to make the first admin.
    home = tmp_path / "home"
    assert f"kandev user create --admin --email you@example.com --data-dir {home}" in output
    assert f"or open {base}/setup" in output


def test_make_run_passes_port_and_data_dir() -> None:
    root = Path(__file__).resolve().parent.parent
    dry = subprocess.run(
        ["make", "-n", "-C", str(root), "run", "PORT=9000", "DATA_DIR=/tmp/k dir"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    (serve,) = [line for line in dry.stdout.splitlines() if "kandev serve" in line]
    assert serve.split() == [
        ".venv/bin/kandev",
        "serve",
        "--port",
        "'9000'",
        "--data-dir",
        "'/tmp/k",
        "dir'",
    ]
    plain = subprocess.run(
        ["make", "-n", "-C", str(root), "run"], capture_output=True, text=True, timeout=60
    )
    (serve,) = [line for line in plain.stdout.splitlines() if "kandev serve" in line]
    assert serve.split() == [".venv/bin/kandev", "serve"]  # KANDEV_PORT / KANDEV_HOME apply


def test_the_banner_says_auth_is_off(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path)
    try:
        wait_for_health(url, proc)
    finally:
        output = _stop(proc)
    assert f"MCP          {url}/mcp" in output
    assert "Auth         off" in output
