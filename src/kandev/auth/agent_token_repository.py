"""SQL for per-session agent tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.tables import agent_tokens, task_sessions, tasks, users, workspaces


async def insert_agent_token(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(insert(agent_tokens).values(**values))


async def resolve_agent_token(conn: AsyncConnection, token_sha256: str) -> RowMapping | None:
    """The live token with its session, task and workspace owner (outer joins: may dangle)."""
    query = (
        select(
            agent_tokens.c.id,
            agent_tokens.c.session_id,
            task_sessions.c.task_id,
            task_sessions.c.state.label("session_state"),
            tasks.c.workspace_id,
            workspaces.c.id.label("workspace_row_id"),
            workspaces.c.owner_id,
            users.c.status.label("owner_status"),
            users.c.role.label("owner_role"),
        )
        .select_from(
            agent_tokens.join(task_sessions, task_sessions.c.id == agent_tokens.c.session_id)
            .outerjoin(tasks, tasks.c.id == task_sessions.c.task_id)
            .outerjoin(workspaces, workspaces.c.id == tasks.c.workspace_id)
            .outerjoin(users, users.c.id == workspaces.c.owner_id)
        )
        .where(agent_tokens.c.token_sha256 == token_sha256, agent_tokens.c.revoked_at.is_(None))
    )
    return (await conn.execute(query)).mappings().first()


async def revoke_session_tokens(conn: AsyncConnection, session_id: str, now: datetime) -> list[str]:
    """Revoke the session's live tokens; their SHA-256 digests."""
    result = await conn.execute(
        update(agent_tokens)
        .where(agent_tokens.c.session_id == session_id, agent_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
        .returning(agent_tokens.c.token_sha256)
    )
    return list(result.scalars().all())
