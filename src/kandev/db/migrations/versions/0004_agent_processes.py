"""record running agent processes (agent_processes)

Each row is an agent process group a server started and has not yet seen exit: pid and
process-group id of its leader, the leader's start time (/proc/<pid>/stat field 22) and the
boot id. A restarted server kills recorded survivors whose start time still matches before
any session is relaunched, so one session never has two agents.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import kandev.db.types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_processes",
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("pgid", sa.Integer(), nullable=False),
        sa.Column("start_ticks", sa.BigInteger(), nullable=False),
        sa.Column("boot_id", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("started_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_agent_processes")),
    )


def downgrade() -> None:
    op.drop_table("agent_processes")
