"""Bundle rows: creating a bundle and reading its rows back.

A bundle is one `clarification_request` message per question, all sharing
`metadata.pending_id` (reference clarification-baseline §1.2). Every function here runs
inside the caller's transaction (`async with db.write() as conn` or `db.read()`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.task_repository import with_task_owner
from kandev.catalog.messages import (
    CLARIFICATION_TYPE,
    CONTEXT_KEY,
    PENDING,
    PENDING_ID_KEY,
    QUESTION_ID_KEY,
    QUESTION_INDEX_KEY,
    QUESTION_KEY,
    QUESTION_TOTAL_KEY,
    STATUS_KEY,
)
from kandev.clarification.predicates import (
    delivery_pending,
    is_pending,
    of_bundle,
    of_type,
    on_current_turn,
)
from kandev.db.direct import DirectStatement
from kandev.db.tables import task_session_messages as messages
from kandev.sessions.models import Message

_ORDER = (messages.c.created_at, messages.c.id)


async def select_messages(conn: AsyncConnection, query: Select[Any]) -> list[Message]:
    """The query's rows as Messages in (created_at, id) order."""
    rows = (await conn.execute(query.order_by(*_ORDER))).mappings().all()
    return [Message.from_row(row) for row in rows]


def _question_record(question: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": question["id"],
        "title": question.get("title", ""),
        "prompt": question["prompt"],
        "options": [
            {
                "option_id": option["option_id"],
                "label": option.get("label", ""),
                "description": option.get("description", ""),
            }
            for option in question.get("options", [])
        ],
    }


async def insert_bundle(
    conn: AsyncConnection,
    *,
    pending_id: str,
    session_id: str,
    task_id: str,
    turn_id: str,
    questions: list[dict[str, Any]],
    context: str,
    now: datetime,
    new_id: Callable[[], str],
) -> list[Message]:
    """One pending row per question (§2.5), in one statement; questions are validated.

    Row i is stamped `now + i µs` so question order is also (created_at, id) order,
    whatever the id factory yields.
    """
    if not questions:
        raise ValueError("a clarification bundle needs at least one question")
    total = len(questions)
    values = []
    for index, question in enumerate(questions):
        record = _question_record(question)
        created = now + timedelta(microseconds=index)
        values.append(
            {
                "id": new_id(),
                "session_id": session_id,
                "task_id": task_id,
                "turn_id": turn_id,
                "author_type": "agent",
                "author_id": "",
                "type": CLARIFICATION_TYPE,
                "content": record["prompt"],
                "requests_input": index == total - 1,
                "metadata": {
                    PENDING_ID_KEY: pending_id,
                    QUESTION_ID_KEY: record["id"],
                    QUESTION_KEY: record,
                    QUESTION_INDEX_KEY: index,
                    QUESTION_TOTAL_KEY: total,
                    CONTEXT_KEY: context,
                    STATUS_KEY: PENDING,
                },
                "created_at": created,
                "updated_at": created,
            }
        )
    await conn.execute(insert(messages), values)
    return [Message.from_row(v) for v in values]


_BUNDLE = DirectStatement(
    select(messages).where(of_bundle(bindparam("pending_id"))).order_by(*_ORDER)
)


async def find_bundle_messages(conn: AsyncConnection, pending_id: str) -> list[Message]:
    """Every row of the bundle, whatever its state."""
    rows = await _BUNDLE.rows(conn, {"pending_id": pending_id})
    return [Message.from_row(row) for row in rows]


@functools.cache
def _authorizable_bundle_statement() -> DirectStatement:
    joined, owner_columns = with_task_owner(messages, messages.c.task_id)
    return DirectStatement(
        select(messages, *owner_columns)
        .select_from(joined)
        .where(of_bundle(bindparam("pending_id")))
        .order_by(*_ORDER)
    )


async def find_bundle_authorizable(
    conn: AsyncConnection, pending_id: str
) -> tuple[list[Message], dict[str, Mapping[Any, Any]]]:
    """`find_bundle_messages`, with the row the access rules authorize each named task from
    (board.task_repository.with_task_owner), read by the same statement (built once)."""
    rows = await _authorizable_bundle_statement().rows(conn, {"pending_id": pending_id})
    return authorizable(rows)


def authorizable(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[list[Message], dict[str, Mapping[Any, Any]]]:
    """A bundle's rows read with `with_task_owner`'s columns: the messages, and per task
    they name the row that authorizes it."""
    tasks_by_id = {row["task_id"]: row for row in rows if row["task_id"]}
    return [Message.from_row(row) for row in rows], tasks_by_id


async def find_active_messages(conn: AsyncConnection, session_id: str) -> list[Message]:
    """Pending rows of the session on its current turn; the session's state is not read
    (the workflow guard and expiry discovery want them even while it ends, §1.5)."""
    return await select_messages(
        conn,
        select(messages).where(
            messages.c.session_id == session_id,
            of_type(CLARIFICATION_TYPE),
            is_pending(),
            on_current_turn(session_id=session_id),
        ),
    )


async def find_delivery_intent_messages(conn: AsyncConnection, pending_id: str) -> list[Message]:
    """The bundle's rows that still carry a delivery intent (claimed, not yet handed over)."""
    return await select_messages(
        conn, select(messages).where(of_bundle(pending_id), delivery_pending())
    )
