"""Agent profiles: which command runs an ACP agent. The built-in `demo` profile always exists.

A profile decides what runs on this machine, so (CONTRACT §8):
- with auth on only admins create, change or delete profiles; members list and use them
  (internal callers and the synthetic auth-off identity may do everything);
- `env` values are write-only: responses mask them (`AgentProfile.to_json`), a PATCH that sends
  the mask for a key keeps the stored value; the orchestrator reads raw values through the
  repository;
- the command's program must exist when the command is set, so a typo is a 400 now instead of
  a FAILED session later.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from kandev.auth.identity import current_identity
from kandev.board import agent_profile_repository as repo
from kandev.board.inputs import AgentProfileCreate, AgentProfileUpdate
from kandev.board.models import ENV_VALUE_MASK, AgentProfile
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, DuplicateRow, Forbidden, NotFound, ValidationFailed
from kandev.ids import IdFactory

DEMO_PROFILE_NAME = "demo"
# Resolved at launch time to this installation's `kandev` (see the agent runtime).
DEMO_PROFILE_COMMAND = ["kandev", "demo-agent"]
PROFILE_NOT_FOUND = "agent profile not found"
ADMINS_ONLY = "only admins can create, change or delete agent profiles"


def require_profile_manager() -> None:
    """Members may list and use profiles; changing what runs takes an admin (auth on)."""
    identity = current_identity()
    if identity is None or identity.synthetic:  # internal work, or auth is off
        return
    if not identity.is_admin:
        raise Forbidden(ADMINS_ONLY)


def check_program(command: list[str], env: dict[str, str]) -> None:
    """The program `command[0]` must be runnable the way the agent runtime will run it.

    `kandev` is this installation (see `resolve_command`). A name is looked up on the PATH the
    agent gets (the profile's PATH, else the server's). A relative path is refused: agents run
    in their task's folder, so it would name a different file for every task.
    """
    if not command or not command[0]:
        raise ValidationFailed("command", "must name a program")
    program = command[0]
    if program == "kandev":
        return
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.isabs(program):
            raise ValidationFailed(
                "command",
                f"program {program!r} is a relative path; use an absolute path or a name on PATH",
            )
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ValidationFailed(
                "command", f"program {program!r} does not exist or is not executable"
            )
        return
    if shutil.which(program, path=env.get("PATH", os.environ.get("PATH", os.defpath))) is None:
        raise ValidationFailed("command", f"program {program!r} not found on PATH")


def merge_env(stored: dict[str, str], sent: dict[str, str]) -> dict[str, str]:
    """The new env of a PATCH: `sent` replaces the map; a masked value keeps the stored one."""
    merged: dict[str, str] = {}
    for key, value in sent.items():
        if value == ENV_VALUE_MASK:
            if key not in stored:
                raise ValidationFailed(
                    f"env.{key}", f"{ENV_VALUE_MASK!r} keeps a stored value; none is stored"
                )
            value = stored[key]
        merged[key] = value
    return merged


class AgentProfileService:
    def __init__(self, db: Database, clock: Clock, new_id: IdFactory) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id

    async def ensure_builtin_profiles(self) -> None:
        async with self.db.write() as conn:
            if await repo.get_profile_by_name(conn, DEMO_PROFILE_NAME) is None:
                await repo.insert_profile(
                    conn,
                    self._new_values(DEMO_PROFILE_NAME, DEMO_PROFILE_COMMAND, {}, builtin=True),
                )

    async def create_profile(self, data: AgentProfileCreate) -> AgentProfile:
        require_profile_manager()
        for key, value in data.env.items():
            if value == ENV_VALUE_MASK:
                raise ValidationFailed(
                    f"env.{key}", f"{ENV_VALUE_MASK!r} stands for a stored value; send the value"
                )
        check_program(data.command, data.env)
        values = self._new_values(data.name, data.command, data.env, builtin=False)
        values["permission_policy"] = data.permission_policy
        values["permission_allow"] = list(data.permission_allow)
        try:
            async with self.db.write() as conn:
                if await repo.get_profile_by_name(conn, data.name) is not None:
                    raise Conflict(f"name: an agent profile named {data.name!r} already exists")
                await repo.insert_profile(conn, values)
        except DuplicateRow:  # a concurrent create won the unique name
            raise Conflict(f"name: an agent profile named {data.name!r} already exists") from None
        return await self.get_profile(values["id"])

    async def list_profiles(self) -> list[AgentProfile]:
        async with self.db.read() as conn:
            return await repo.list_profiles(conn)

    async def get_profile(self, profile_id: str) -> AgentProfile:
        async with self.db.read() as conn:
            profile = await repo.get_profile(conn, profile_id)
        if profile is None:
            raise NotFound(PROFILE_NOT_FOUND)
        return profile

    async def update_profile(self, profile_id: str, data: AgentProfileUpdate) -> AgentProfile:
        require_profile_manager()
        changes = data.model_dump(exclude_none=True)
        async with self.db.write() as conn:
            profile = await repo.get_profile(conn, profile_id)
            if profile is None:
                raise NotFound(PROFILE_NOT_FOUND)
            if profile.is_builtin and changes:
                raise Conflict("the built-in profile cannot be changed")
            if "env" in changes:
                changes["env"] = merge_env(profile.env, changes["env"])
            new_env = changes.get("env", profile.env)
            if "command" in changes or new_env.get("PATH") != profile.env.get("PATH"):
                check_program(changes.get("command", profile.command), new_env)
            renamed = "name" in changes and changes["name"] != profile.name
            if renamed and await repo.get_profile_by_name(conn, changes["name"]) is not None:
                raise Conflict(f"name: an agent profile named {changes['name']!r} already exists")
            if changes:
                await repo.update_profile(
                    conn, profile_id, {**changes, "updated_at": self.clock.now()}
                )
        return await self.get_profile(profile_id)

    async def delete_profile(self, profile_id: str) -> None:
        require_profile_manager()
        async with self.db.write() as conn:
            profile = await repo.get_profile(conn, profile_id)
            if profile is None:
                raise NotFound(PROFILE_NOT_FOUND)
            if profile.is_builtin:
                raise Conflict("the built-in profile cannot be deleted")
            await repo.delete_profile(conn, profile_id)

    def _new_values(
        self, name: str, command: list[str], env: dict[str, str], *, builtin: bool
    ) -> dict[str, Any]:
        now = self.clock.now()
        return {
            "id": self.new_id(),
            "name": name,
            "command": list(command),
            "env": dict(env),
            "is_builtin": builtin,
            "created_at": now,
            "updated_at": now,
        }
