"""tables.py is the one schema: a database migrated to head is exactly what it declares.

Two checks, on SQLite and PostgreSQL:

- Alembic's own comparison (the one autogenerate runs, same options as migrations/env.py)
  finds nothing to do at head, so a drafted revision contains only what changed;
- the catalog of a migrated database equals the catalog of one built by
  `metadata.create_all`: columns with types, nullability and defaults, primary, foreign and
  unique keys, check constraints, and every index with its full definition as the database
  stores it (sqlite_master.sql, pg_indexes.indexdef). That covers what Alembic does not
  compare: partial-index predicates, and expression indexes on SQLite.
"""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, inspect, text
from sqlalchemy.engine import Connection

from kandev.db.engine import Database
from kandev.db.migrate import upgrade_to_head
from kandev.db.migrations.autogen import COMPARE_OPTIONS
from kandev.db.tables import metadata

# SQLite expression indexes cannot be reflected, so Alembic leaves them out (and says so);
# the catalog check below covers them (kandev.db.migrations.autogen).
pytestmark = [
    pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index"),
    pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based"),
]

PENDING_INDEX = "ix_task_session_messages_pending_clarification"


async def test_autogenerate_finds_nothing_to_do_at_head(db: Database) -> None:
    def diff(sync_conn: Connection) -> list[Any]:
        context = MigrationContext.configure(sync_conn, opts=COMPARE_OPTIONS)
        return compare_metadata(context, metadata)

    async with db.engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_migrated_catalog_equals_the_declared_one(database_url: str) -> None:
    migrated, declared = await _migrated_and_declared_catalogs(database_url, metadata)
    assert set(migrated) == set(declared)
    for table, parts in declared.items():
        for part, described in parts.items():
            assert migrated[table][part] == described, f"{table}: {part}"
    # Not vacuous: the hot-path partial index is there, predicate and all, and so is the
    # pending_id expression index (which SQLite's reflection cannot see).
    indexes = declared["task_session_messages"]["index_definitions"]
    assert "WHERE" in indexes[PENDING_INDEX].upper()
    assert "pending_id" in indexes["ix_task_session_messages_pending_id"]


async def test_the_catalog_check_sees_a_partial_index_predicate_change(
    database_url: str,
) -> None:
    """Alembic compares an index's columns, not its WHERE: the catalog check must see it."""
    drifted = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.sorted_tables:
        table.to_metadata(drifted)
    (index,) = (
        i for i in drifted.tables["task_session_messages"].indexes if i.name == PENDING_INDEX
    )
    for dialect in ("sqlite", "postgresql"):
        index.dialect_options[dialect]["where"] = text("type = 'clarification_request'")

    migrated, declared = await _migrated_and_declared_catalogs(database_url, drifted)
    definitions = "index_definitions"
    assert (
        migrated["task_session_messages"][definitions][PENDING_INDEX]
        != declared["task_session_messages"][definitions][PENDING_INDEX]
    )


async def _migrated_and_declared_catalogs(
    database_url: str, declared_metadata: MetaData
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The catalog after migrating to head, then after rebuilding from `declared_metadata`."""
    db = Database(database_url)
    try:
        await upgrade_to_head(db)
        async with db.engine.begin() as conn:
            migrated = await conn.run_sync(_catalog)
            await conn.run_sync(_drop_every_table)
            await conn.run_sync(declared_metadata.create_all)
            declared = await conn.run_sync(_catalog)
    finally:
        await db.dispose()
    return migrated, declared


def _drop_every_table(sync_conn: Connection) -> None:
    # Every table the database has, not only the declared ones: a table the migrations
    # create and tables.py forgot must still show up as a difference.
    reflected = MetaData()
    reflected.reflect(sync_conn)
    reflected.drop_all(sync_conn)


def _catalog(sync_conn: Connection) -> dict[str, Any]:
    insp = inspect(sync_conn)
    dialect = sync_conn.dialect
    catalog: dict[str, Any] = {}
    for table in insp.get_table_names():
        if table == "alembic_version":
            continue
        catalog[table] = {
            "columns": {
                c["name"]: (
                    c["type"].compile(dialect=dialect),
                    c["nullable"],
                    _default(c.get("default")),
                )
                for c in insp.get_columns(table)
            },
            "primary_key": insp.get_pk_constraint(table),
            "foreign_keys": sorted(
                (
                    fk["name"],
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                    tuple(sorted((fk.get("options") or {}).items())),
                )
                for fk in insp.get_foreign_keys(table)
            ),
            "unique_constraints": sorted(
                (u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(table)
            ),
            "check_constraints": sorted(
                (c["name"] or "", c["sqltext"]) for c in insp.get_check_constraints(table)
            ),
            "index_definitions": _index_definitions(sync_conn, table),
            "indexes": {
                i["name"]: (
                    tuple(str(c) for c in i["column_names"]),
                    tuple(i.get("expressions") or ()),
                    bool(i["unique"]),
                    tuple(sorted((k, str(v)) for k, v in (i.get("dialect_options") or {}).items())),
                )
                for i in insp.get_indexes(table)
            },
        }
    return catalog


def _index_definitions(sync_conn: Connection, table: str) -> dict[str, str]:
    """Each index as the database itself describes it, expressions and WHERE included."""
    if sync_conn.dialect.name == "sqlite":
        # sqlite_master keeps the CREATE INDEX text (minus IF NOT EXISTS); indexes SQLite
        # makes for UNIQUE / PRIMARY KEY have none and are covered by the constraints.
        rows = sync_conn.execute(
            text(
                "SELECT name, sql FROM sqlite_master "
                "WHERE type = 'index' AND tbl_name = :table AND sql IS NOT NULL"
            ),
            {"table": table},
        )
    else:
        rows = sync_conn.execute(
            text(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema() AND tablename = :table"
            ),
            {"table": table},
        )
    return {name: " ".join(sql.split()) for name, sql in rows}


def _default(default: str | None) -> str | None:
    """A reflected server default without redundant outer parentheses.

    SQLite keeps the default as the DDL wrote it, and Alembic renders `DEFAULT ('')` where
    tables.py compiles to `DEFAULT ''`: the same default.
    """
    if default is None:
        return None
    default = default.strip()
    while default.startswith("(") and _closing_paren(default) == len(default) - 1:
        default = default[1:-1].strip()
    return default


def _closing_paren(expr: str) -> int:
    depth = 0
    for position, char in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return position
    return -1
