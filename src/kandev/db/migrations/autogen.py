"""How Alembic compares `tables.py` with a database: shared by env.py and the parity tests.

Alembic compares here: tables, columns, types (`compare_type`), nullability, server defaults
(`compare_server_default`: reliable on both databases for the literal defaults Kandev uses),
primary, unique and foreign keys, indexes by name, columns and uniqueness, and on
PostgreSQL index expressions too.

It does not compare, so tests/db/test_schema_parity.py compares them through the catalogs
(sqlite_master.sql, pg_indexes.indexdef) of a migrated database and of one built by
`metadata.create_all`:

- the WHERE of a partial index, on either database;
- expression indexes on SQLite. SQLAlchemy cannot reflect them ("Skipped unsupported
  reflection of expression-based index"), and Alembic then leaves the declared one out
  ("autogenerate skipping metadata-specified expression-based index"). It does so before
  any include_object hook runs, so a hook could not change it.

No include_object hook is set, on purpose: nothing of Kandev's is filtered out, and a
Kandev database holds nothing else (kandev.db.ownership refuses foreign databases).
"""

from __future__ import annotations

from typing import Any

COMPARE_OPTIONS: dict[str, Any] = {
    "compare_type": True,
    "compare_server_default": True,
}
