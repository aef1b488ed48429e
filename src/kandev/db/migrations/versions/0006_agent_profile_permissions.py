"""agent profiles decide permission requests: `permission_policy` and `permission_allow`

`permission_policy` is "ask" (record the request, wait for a person), "allow" or "deny";
`permission_allow` lists tool kinds or titles that are allowed without asking.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import kandev.db.types

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "agent_profiles",
        sa.Column("permission_policy", sa.Text(), server_default=sa.text("'ask'"), nullable=False),
    )
    op.add_column(
        "agent_profiles",
        sa.Column(
            "permission_allow",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'[]'"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table("agent_profiles") as batch_op:
        batch_op.drop_column("permission_allow")
        batch_op.drop_column("permission_policy")
