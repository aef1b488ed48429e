"""DirectStatement: the same rows, errors, transactions and events as `conn.execute`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from kandev.db.direct import MAX_SHAPES, DirectStatement
from kandev.db.engine import Database
from kandev.db.sql_literals import constant
from kandev.db.tables import agent_profiles as profiles
from tests.statement_counter import StatementCounter

WHEN = datetime(2026, 12, 2, 1, 2, 3, 456789, tzinfo=UTC)
_INSERT = DirectStatement(insert(profiles))
_RENAME = DirectStatement(
    update(profiles)
    .where(profiles.c.id == bindparam("ws_id"), profiles.c.name != constant("frozen"))
    .values(
        name=bindparam("new_name"), updated_at=bindparam("now", type_=profiles.c.updated_at.type)
    )
    .returning(*profiles.c)
)
_TOUCH = DirectStatement(
    update(profiles)
    .where(profiles.c.name == bindparam("name"))
    .values(updated_at=bindparam("now", type_=profiles.c.updated_at.type))
)
_SUMMARY = select(
    profiles.c.id.label("ws"),
    func.count().over().label("n"),
    profiles.c.created_at,
    profiles.c.env,
    profiles.c.is_builtin,
).order_by(profiles.c.id)


def _row(ws_id: str, name: str) -> dict[str, object]:
    return {
        "id": ws_id,
        "name": name,
        "command": ["agent", "--acp"],
        "env": {"A": "1", "nested": {"b": None}},
        "is_builtin": False,
        "permission_policy": "ask",
        "permission_allow": [],
        "created_at": WHEN,
        "updated_at": WHEN,
    }


async def test_rows_equal_what_sqlalchemy_returns(db: Database) -> None:
    async with db.write() as conn:
        await _INSERT.run(conn, _row("w1", "one"))
        await _INSERT.run(conn, _row("w2", "two"))
    async with db.read() as conn:
        expected = [dict(r) for r in (await conn.execute(_SUMMARY)).mappings()]
        got = await DirectStatement(_SUMMARY).rows(conn)
    assert got == expected
    assert got[0]["created_at"] == WHEN and got[0]["created_at"].tzinfo is not None
    assert got[0]["env"] == {"A": "1", "nested": {"b": None}} and got[0]["is_builtin"] is False
    assert [r["ws"] for r in got] == ["w1", "w2"] and got[0]["n"] == 2


async def test_returning_rowcount_and_literal_guard(db: Database) -> None:
    async with db.write() as conn:
        await _INSERT.run(conn, _row("w1", "one"))
        await _INSERT.run(conn, _row("w2", "frozen"))
        later = WHEN.replace(year=2027)
        row = await _RENAME.first(conn, {"ws_id": "w1", "new_name": "uno", "now": later})
        assert row is not None and row["name"] == "uno" and row["updated_at"] == later
        assert await _RENAME.first(conn, {"ws_id": "w2", "new_name": "x", "now": later}) is None
        assert await _TOUCH.run(conn, {"name": "frozen", "now": later}) == 1
        assert await _TOUCH.run(conn, {"name": "nobody", "now": later}) == 0
        assert await DirectStatement(select(func.count()).select_from(profiles)).scalar(conn) == 2


async def test_a_direct_first_statement_is_inside_the_transaction(db: Database) -> None:
    """On PostgreSQL the adapter starts its transaction lazily: a direct statement that comes
    first must start it, or a rollback would not undo it."""
    with pytest.raises(RuntimeError):
        async with db.write() as conn:
            await _INSERT.run(conn, _row("w1", "one"))
            raise RuntimeError("boom")
    async with db.write() as conn:
        await _INSERT.run(conn, _row("w2", "two"))
        await conn.execute(update(profiles).values(permission_policy="deny"))
    async with db.read() as conn:
        rows = (await conn.execute(select(profiles.c.id, profiles.c.permission_policy))).all()
    assert [tuple(r) for r in rows] == [("w2", "deny")]


async def test_driver_errors_are_sqlalchemys(db: Database) -> None:
    async with db.write() as conn:
        await _INSERT.run(conn, _row("w1", "one"))
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await _INSERT.run(conn, _row("w1", "one"))
    async with db.read() as conn:
        names = (await conn.execute(select(profiles.c.name))).scalars().all()
    assert names == ["one"]


async def test_statement_counters_see_direct_statements(db: Database) -> None:
    counter = StatementCounter(db)
    try:
        with counter.counting():
            async with db.write() as conn:
                await _INSERT.run(conn, _row("w1", "one"))
                await _TOUCH.run(conn, {"name": "one", "now": WHEN})
    finally:
        counter.close()
    assert counter.transactions == 1
    assert [s.split()[0] for s in counter.statements] == ["INSERT", "UPDATE"]


async def test_in_lists_of_any_length(db: Database) -> None:
    """One compiled shape per list length (SQLAlchemy renders one parameter per item)."""
    by_ids = DirectStatement(
        select(profiles.c.id).where(profiles.c.id.in_(bindparam("ids", expanding=True)))
    )
    fixed = DirectStatement(select(profiles.c.id).where(profiles.c.id.in_(["w2", "w3"])))
    async with db.write() as conn:
        for ws_id in ("w1", "w2", "w3"):
            await _INSERT.run(conn, _row(ws_id, ws_id))
        for ids in (["w1"], ["w3", "w1", "nobody"], [], ["w2"] * 2):
            got = sorted(r["id"] for r in await by_ids.rows(conn, {"ids": ids}))
            assert got == sorted(set(ids) - {"nobody"})
        assert sorted(r["id"] for r in await fixed.rows(conn)) == ["w2", "w3"]
        with pytest.raises(KeyError, match="ids"):
            await by_ids.rows(conn)
        for n in range(MAX_SHAPES + 10):  # every length its own shape, the cache bounded
            assert len(await by_ids.rows(conn, {"ids": ["w1"] * n})) == min(n, 1)
        assert len(by_ids._compiled) <= MAX_SHAPES


async def test_value_dependent_statements_are_refused(db: Database) -> None:
    rendered = DirectStatement(
        select(profiles).where(profiles.c.name == bindparam("n", "x", literal_execute=True))
    )
    partial_insert = DirectStatement(insert(profiles))
    clashing = DirectStatement(select(profiles.c.id, profiles.c.name.label("id")))
    async with db.read() as conn:
        with pytest.raises(TypeError, match="render a value"):
            await rendered.rows(conn)
        with pytest.raises(TypeError, match="distinct result column names"):
            await clashing.rows(conn)
    async with db.write() as conn:
        with pytest.raises(IntegrityError):  # a NOT NULL column left out: the database says so
            await partial_insert.run(conn, {"id": "w9"})
