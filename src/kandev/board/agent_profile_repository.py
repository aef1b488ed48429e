"""SQL for agent profiles."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.models import AgentProfile
from kandev.db.integrity import unique_key
from kandev.db.tables import agent_profiles


async def insert_profile(conn: AsyncConnection, values: dict[str, Any]) -> None:
    """Raises DuplicateRow("agent_profiles.name") when the name is taken."""
    with unique_key("agent_profiles.name"):
        await conn.execute(insert(agent_profiles).values(**values))


async def get_profile(conn: AsyncConnection, profile_id: str) -> AgentProfile | None:
    row = (
        (await conn.execute(select(agent_profiles).where(agent_profiles.c.id == profile_id)))
        .mappings()
        .first()
    )
    return AgentProfile.from_row(row) if row else None


async def get_profile_by_name(conn: AsyncConnection, name: str) -> AgentProfile | None:
    row = (
        (await conn.execute(select(agent_profiles).where(agent_profiles.c.name == name)))
        .mappings()
        .first()
    )
    return AgentProfile.from_row(row) if row else None


async def list_profiles(conn: AsyncConnection) -> list[AgentProfile]:
    rows = (
        await conn.execute(
            select(agent_profiles).order_by(agent_profiles.c.created_at, agent_profiles.c.id)
        )
    ).mappings()
    return [AgentProfile.from_row(r) for r in rows]


async def update_profile(conn: AsyncConnection, profile_id: str, values: dict[str, Any]) -> None:
    await conn.execute(
        update(agent_profiles).where(agent_profiles.c.id == profile_id).values(**values)
    )


async def delete_profile(conn: AsyncConnection, profile_id: str) -> None:
    await conn.execute(delete(agent_profiles).where(agent_profiles.c.id == profile_id))
