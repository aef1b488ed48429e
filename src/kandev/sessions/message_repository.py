"""SQL for session messages and queued prompts."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Select, and_, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog import messages as kinds
from kandev.db.direct import DirectStatement
from kandev.db.json_sql import json_key_text, json_set_keys, json_text
from kandev.db.sql_literals import constant
from kandev.db.tables import queued_prompts
from kandev.db.tables import task_session_messages as messages
from kandev.sessions.models import Message

# Built once: the values go in as parameters, so each insert skips building a statement.
_INSERT = DirectStatement(insert(messages))


async def insert_message(conn: AsyncConnection, values: dict[str, Any]) -> Message:
    row = {"author_id": "", "requests_input": False, "metadata": {}, **values}
    row.setdefault("updated_at", row["created_at"])
    await _INSERT.run(conn, row)
    return Message.from_row(row)


async def get_message(conn: AsyncConnection, message_id: str) -> Message | None:
    row = (
        (await conn.execute(select(messages).where(messages.c.id == message_id))).mappings().first()
    )
    return Message.from_row(row) if row else None


async def update_message(
    conn: AsyncConnection, message_id: str, *, content: str, metadata: dict[str, Any], now: datetime
) -> None:
    await conn.execute(
        update(messages)
        .where(messages.c.id == message_id)
        .values(content=content, metadata=metadata, updated_at=now)
    )


async def interrupt_open_tool_calls(
    conn: AsyncConnection, session_ids: list[str] | Select[Any], now: datetime
) -> list[Message]:
    """The tool calls still open in these sessions (ids, or a query of them) become
    INTERRUPTED — their agent is gone, nobody will finish them; the rows changed, as now."""
    status = json_text(messages.c.metadata, kinds.STATUS_KEY)
    rows = await conn.execute(
        update(messages)
        .where(
            messages.c.session_id.in_(session_ids),
            messages.c.type == constant(kinds.TOOL_CALL_TYPE),
            status.in_([constant(s) for s in kinds.TOOL_CALL_OPEN_STATUSES]),
        )
        .values(
            metadata=json_set_keys(messages.c.metadata, {kinds.STATUS_KEY: kinds.INTERRUPTED}),
            updated_at=now,
        )
        .returning(*messages.c)
    )
    return [Message.from_row(row) for row in rows.mappings()]


async def find_message_by_key(
    conn: AsyncConnection, session_id: str, turn_id: str, key: str
) -> Message | None:
    """The message of this turn that streams under `key` (tool_call_id, 'plan', …)."""
    row = (
        (
            await conn.execute(
                select(messages)
                .where(
                    messages.c.session_id == session_id,
                    messages.c.turn_id == turn_id,
                    json_key_text(messages.c.metadata, "stream_key") == key,
                )
                .order_by(messages.c.created_at.desc(), messages.c.id.desc())
                .limit(1)
            )
        )
        .mappings()
        .first()
    )
    return Message.from_row(row) if row else None


async def page_messages(
    conn: AsyncConnection,
    session_id: str,
    *,
    limit: int,
    before: Message | None,
    after: Message | None,
    sort: Literal["asc", "desc"],
) -> tuple[list[Message], bool]:
    """Keyset pagination on (created_at, id); returns one page and whether more follow."""
    where = [messages.c.session_id == session_id]
    for anchor, newer in ((after, True), (before, False)):
        if anchor is None:
            continue
        ts, mid = messages.c.created_at, messages.c.id
        if newer:
            where.append(
                or_(ts > anchor.created_at, and_(ts == anchor.created_at, mid > anchor.id))
            )
        else:
            where.append(
                or_(ts < anchor.created_at, and_(ts == anchor.created_at, mid < anchor.id))
            )
    order = (
        (messages.c.created_at.asc(), messages.c.id.asc())
        if sort == "asc"
        else (messages.c.created_at.desc(), messages.c.id.desc())
    )
    rows = (
        (await conn.execute(select(messages).where(*where).order_by(*order).limit(limit + 1)))
        .mappings()
        .all()
    )
    return [Message.from_row(r) for r in rows[:limit]], len(rows) > limit


async def count_messages(conn: AsyncConnection, session_id: str) -> int:
    return (
        await conn.execute(
            select(func.count()).select_from(messages).where(messages.c.session_id == session_id)
        )
    ).scalar_one()


# --- queued prompts ---------------------------------------------------------------------


async def enqueue_prompt(conn: AsyncConnection, values: dict[str, Any]) -> None:
    position = (
        await conn.execute(
            select(func.coalesce(func.max(queued_prompts.c.position), -1) + 1).where(
                queued_prompts.c.session_id == values["session_id"]
            )
        )
    ).scalar_one()
    await conn.execute(insert(queued_prompts).values(position=position, **values))


async def pop_next_prompt(conn: AsyncConnection, session_id: str) -> dict[str, Any] | None:
    row = (
        (
            await conn.execute(
                select(queued_prompts)
                .where(queued_prompts.c.session_id == session_id)
                .order_by(queued_prompts.c.position, queued_prompts.c.id)
                .limit(1)
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    await conn.execute(delete(queued_prompts).where(queued_prompts.c.id == row["id"]))
    return dict(row)


async def count_queued(conn: AsyncConnection, session_id: str) -> int:
    return (
        await conn.execute(
            select(func.count())
            .select_from(queued_prompts)
            .where(queued_prompts.c.session_id == session_id)
        )
    ).scalar_one()


async def clear_queue(conn: AsyncConnection, session_id: str) -> None:
    await conn.execute(delete(queued_prompts).where(queued_prompts.c.session_id == session_id))
