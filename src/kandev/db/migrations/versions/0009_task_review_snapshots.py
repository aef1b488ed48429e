"""the worktree as each person last reviewed it (task_review_snapshots)

One row per task and reviewer: the commit Kandev wrote of the task's worktree (everything
in it, untracked files included) when that person last marked a file reviewed or sent
review comments, and when. `GET /api/v1/tasks/{id}/changes?since=last_review` diffs the
worktree against it. The commit is kept alive in the repository by a ref under
`refs/kandev/reviews/`; this row is what Kandev reads.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import kandev.db.types

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_review_snapshots",
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("reviewer_id", sa.String(length=64), nullable=False),
        sa.Column("snapshot_commit", sa.String(length=64), nullable=False),
        sa.Column("reviewed_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "reviewer_id", name=op.f("pk_task_review_snapshots")),
    )


def downgrade() -> None:
    op.drop_table("task_review_snapshots")
