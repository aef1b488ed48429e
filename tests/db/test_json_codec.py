"""JSON columns are decoded by kandev.db.json_codec (pydantic's parser, json's as fallback)
on both databases, and everything json could have written reads back the same."""

from __future__ import annotations

from sqlalchemy import JSON, Column, Integer, MetaData, Table, insert, select

from kandev.db import json_codec
from kandev.db.engine import Database

VALUES = [
    {"status": "pending", "options": [{"id": "a", "n": 1, "x": 2.5, "ok": True, "none": None}]},
    {"text": "lone surrogate \ud800 and \ud83d alone", "é": "ünïcödé ✓"},  # json accepts these
    ["a", 1, -0.5, 12345678901234567890123],
]


def test_the_fallback_reads_what_pydantic_refuses() -> None:
    assert json_codec.loads('"\\ud800"') == "\ud800"
    assert json_codec.loads('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}


async def test_json_columns_round_trip_through_the_codec(db: Database) -> None:
    assert db.engine.dialect._json_deserializer is json_codec.loads  # type: ignore[attr-defined]
    table = Table(
        "json_codec_probe", MetaData(), Column("id", Integer, primary_key=True), Column("v", JSON)
    )
    async with db.write() as conn:
        await conn.run_sync(table.metadata.create_all)
        await conn.execute(insert(table), [{"id": i, "v": v} for i, v in enumerate(VALUES)])
    async with db.read() as conn:
        got = (await conn.execute(select(table.c.v).order_by(table.c.id))).scalars().all()
    assert got == VALUES
