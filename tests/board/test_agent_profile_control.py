"""Agent profiles under control (CONTRACT §8), over a real uvicorn on both databases: only admins
change what runs, env values are write-only, and a command must name a program that exists."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from kandev.board import agent_profile_repository
from kandev.clock import ManualClock
from kandev.db.engine import Database

PASSWORD = "correct horse battery"
MASK = "********"
SECRET = "sk-very-secret-value-42"
FORBIDDEN = {"error": "only admins can create, change or delete agent profiles"}
PROFILES = "/api/v1/agent-profiles"


@pytest.fixture
async def raw_db(database_url: str) -> AsyncIterator[Database]:
    """The server's database, read the way the orchestrator reads it (raw env values)."""
    db = Database(database_url)
    yield db
    await db.dispose()


async def raw_profile(db: Database, profile_id: str) -> Any:
    async with db.read() as conn:
        return await agent_profile_repository.get_profile(conn, profile_id)


@pytest.fixture
async def admin_and_member(
    live_server_factory: Callable[..., Any], database_url: str, clock: ManualClock
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """(admin, member) clients of a server with auth on, each with its own session cookie."""
    server = live_server_factory(database_url, clock=clock, auth=True)
    admin = httpx.AsyncClient(base_url=server.url, timeout=30)
    member = httpx.AsyncClient(base_url=server.url, timeout=30)
    async with admin, member:
        r = await admin.post(
            "/api/v1/auth/setup", json={"email": "admin@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        r = await admin.post(
            "/api/v1/users",
            json={"email": "member@example.com", "password": PASSWORD, "role": "member"},
        )
        assert r.status_code == 201, r.text
        r = await member.post(
            "/api/v1/auth/login", json={"email": "member@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        yield admin, member


def profile_body(name: str = "agent", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": [sys.executable, "-m", "an_agent"], **extra}


async def test_members_cannot_change_profiles_and_nothing_changes(
    admin_and_member: tuple[httpx.AsyncClient, httpx.AsyncClient], raw_db: Database
) -> None:
    admin, member = admin_and_member
    r = await admin.post(PROFILES, json=profile_body(env={"API_KEY": SECRET}))
    assert r.status_code == 201, r.text
    profile = r.json()
    before = (await admin.get(PROFILES)).json()
    stored_before = await raw_profile(raw_db, profile["id"])

    r = await member.post(PROFILES, json=profile_body("mine"))
    assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = await member.patch(
        f"{PROFILES}/{profile['id']}", json={"command": ["kandev", "demo-agent"]}
    )
    assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = await member.patch(f"{PROFILES}/{profile['id']}", json={"env": {}})
    assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = await member.delete(f"{PROFILES}/{profile['id']}")
    assert (r.status_code, r.json()) == (403, FORBIDDEN)

    assert (await admin.get(PROFILES)).json() == before
    assert await raw_profile(raw_db, profile["id"]) == stored_before
    # Members list and read them (to start sessions with them), masked like everyone else.
    listed = (await member.get(PROFILES)).json()
    assert listed == before and [p["name"] for p in listed["agent_profiles"]] == ["demo", "agent"]
    r = await member.get(f"{PROFILES}/{profile['id']}")
    assert r.status_code == 200 and r.json()["env"] == {"API_KEY": MASK}


async def test_admins_create_update_delete(
    admin_and_member: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    admin, _ = admin_and_member
    r = await admin.post(PROFILES, json=profile_body())
    assert r.status_code == 201, r.text
    profile_id = r.json()["id"]
    r = await admin.patch(f"{PROFILES}/{profile_id}", json={"name": "renamed"})
    assert r.status_code == 200 and r.json()["name"] == "renamed"
    assert (await admin.delete(f"{PROFILES}/{profile_id}")).status_code == 204
    assert (await admin.get(f"{PROFILES}/{profile_id}")).status_code == 404


async def test_env_values_are_write_only(
    admin_and_member: tuple[httpx.AsyncClient, httpx.AsyncClient], raw_db: Database
) -> None:
    admin, member = admin_and_member
    env = {"API_KEY": SECRET, "REGION": "eu-west-1"}
    created = await admin.post(PROFILES, json=profile_body(env=env))
    assert created.status_code == 201, created.text
    profile_id = created.json()["id"]
    responses = [
        created,
        await admin.get(PROFILES),
        await admin.get(f"{PROFILES}/{profile_id}"),
        await member.get(PROFILES),
        await member.get(f"{PROFILES}/{profile_id}"),
        await admin.patch(f"{PROFILES}/{profile_id}", json={"name": "still secret"}),
    ]
    for response in responses:
        assert response.status_code in (200, 201), response.text
        assert SECRET not in response.text and "eu-west-1" not in response.text
    assert created.json()["env"] == {"API_KEY": MASK, "REGION": MASK}
    assert (await raw_profile(raw_db, profile_id)).env == env  # what the orchestrator launches

    # PATCH env: the sent map replaces the stored one; the mask keeps a stored value.
    r = await admin.patch(
        f"{PROFILES}/{profile_id}", json={"env": {"API_KEY": MASK, "NEW": "new-value"}}
    )
    assert r.status_code == 200, r.text
    assert r.json()["env"] == {"API_KEY": MASK, "NEW": MASK}
    assert "new-value" not in r.text and SECRET not in r.text
    assert (await raw_profile(raw_db, profile_id)).env == {"API_KEY": SECRET, "NEW": "new-value"}

    # Sending back exactly what GET shows changes nothing.
    shown = (await admin.get(f"{PROFILES}/{profile_id}")).json()
    r = await admin.patch(f"{PROFILES}/{profile_id}", json={"env": shown["env"]})
    assert r.status_code == 200, r.text
    assert (await raw_profile(raw_db, profile_id)).env == {"API_KEY": SECRET, "NEW": "new-value"}

    # The mask can only keep what exists, and a new profile has nothing stored.
    r = await admin.patch(f"{PROFILES}/{profile_id}", json={"env": {"GHOST": MASK}})
    assert r.status_code == 400 and r.json()["error"].startswith("env.GHOST:")
    r = await admin.post(PROFILES, json=profile_body("copy", env={"API_KEY": MASK}))
    assert r.status_code == 400 and r.json()["error"].startswith("env.API_KEY:")

    r = await admin.patch(f"{PROFILES}/{profile_id}", json={"env": {}})
    assert r.status_code == 200 and r.json()["env"] == {}
    assert (await raw_profile(raw_db, profile_id)).env == {}


async def test_the_program_must_exist(
    admin_and_member: tuple[httpx.AsyncClient, httpx.AsyncClient], tmp_path: Path
) -> None:
    admin, _ = admin_and_member
    before = (await admin.get(PROFILES)).json()
    not_executable = tmp_path / "not-executable"
    not_executable.write_text("#!/bin/sh\n")
    cases = [
        (
            ["definitely-not-an-agent-xyz", "--acp"],
            "command: program 'definitely-not-an-agent-xyz' not found on PATH",
        ),
        (
            [str(tmp_path / "missing")],
            f"command: program '{tmp_path / 'missing'}' does not exist or is not executable",
        ),
        (
            [str(not_executable)],
            f"command: program '{not_executable}' does not exist or is not executable",
        ),
        (
            ["./agent"],
            "command: program './agent' is a relative path; use an absolute path or a name on PATH",
        ),
    ]
    for command, error in cases:
        r = await admin.post(PROFILES, json={"name": "ghost", "command": command})
        assert (r.status_code, r.json()) == (400, {"error": error}), command
    r = await admin.post(PROFILES, json={"name": "ghost", "command": []})
    assert r.status_code == 400 and r.json()["error"].startswith("command:")
    assert (await admin.get(PROFILES)).json() == before

    # The PATH the agent will get is the one searched.
    tool_dir = tmp_path / "bin"
    tool_dir.mkdir()
    tool = tool_dir / "my-agent"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    r = await admin.post(PROFILES, json={"name": "mine", "command": ["my-agent"]})
    assert r.status_code == 400
    r = await admin.post(
        PROFILES,
        json={"name": "mine", "command": ["my-agent"], "env": {"PATH": str(tool_dir)}},
    )
    assert r.status_code == 201, r.text
    profile_id = r.json()["id"]

    # An update is checked when it changes the command (or the PATH it is looked up on).
    for change in (
        {"command": ["definitely-not-an-agent-xyz"]},
        {"env": {"PATH": os.defpath}},
    ):
        r = await admin.patch(f"{PROFILES}/{profile_id}", json=change)
        assert r.status_code == 400 and r.json()["error"].startswith("command: program"), change
    r = await admin.patch(f"{PROFILES}/{profile_id}", json={"command": ["kandev", "demo-agent"]})
    assert r.status_code == 200 and r.json()["command"] == ["kandev", "demo-agent"]


async def test_auth_off_may_do_everything(live_server_factory, database_url: str) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        r = await client.post(PROFILES, json=profile_body(env={"K": SECRET}))
        assert r.status_code == 201 and r.json()["env"] == {"K": MASK}
        profile_id = r.json()["id"]
        r = await client.patch(f"{PROFILES}/{profile_id}", json={"env": {"K": MASK}})
        assert r.status_code == 200 and SECRET not in r.text
        assert (await client.delete(f"{PROFILES}/{profile_id}")).status_code == 204
