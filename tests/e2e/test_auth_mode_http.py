"""The auth mode follows the database, and a bad credential is told apart from none (real
uvicorn, both databases)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import typer
from typer.testing import CliRunner

from kandev.cli_admin import token_app, user_app

PASSWORD = "offline-admin-password"
CLEAN_ENV = {"KANDEV_HOME": None, "KANDEV_DATABASE_URL": None, "KANDEV_AUTH": None}


def offline(*args: str) -> Any:
    cli = typer.Typer()
    cli.add_typer(user_app, name="user")
    cli.add_typer(token_app, name="token")
    return CliRunner().invoke(cli, list(args), env=CLEAN_ENV)


async def test_offline_first_admin_ends_setup_without_restart(
    live_server_factory: Callable[..., Any], database_url: str, tmp_path
) -> None:
    server = live_server_factory(database_url, auth=True)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        assert (await client.get("/api/v1/auth/me")).json()["mode"] == "setup"
        created = await anyio.to_thread.run_sync(
            lambda: offline(
                "user",
                "create",
                "--email",
                "root@example.com",
                "--password",
                PASSWORD,
                "--admin",
                "--data-dir",
                str(tmp_path / "offline-home"),
                "--database-url",
                database_url,
            )
        )
        assert created.exit_code == 0, created.output
        me = (await client.get("/api/v1/auth/me")).json()
        assert (me["mode"], me["authenticated"]) == ("enabled", False)
        # Setup is over for the running server too, and the offline admin can sign in.
        r = await client.post(
            "/api/v1/auth/setup", json={"email": "late@example.com", "password": PASSWORD}
        )
        assert r.status_code == 409
        r = await client.post(
            "/api/v1/auth/login", json={"email": "root@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        assert (await client.get("/api/v1/auth/me")).json()["authenticated"] is True


async def test_invalid_credentials_are_told_apart_from_missing_ones(
    live_server_factory: Callable[..., Any], database_url: str
) -> None:
    server = live_server_factory(database_url, auth=True)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as admin:
        r = await admin.post(
            "/api/v1/auth/setup", json={"email": "admin@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200
        token = (await admin.post("/api/v1/auth/tokens", json={"name": "t"})).json()
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as script:
            missing = await script.get("/api/v1/workspaces")
            assert (missing.status_code, missing.json()) == (
                401,
                {"error": "authentication required"},
            )
            assert missing.headers["www-authenticate"] == "Bearer"
            good = {"Authorization": f"Bearer {token['token']}"}
            assert (await script.get("/api/v1/workspaces", headers=good)).status_code == 200
            deleted = await admin.delete(f"/api/v1/auth/tokens/{token['record']['id']}")
            assert deleted.status_code == 204
            for headers in (
                good,  # revoked
                {"Authorization": "Bearer kandev_pat_deadbeef_" + "x" * 43},  # never issued
                {"Cookie": "kandev_session=stale-or-forged"},
            ):
                r = await script.get("/api/v1/workspaces", headers=headers)
                assert (r.status_code, r.json()) == (
                    401,
                    {"error": "invalid or expired credentials"},
                ), headers
                assert r.headers["www-authenticate"] == "Bearer"
            # A stale credential does not stand in the way of the public routes.
            r = await script.get("/api/v1/auth/me", headers=good)
            assert (r.status_code, r.json()["authenticated"]) == (200, False)
