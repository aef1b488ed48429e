"""index the permission rows by turn, and the still-pending ones by session (partial)

Every state change describes its session in one statement (kandev.pending.view). Two of its
terms walked the session's whole message history: "the latest permission request of the
current turn" (the planner used the session's created_at index for the ORDER BY and
filtered row by row) and "is any permission request of the session pending". Each now
reads a partial index that holds only the rows it asks about: permission rows by
`(turn_id, created_at, id)`, and pending permission rows by session — in the form of
migration 0003's clarification index. Partial, so neither competes with the clarification
indexes for the clarification lookups.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TURN_INDEX = "ix_task_session_messages_turn_permissions"
PENDING_INDEX = "ix_task_session_messages_pending_permission"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        status = "(metadata ->> 'status')"
    else:
        status = "json_extract(metadata, '$.status')"
    permission = "type = 'permission_request'"
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {TURN_INDEX} "
        f"ON task_session_messages (turn_id, created_at, id) WHERE {permission}"
    )
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {PENDING_INDEX} ON task_session_messages (session_id) "
        f"WHERE {permission} AND coalesce({status}, '') IN ('', 'pending')"
    )


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {PENDING_INDEX}")
    op.execute(f"DROP INDEX IF EXISTS {TURN_INDEX}")
