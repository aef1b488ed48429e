"""index a session's turns in the order the current turn is chosen by

Every state change finds its session's current turn: the newest authoritative turn by
`(started_at, created_at, id)`, all descending (kandev.sessions.turns). The index held
`(session_id, started_at)` only, so both planners read every turn of the session and sorted
them for the LIMIT 1: a session's thousandth turn paid for the other 999 on every state
change. With the whole order in the index, a backward scan stops at the first authoritative
turn. It replaces the old index, which is its prefix.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

OLD_INDEX = "ix_task_session_turns_session_started"
NEW_INDEX = "ix_task_session_turns_session_order"


def upgrade() -> None:
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {NEW_INDEX} "
        "ON task_session_turns (session_id, started_at, created_at, id)"
    )
    op.execute(f"DROP INDEX IF EXISTS {OLD_INDEX}")


def downgrade() -> None:
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {OLD_INDEX} ON task_session_turns (session_id, started_at)"
    )
    op.execute(f"DROP INDEX IF EXISTS {NEW_INDEX}")
