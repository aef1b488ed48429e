"""JSON-in-SQL helpers that read the same on SQLite (JSON text) and PostgreSQL (JSONB)."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Text, cast, func
from sqlalchemy.sql.elements import KeyedColumnElement


def json_text(column: KeyedColumnElement, key: str) -> ColumnElement[str]:
    """metadata->>'key' as text ('' when absent). SQLite gives 1 for JSON true, PG 'true'."""
    return func.coalesce(cast(column[key].as_string(), Text), "")


def json_truthy(column: KeyedColumnElement, key: str) -> ColumnElement[bool]:
    """The flag is set: JSON true, "true", "1" or 1 — as the original's predicates read it."""
    return json_text(column, key).in_(["true", "1"])
