"""index the still-pending clarification rows (partial index)

The external pending-question list (kandev.clarification.list_query) starts from every
pending-ish clarification row; the answered history is far larger and never listed. A
partial index holding only rows with `type = 'clarification_request'` and a pending-ish
status (absent, '', JSON null or 'pending' — the repository's `_is_pending`) lets it read
those rows without scanning all messages. The list query renders these two terms with
literal constants, so both planners can prove the index predicate. The key
(session_id, turn_id, task_id) carries what the list joins on, so a row the caller may not
see is dropped without reading the row itself; it also serves per-session lookups.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

INDEX = "ix_task_session_messages_pending_clarification"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        status = "(metadata ->> 'status')"
    else:
        status = "json_extract(metadata, '$.status')"
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} "
        "ON task_session_messages (session_id, turn_id, task_id) "
        f"WHERE type = 'clarification_request' AND coalesce({status}, '') IN ('', 'pending')"
    )


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
