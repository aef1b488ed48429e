"""per-file "reviewed" marks of a task's changes (task_file_reviews)

One row per task and file the user marked reviewed on the task page's Changes panel, with
the fingerprint (sha256) of that file's diff when marked: a mark whose fingerprint no
longer matches the file's current diff shows as stale.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_file_reviews",
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "path", name=op.f("pk_task_file_reviews")),
    )


def downgrade() -> None:
    op.drop_table("task_file_reviews")
