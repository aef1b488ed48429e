"""index clarification rows by pending_id

Every bundle lookup (answer, get, wait, cancel) is by metadata.pending_id alone; without an
expression index each one scans all messages. The expression matches what
kandev.db.json_sql.json_key_text renders on each database, so the planners use it.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

INDEX = "ix_task_session_messages_pending_id"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        expression = "(metadata ->> 'pending_id')"
    else:
        expression = "json_extract(metadata, '$.pending_id')"
    op.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON task_session_messages ({expression})")


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
