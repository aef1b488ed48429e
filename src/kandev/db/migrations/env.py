"""Alembic environment. Kandev runs it in-process with a connection handed in (see migrate.py)."""

from __future__ import annotations

from alembic import context

from kandev.db.migrations.autogen import COMPARE_OPTIONS
from kandev.db.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,  # ALTER TABLE on SQLite goes through batch mode
    # What autogenerate compares, and what it cannot: kandev.db.migrations.autogen (the
    # parity tests in tests/db/test_schema_parity.py compare with the same options).
    **COMPARE_OPTIONS,
)
with context.begin_transaction():
    context.run_migrations()
