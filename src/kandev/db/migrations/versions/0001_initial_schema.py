"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 16:38:47.692093
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import kandev.db.types

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "agent_profiles",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "command",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'[]'"),
            nullable=False,
        ),
        sa.Column(
            "env",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("is_builtin", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_profiles")),
        sa.UniqueConstraint("name", name=op.f("uq_agent_profiles_name")),
    )
    op.create_table(
        "applied_moves",
        sa.Column("move_id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("applied_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("move_id", name=op.f("pk_applied_moves")),
    )
    with op.batch_alter_table("applied_moves", schema=None) as batch_op:
        batch_op.create_index("ix_applied_moves_applied_at", ["applied_at"], unique=False)

    op.create_table(
        "kandev_meta",
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("value", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_kandev_meta")),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("workflow_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("workflow_step_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("description", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("state", sa.String(length=32), server_default=sa.text("'TODO'"), nullable=False),
        sa.Column("position", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "metadata",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("local_path", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("archived_at", kandev.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index("ix_tasks_workflow_id", ["workflow_id"], unique=False)
        batch_op.create_index(
            "ix_tasks_workflow_step_id_position", ["workflow_step_id", "position"], unique=False
        )
        batch_op.create_index("ix_tasks_workspace_id", ["workspace_id"], unique=False)

    op.create_table(
        "users",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("display_name", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("role", sa.String(length=16), server_default=sa.text("'member'"), nullable=False),
        sa.Column(
            "status", sa.String(length=16), server_default=sa.text("'active'"), nullable=False
        ),
        sa.Column(
            "settings",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "workflows",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("prompt", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("sort_order", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflows")),
    )
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.create_index("ix_workflows_workspace_id", ["workspace_id"], unique=False)

    op.create_table(
        "workspaces",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("owner_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workspaces")),
    )
    with op.batch_alter_table("workspaces", schema=None) as batch_op:
        batch_op.create_index("ix_workspaces_owner_id", ["owner_id"], unique=False)

    op.create_table(
        "auth_api_tokens",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", kandev.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("expires_at", kandev.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_auth_api_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_api_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_auth_api_tokens_token_sha256")),
    )
    with op.batch_alter_table("auth_api_tokens", schema=None) as batch_op:
        batch_op.create_index("ix_auth_api_tokens_user_id", ["user_id"], unique=False)

    op.create_table(
        "auth_identities",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column(
            "provider", sa.String(length=32), server_default=sa.text("'local'"), nullable=False
        ),
        sa.Column("subject", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("password_hash", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_auth_identities_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_identities")),
        sa.UniqueConstraint(
            "provider", "subject", name=op.f("uq_auth_identities_provider_subject")
        ),
        sa.UniqueConstraint(
            "user_id", "provider", name=op.f("uq_auth_identities_user_id_provider")
        ),
    )
    op.create_table(
        "auth_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("user_agent", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("ip", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_auth_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_sessions")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_auth_sessions_token_sha256")),
    )
    with op.batch_alter_table("auth_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_auth_sessions_user_id", ["user_id"], unique=False)

    op.create_table(
        "task_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("agent_profile_id", sa.String(length=64), nullable=True),
        sa.Column(
            "state", sa.String(length=32), server_default=sa.text("'CREATED'"), nullable=False
        ),
        sa.Column("is_primary", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("error_message", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("acp_session_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("workspace_path", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column(
            "metadata",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("started_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("completed_at", kandev.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["tasks.id"],
            name=op.f("fk_task_sessions_task_id_tasks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_sessions")),
    )
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_task_sessions_state", ["state"], unique=False)
        batch_op.create_index("ix_task_sessions_task_id", ["task_id"], unique=False)

    op.create_table(
        "workflow_steps",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workflow_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column(
            "events",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("wip_limit", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("is_start_step", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column(
            "allow_manual_move", sa.Boolean(), server_default=sa.text("(true)"), nullable=False
        ),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["workflow_id"],
            ["workflows.id"],
            name=op.f("fk_workflow_steps_workflow_id_workflows"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_steps")),
    )
    with op.batch_alter_table("workflow_steps", schema=None) as batch_op:
        batch_op.create_index(
            "ix_workflow_steps_workflow_id_position", ["workflow_id", "position"], unique=False
        )
        batch_op.create_index(
            "uq_workflow_steps_single_start",
            ["workflow_id"],
            unique=True,
            sqlite_where=sa.text("is_start_step"),
            postgresql_where=sa.text("is_start_step"),
        )

    op.create_table(
        "agent_tokens",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", kandev.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["task_sessions.id"],
            name=op.f("fk_agent_tokens_session_id_task_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_agent_tokens_token_sha256")),
    )
    with op.batch_alter_table("agent_tokens", schema=None) as batch_op:
        batch_op.create_index("ix_agent_tokens_session_id", ["session_id"], unique=False)

    op.create_table(
        "pending_moves",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("move_id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("workflow_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("workflow_step_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("step_position", sa.Integer(), nullable=True),
        sa.Column("prompt", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("instructions", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("reset", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("skip", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("actor", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("sender_session_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column(
            "metadata",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("queued_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["task_sessions.id"],
            name=op.f("fk_pending_moves_session_id_task_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_moves")),
        sa.UniqueConstraint("session_id", name=op.f("uq_pending_moves_session_id")),
    )
    op.create_table(
        "queued_prompts",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column(
            "metadata",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("queued_by", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("queued_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["task_sessions.id"],
            name=op.f("fk_queued_prompts_session_id_task_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queued_prompts")),
    )
    with op.batch_alter_table("queued_prompts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_queued_prompts_session_position", ["session_id", "position"], unique=False
        )

    op.create_table(
        "task_session_turns",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("started_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("completed_at", kandev.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column(
            "metadata",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["task_sessions.id"],
            name=op.f("fk_task_session_turns_session_id_task_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_session_turns")),
    )
    with op.batch_alter_table("task_session_turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_task_session_turns_session_started", ["session_id", "started_at"], unique=False
        )

    op.create_table(
        "task_session_messages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=True),
        sa.Column(
            "author_type", sa.String(length=16), server_default=sa.text("'user'"), nullable=False
        ),
        sa.Column("author_id", sa.Text(), server_default=sa.text("('')"), nullable=False),
        sa.Column(
            "type", sa.String(length=32), server_default=sa.text("'message'"), nullable=False
        ),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column(
            "requests_input", sa.Boolean(), server_default=sa.text("(false)"), nullable=False
        ),
        sa.Column(
            "metadata",
            kandev.db.types.json_column_type(),
            server_default=sa.text("'{}'"),
            nullable=False,
        ),
        sa.Column("created_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", kandev.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["task_sessions.id"],
            name=op.f("fk_task_session_messages_session_id_task_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["turn_id"],
            ["task_session_turns.id"],
            name=op.f("fk_task_session_messages_turn_id_task_session_turns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_session_messages")),
    )
    with op.batch_alter_table("task_session_messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_task_session_messages_session_created",
            ["session_id", "created_at", "id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_task_session_messages_task_type", ["task_id", "type"], unique=False
        )
        batch_op.create_index("ix_task_session_messages_turn_id", ["turn_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("task_session_messages", schema=None) as batch_op:
        batch_op.drop_index("ix_task_session_messages_turn_id")
        batch_op.drop_index("ix_task_session_messages_task_type")
        batch_op.drop_index("ix_task_session_messages_session_created")

    op.drop_table("task_session_messages")
    with op.batch_alter_table("task_session_turns", schema=None) as batch_op:
        batch_op.drop_index("ix_task_session_turns_session_started")

    op.drop_table("task_session_turns")
    with op.batch_alter_table("queued_prompts", schema=None) as batch_op:
        batch_op.drop_index("ix_queued_prompts_session_position")

    op.drop_table("queued_prompts")
    op.drop_table("pending_moves")
    with op.batch_alter_table("agent_tokens", schema=None) as batch_op:
        batch_op.drop_index("ix_agent_tokens_session_id")

    op.drop_table("agent_tokens")
    with op.batch_alter_table("workflow_steps", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_workflow_steps_single_start",
            sqlite_where=sa.text("is_start_step"),
            postgresql_where=sa.text("is_start_step"),
        )
        batch_op.drop_index("ix_workflow_steps_workflow_id_position")

    op.drop_table("workflow_steps")
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_task_sessions_task_id")
        batch_op.drop_index("ix_task_sessions_state")

    op.drop_table("task_sessions")
    with op.batch_alter_table("auth_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_auth_sessions_user_id")

    op.drop_table("auth_sessions")
    op.drop_table("auth_identities")
    with op.batch_alter_table("auth_api_tokens", schema=None) as batch_op:
        batch_op.drop_index("ix_auth_api_tokens_user_id")

    op.drop_table("auth_api_tokens")
    with op.batch_alter_table("workspaces", schema=None) as batch_op:
        batch_op.drop_index("ix_workspaces_owner_id")

    op.drop_table("workspaces")
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.drop_index("ix_workflows_workspace_id")

    op.drop_table("workflows")
    op.drop_table("users")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_tasks_workspace_id")
        batch_op.drop_index("ix_tasks_workflow_step_id_position")
        batch_op.drop_index("ix_tasks_workflow_id")

    op.drop_table("tasks")
    op.drop_table("kandev_meta")
    with op.batch_alter_table("applied_moves", schema=None) as batch_op:
        batch_op.drop_index("ix_applied_moves_applied_at")

    op.drop_table("applied_moves")
    op.drop_table("agent_profiles")
