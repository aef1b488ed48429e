"""index the still-pending questions and permission requests by task, and the primary session
of each task (partial)

When a task's state changes, its JSON says what its sessions owe (pending action, oldest
question bundle). That used to describe every session of the task — a thousand rows for a
task with a thousand sessions, on every answer and every turn end. The other sessions are
now one aggregate over their pending rows (kandev.pending.view's OtherSessions), read by
task through these two partial indexes, in the form of migrations 0003 and 0010: pending
questions by `(task_id, created_at, pending_id)` — the order the oldest bundle is chosen
by, with session_id and turn_id, which the pending-question list joins on — and pending
permission requests by `(task_id, created_at)`. The task's primary session, read as a row
beside them, is found through a third partial index that holds only primary sessions.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

QUESTION_INDEX = "ix_task_session_messages_task_pending_clarification"
PERMISSION_INDEX = "ix_task_session_messages_task_pending_permission"
PRIMARY_INDEX = "ix_task_sessions_primary"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        status, pending_id = "(metadata ->> 'status')", "(metadata ->> 'pending_id')"
        primary = "is_primary = true"
    else:
        status = "json_extract(metadata, '$.status')"
        pending_id = "json_extract(metadata, '$.pending_id')"
        primary = "is_primary = 1"
    still_pending = f"coalesce({status}, '') IN ('', 'pending')"
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {QUESTION_INDEX} "
        f"ON task_session_messages (task_id, created_at, {pending_id}, session_id, turn_id) "
        f"WHERE type = 'clarification_request' AND {still_pending}"
    )
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {PERMISSION_INDEX} "
        f"ON task_session_messages (task_id, created_at) "
        f"WHERE type = 'permission_request' AND {still_pending}"
    )
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {PRIMARY_INDEX} "
        f"ON task_sessions (task_id, started_at, id) WHERE {primary}"
    )


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {PRIMARY_INDEX}")
    op.execute(f"DROP INDEX IF EXISTS {PERMISSION_INDEX}")
    op.execute(f"DROP INDEX IF EXISTS {QUESTION_INDEX}")
