"""repositories per workspace; tasks on a repository (worktree, branch)

`repositories` holds the git repositories registered in a workspace; a task names one with
`repository_id` and records its `base_branch`, its own `branch` and `worktree_path` (the
worktree Kandev created for it in the data dir). '' means none.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import kandev.db.types

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TASK_COLUMNS = ("repository_id", "base_branch", "branch", "worktree_path")


def upgrade() -> None:
    op.create_table(
        "repositories",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("default_branch", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("setup_script", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column(
            "copy_files",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'[]'"),
            nullable=False,
        ),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repositories")),
    )
    op.create_index(
        op.f("ix_repositories_workspace_id"), "repositories", ["workspace_id"], unique=False
    )
    for name in TASK_COLUMNS:
        op.add_column(
            "tasks", sa.Column(name, sa.Text(), server_default=sa.text("''"), nullable=False)
        )
    op.create_index(op.f("ix_tasks_repository_id"), "tasks", ["repository_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_tasks_repository_id"), table_name="tasks")
    with op.batch_alter_table("tasks") as batch_op:
        for name in reversed(TASK_COLUMNS):
            batch_op.drop_column(name)
    op.drop_index(op.f("ix_repositories_workspace_id"), table_name="repositories")
    op.drop_table("repositories")
