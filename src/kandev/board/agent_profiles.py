"""Agent profiles: which command runs an ACP agent. The built-in `demo` profile always exists."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError

from kandev.board import agent_profile_repository as repo
from kandev.board.inputs import AgentProfileCreate, AgentProfileUpdate
from kandev.board.models import AgentProfile
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, NotFound
from kandev.ids import IdFactory

DEMO_PROFILE_NAME = "demo"
# Resolved at launch time to this installation's `kandev` (see the agent runtime).
DEMO_PROFILE_COMMAND = ["kandev", "demo-agent"]
PROFILE_NOT_FOUND = "agent profile not found"


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
        values = self._new_values(data.name, data.command, data.env, builtin=False)
        try:
            async with self.db.write() as conn:
                if await repo.get_profile_by_name(conn, data.name) is not None:
                    raise Conflict(f"name: an agent profile named {data.name!r} already exists")
                await repo.insert_profile(conn, values)
        except IntegrityError:  # a concurrent create won the unique name
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
        changes = data.model_dump(exclude_none=True)
        async with self.db.write() as conn:
            profile = await repo.get_profile(conn, profile_id)
            if profile is None:
                raise NotFound(PROFILE_NOT_FOUND)
            if profile.is_builtin and changes:
                raise Conflict("the built-in profile cannot be changed")
            renamed = "name" in changes and changes["name"] != profile.name
            if renamed and await repo.get_profile_by_name(conn, changes["name"]) is not None:
                raise Conflict(f"name: an agent profile named {changes['name']!r} already exists")
            if changes:
                await repo.update_profile(
                    conn, profile_id, {**changes, "updated_at": self.clock.now()}
                )
        return await self.get_profile(profile_id)

    async def delete_profile(self, profile_id: str) -> None:
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
