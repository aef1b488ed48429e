"""JSON-in-SQL helpers that read the same on SQLite (JSON text) and PostgreSQL (JSONB)."""

from __future__ import annotations

import json
import re
from typing import Any

from sqlalchemy import ColumnElement, Text, cast, func, literal, literal_column
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnClause, KeyedColumnElement
from sqlalchemy.sql.functions import FunctionElement

from kandev.db.sql_literals import constant
from kandev.db.types import json_column_type


def json_text(column: KeyedColumnElement, key: str) -> ColumnElement[str]:
    """metadata->>'key' as text ('' when absent). SQLite gives 1 for JSON true, PG 'true'.

    Key and defaults are SQL literals (kandev.db.sql_literals says why)."""
    return func.coalesce(cast(json_key_text(column, key), Text), constant(""))


def json_truthy(column: KeyedColumnElement, key: str) -> ColumnElement[bool]:
    """The flag is set: JSON true, "true", "1" or 1 — as the original's predicates read it."""
    return json_text(column, key).in_([constant("true"), constant("1")])


# --- keyed reads and in-place writes, rendered per dialect ------------------------------
#
# The key is rendered inline (not as a bind parameter), so `json_key_text(metadata,
# "pending_id")` is exactly `json_extract(metadata, '$.pending_id')` on SQLite and
# `(metadata ->> 'pending_id')` on PostgreSQL: the form an expression index is declared on.
# The writes change single top-level keys inside one UPDATE, so a guarded UPDATE never
# overwrites what a concurrent writer put into other keys.

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _key(key: str) -> ColumnClause[Any]:
    if not _KEY.match(key):
        raise ValueError(f"unsupported JSON key {key!r}")
    return literal_column(key)


class json_key_text(FunctionElement[str]):
    """metadata->>'key' with the key inline; SQL NULL when absent (no COALESCE)."""

    type = Text()
    inherit_cache = True
    name = "json_key_text"

    def __init__(self, column: ColumnElement[Any], key: str) -> None:
        super().__init__(column, _key(key))


class json_set_keys(FunctionElement[Any]):
    """The JSON object with top-level keys set to JSON values (others untouched)."""

    type = json_column_type()
    inherit_cache = True
    name = "json_set_keys"

    def __init__(self, column: ColumnElement[Any], values: dict[str, Any]) -> None:
        """A value is any JSON-able object, or a SQL expression giving JSON text (e.g. a
        CASE choosing each row's own value in one UPDATE)."""
        if not values:
            raise ValueError("json_set_keys needs at least one key")
        clauses: list[ColumnElement[Any]] = [column]
        for key, value in values.items():
            if not isinstance(value, ColumnElement):
                value = literal(json.dumps(value), Text())
            clauses += [_key(key), value]
        super().__init__(*clauses)


class json_remove_keys(FunctionElement[Any]):
    """The JSON object without the given top-level keys (absent keys are fine)."""

    type = json_column_type()
    inherit_cache = True
    name = "json_remove_keys"

    def __init__(self, column: ColumnElement[Any], keys: list[str]) -> None:
        if not keys:
            raise ValueError("json_remove_keys needs at least one key")
        super().__init__(column, *(_key(k) for k in keys))


def _parts(element: FunctionElement[Any], compiler: Any, **kw: Any) -> tuple[str, list[Any]]:
    column, *rest = list(element.clauses)
    return compiler.process(column, **kw), rest


@compiles(json_key_text, "sqlite")
def _key_text_sqlite(element: json_key_text, compiler: Any, **kw: Any) -> str:
    column, (key,) = _parts(element, compiler, **kw)
    return f"json_extract({column}, '$.{key.name}')"


@compiles(json_key_text, "postgresql")
def _key_text_pg(element: json_key_text, compiler: Any, **kw: Any) -> str:
    column, (key,) = _parts(element, compiler, **kw)
    return f"({column} ->> '{key.name}')"


@compiles(json_set_keys, "sqlite")
def _set_sqlite(element: json_set_keys, compiler: Any, **kw: Any) -> str:
    column, rest = _parts(element, compiler, **kw)
    pairs = [
        f"'$.{key.name}', json({compiler.process(value, **kw)})"
        for key, value in zip(rest[::2], rest[1::2], strict=True)
    ]
    return f"json_set({column}, {', '.join(pairs)})"


@compiles(json_set_keys, "postgresql")
def _set_pg(element: json_set_keys, compiler: Any, **kw: Any) -> str:
    column, rest = _parts(element, compiler, **kw)
    pairs = [
        f"'{key.name}', CAST({compiler.process(value, **kw)} AS JSONB)"
        for key, value in zip(rest[::2], rest[1::2], strict=True)
    ]
    return f"({column} || jsonb_build_object({', '.join(pairs)}))"


@compiles(json_remove_keys, "sqlite")
def _remove_sqlite(element: json_remove_keys, compiler: Any, **kw: Any) -> str:
    column, keys = _parts(element, compiler, **kw)
    paths = ", ".join(f"'$.{key.name}'" for key in keys)
    return f"json_remove({column}, {paths})"


@compiles(json_remove_keys, "postgresql")
def _remove_pg(element: json_remove_keys, compiler: Any, **kw: Any) -> str:
    column, keys = _parts(element, compiler, **kw)
    return "(" + column + "".join(f" - '{k.name}'" for k in keys) + ")"
