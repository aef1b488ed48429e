"""`kandev user create` / `kandev token create`, offline against a SQLite data dir."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kandev.cli_admin import token_app, user_app

PASSWORD = "cli-password-1"
# Keep the developer's own configuration out of the test.
CLEAN_ENV = {
    "KANDEV_HOME": None,
    "KANDEV_DATABASE_URL": None,
    "KANDEV_USER_PASSWORD": None,
    "KANDEV_AUTH": None,
}


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(user_app, name="user")
    app.add_typer(token_app, name="token")
    return app


@pytest.fixture
def run(cli: typer.Typer, tmp_path: Path):
    runner = CliRunner()

    def _run(*args: str, input: str | None = None, env: dict | None = None):
        return runner.invoke(
            cli,
            [*args, "--data-dir", str(tmp_path / "home")],
            input=input,
            env={**CLEAN_ENV, **(env or {})},
        )

    return _run


def db_rows(tmp_path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp_path / "home" / "kandev.db") as conn:
        return conn.execute(sql).fetchall()


def test_first_admin_then_token(run, tmp_path: Path) -> None:
    created = run(
        "user", "create", "--email", "Root@Example.com", "--password", PASSWORD, "--admin"
    )
    assert created.exit_code == 0, created.output
    assert "admin" in created.output and "root@example.com" in created.output
    # The first admin is the promoted default user, with a local identity and no session.
    assert db_rows(tmp_path, "SELECT id, role FROM users") == [("default-user", "admin")]
    assert len(db_rows(tmp_path, "SELECT id FROM auth_identities")) == 1
    assert db_rows(tmp_path, "SELECT id FROM auth_sessions") == []

    minted = run("token", "create", "--email", "root@example.com", "--name", "ci")
    assert minted.exit_code == 0, minted.output
    (raw,) = re.findall(r"kandev_pat_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", minted.stdout)
    stored = db_rows(tmp_path, "SELECT name, token_sha256, expires_at FROM auth_api_tokens")
    assert stored == [("ci", hashlib.sha256(raw.encode()).hexdigest(), None)]


def test_token_ttl_is_stored(run, tmp_path: Path) -> None:
    assert run("user", "create", "--email", "a@example.com", "--password", PASSWORD).exit_code == 0
    minted = run("token", "create", "--email", "a@example.com", "--ttl-hours", "24")
    assert minted.exit_code == 0, minted.output
    ((expires_at,),) = db_rows(tmp_path, "SELECT expires_at FROM auth_api_tokens")
    assert expires_at is not None


def test_unknown_email_fails_clearly(run) -> None:
    assert run("user", "create", "--email", "a@example.com", "--password", PASSWORD).exit_code == 0
    result = run("token", "create", "--email", "ghost@example.com")
    assert result.exit_code != 0
    assert "no active user with email 'ghost@example.com'" in result.output
    assert "kandev_pat_" not in result.output


def test_password_from_env_and_prompt(run, tmp_path: Path) -> None:
    from_env = run(
        "user", "create", "--email", "env@example.com", env={"KANDEV_USER_PASSWORD": PASSWORD}
    )
    assert from_env.exit_code == 0, from_env.output
    prompted = run(
        "user",
        "create",
        "--email",
        "tty@example.com",
        "--role",
        "member",
        input=f"{PASSWORD}\n{PASSWORD}\n",
    )
    assert prompted.exit_code == 0, prompted.output
    assert PASSWORD not in prompted.output  # the prompt hides what is typed
    emails = {row[0] for row in db_rows(tmp_path, "SELECT email FROM users")}
    assert {"env@example.com", "tty@example.com"} <= emails


def test_no_password_to_read_is_one_line_and_creates_nothing(run, tmp_path: Path) -> None:
    """An empty pipe where the prompt reads the password (`echo | kandev user create …`)."""
    result = run("user", "create", "--email", "late@example.com", input="")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: no password entered (give --password or KANDEV_USER_PASSWORD); nothing was created"
    )
    assert "Traceback" not in result.output
    assert not (tmp_path / "home" / "kandev.db").exists()


def test_rejections_exit_nonzero_with_the_reason(run) -> None:
    short = run("user", "create", "--email", "a@example.com", "--password", "short")
    assert short.exit_code == 1
    assert "password: must be at least 8 characters" in short.output
    bad_role = run(
        "user", "create", "--email", "a@example.com", "--password", PASSWORD, "--role", "owner"
    )
    assert bad_role.exit_code == 1 and "role" in bad_role.output
    assert run("user", "create", "--email", "a@example.com", "--password", PASSWORD).exit_code == 0
    again = run("user", "create", "--email", "A@example.com", "--password", PASSWORD)
    assert again.exit_code == 1 and "email already registered" in again.output
    bad_ttl = run("token", "create", "--email", "a@example.com", "--ttl-hours", "-5")
    assert bad_ttl.exit_code == 1 and "ttl_hours" in bad_ttl.output
