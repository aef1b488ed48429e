"""tasks keep the last computed totals of their changes: `additions`, `deletions`

Written whenever Kandev computes a task's changes, so the board shows `+A/-D` per card
without running git in its list query.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = ("additions", "deletions")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column(
            "tasks", sa.Column(name, sa.Integer(), server_default=sa.text("0"), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch_op:
        for name in reversed(COLUMNS):
            batch_op.drop_column(name)
