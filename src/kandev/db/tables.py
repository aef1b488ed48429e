"""The one schema (SQLAlchemy Core). Migrations in db/migrations create exactly this.

Every index, constraint and server default a migration creates is declared here too, so
Alembic autogenerate against a database at head finds nothing to do; the parity tests in
tests/db/test_schema_parity.py hold both sides to it on SQLite and PostgreSQL.

IDs are opaque text. Scoping columns (`workspaces.owner_id`, `tasks.workspace_id`) use ''
for "none" rather than NULL, as the original does: '' is the unowned / no-workspace marker.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ColumnElement,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    func,
    text,
    true,
)

from kandev.db.json_sql import json_key_text
from kandev.db.types import UTCDateTime, json_column_type

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)


def _id() -> Column:
    return Column("id", String(64), primary_key=True)


def _created() -> Column:
    return Column("created_at", UTCDateTime(), nullable=False)


def _updated() -> Column:
    return Column("updated_at", UTCDateTime(), nullable=False)


def _text(name: str, **kw: Any) -> Column:
    """A NOT NULL text column defaulting to '' (the house style for optional text)."""
    return Column(name, Text, nullable=False, server_default=text("''"), **kw)


def _json(name: str, default: str) -> Column:
    return Column(name, json_column_type(), nullable=False, server_default=text(f"'{default}'"))


def _flag(name: str, default: bool = False) -> Column:
    return Column(
        name, Boolean, nullable=False, server_default=text("true" if default else "false")
    )


kandev_meta = Table(
    "kandev_meta",
    metadata,
    Column("key", String(128), primary_key=True),
    _text("value"),
)

# --- identity ---------------------------------------------------------------------------

users = Table(
    "users",
    metadata,
    _id(),
    Column("email", String(320), nullable=False, unique=True),
    _text("display_name"),
    Column("role", String(16), nullable=False, server_default=text("'member'")),
    Column("status", String(16), nullable=False, server_default=text("'active'")),
    _json("settings", "{}"),
    _created(),
    _updated(),
)

auth_identities = Table(
    "auth_identities",
    metadata,
    _id(),
    Column("user_id", String(64), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("provider", String(32), nullable=False, server_default=text("'local'")),
    _text("subject"),
    _text("password_hash"),
    _created(),
    _updated(),
    UniqueConstraint("user_id", "provider"),
    UniqueConstraint("provider", "subject"),
)

auth_sessions = Table(
    "auth_sessions",
    metadata,
    _id(),
    Column("user_id", String(64), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("token_sha256", String(64), nullable=False, unique=True),
    _created(),
    Column("expires_at", UTCDateTime(), nullable=False),
    Column("last_seen_at", UTCDateTime(), nullable=False),
    _text("user_agent"),
    _text("ip"),
    Index("ix_auth_sessions_user_id", "user_id"),
)

auth_api_tokens = Table(
    "auth_api_tokens",
    metadata,
    _id(),
    Column("user_id", String(64), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("prefix", String(16), nullable=False),
    Column("token_sha256", String(64), nullable=False, unique=True),
    _created(),
    Column("last_used_at", UTCDateTime(), nullable=True),
    Column("expires_at", UTCDateTime(), nullable=True),
    Index("ix_auth_api_tokens_user_id", "user_id"),
)

# --- board ------------------------------------------------------------------------------

workspaces = Table(
    "workspaces",
    metadata,
    _id(),
    Column("name", String(200), nullable=False),
    _text("description"),
    _text("owner_id"),
    _created(),
    _updated(),
    Index("ix_workspaces_owner_id", "owner_id"),
)

workflows = Table(
    "workflows",
    metadata,
    _id(),
    _text("workspace_id"),
    Column("name", String(200), nullable=False),
    _text("description"),
    _text("prompt"),
    Column("sort_order", Integer, nullable=False, server_default=text("0")),
    _created(),
    _updated(),
    Index("ix_workflows_workspace_id", "workspace_id"),
)

workflow_steps = Table(
    "workflow_steps",
    metadata,
    _id(),
    Column(
        "workflow_id",
        String(64),
        ForeignKey("workflows.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("name", String(200), nullable=False),
    Column("position", Integer, nullable=False),
    _text("prompt"),
    _json("events", "{}"),
    Column("wip_limit", Integer, nullable=False, server_default=text("0")),
    _flag("is_start_step"),
    _flag("allow_manual_move", default=True),
    _created(),
    _updated(),
    Index("ix_workflow_steps_workflow_id_position", "workflow_id", "position"),
    # At most one start step per workflow.
    Index(
        "uq_workflow_steps_single_start",
        "workflow_id",
        unique=True,
        sqlite_where=text("is_start_step"),
        postgresql_where=text("is_start_step"),
    ),
)

tasks = Table(
    "tasks",
    metadata,
    _id(),
    # No foreign keys on purpose: '' means "no workspace", and a dangling id stays readable.
    _text("workspace_id"),
    _text("workflow_id"),
    _text("workflow_step_id"),
    Column("title", String(500), nullable=False),
    _text("description"),
    Column("state", String(32), nullable=False, server_default=text("'TODO'")),
    Column("position", Integer, nullable=False, server_default=text("0")),
    _json("metadata", "{}"),
    _text("local_path"),
    Column("archived_at", UTCDateTime(), nullable=True),
    _created(),
    _updated(),
    Index("ix_tasks_workspace_id", "workspace_id"),
    Index("ix_tasks_workflow_id", "workflow_id"),
    Index("ix_tasks_workflow_step_id_position", "workflow_step_id", "position"),
    # A task on a repository (migration 0005; '' = none): its worktree and branch.
    _text("repository_id"),
    _text("base_branch"),
    _text("branch"),
    _text("worktree_path"),
    # The last computed +A/-D of the task's changes (migration 0007): the board shows them
    # without running git per card.
    Column("additions", Integer, nullable=False, server_default=text("0")),
    Column("deletions", Integer, nullable=False, server_default=text("0")),
    Index("ix_tasks_repository_id", "repository_id"),
)

# Git repositories registered in a workspace (migration 0005; kandev.repos). `path` is the
# user's own checkout; task worktrees live in the data dir.
repositories = Table(
    "repositories",
    metadata,
    _id(),
    Column("workspace_id", String(64), nullable=False),
    Column("name", String(200), nullable=False),
    Column("path", Text, nullable=False),
    _text("default_branch"),
    _text("setup_script"),
    _json("copy_files", "[]"),
    _created(),
    _updated(),
    Index("ix_repositories_workspace_id", "workspace_id"),
)

# The files of a task's changes the user marked reviewed (migration 0008; kandev.repos): the
# fingerprint of the file's diff when marked. A mark whose fingerprint no longer matches the
# file's diff is stale. No foreign key, as for tasks' own columns.
task_file_reviews = Table(
    "task_file_reviews",
    metadata,
    Column("task_id", String(64), primary_key=True),
    Column("path", Text, primary_key=True),
    Column("fingerprint", String(64), nullable=False),
)

# The worktree as each person last reviewed it (migration 0009; kandev.repos): the commit
# Kandev wrote of it (kept alive by a ref under refs/kandev/reviews/) when that reviewer last
# marked a file reviewed or sent review comments; `?since=last_review` diffs against it.
# `reviewer_id` is the user's id ('' for an internal caller). No foreign key, as above.
task_review_snapshots = Table(
    "task_review_snapshots",
    metadata,
    Column("task_id", String(64), primary_key=True),
    Column("reviewer_id", String(64), primary_key=True),
    Column("snapshot_commit", String(64), nullable=False),
    Column("reviewed_at", UTCDateTime(), nullable=False),
)

# --- agents and sessions ----------------------------------------------------------------

agent_profiles = Table(
    "agent_profiles",
    metadata,
    _id(),
    Column("name", String(200), nullable=False, unique=True),
    _json("command", "[]"),
    _json("env", "{}"),
    _flag("is_builtin"),
    # "ask" | "allow" | "deny", and the tool kinds/titles allowed without asking (permissions)
    Column("permission_policy", Text, nullable=False, server_default=text("'ask'")),
    _json("permission_allow", "[]"),
    _created(),
    _updated(),
)

task_sessions = Table(
    "task_sessions",
    metadata,
    _id(),
    Column("task_id", String(64), ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("agent_profile_id", String(64), nullable=True),
    Column("state", String(32), nullable=False, server_default=text("'CREATED'")),
    _flag("is_primary"),
    _text("error_message"),
    _text("acp_session_id"),
    _text("workspace_path"),
    _json("metadata", "{}"),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("completed_at", UTCDateTime(), nullable=True),
    _updated(),
    Index("ix_task_sessions_task_id", "task_id"),
    Index("ix_task_sessions_state", "state"),
)

# The task's primary session (kandev.pending.view reads it when the task's state changes,
# migration 0011): only primary sessions are in it, so a task with a thousand sessions
# finds its primary one without walking them.
Index(
    "ix_task_sessions_primary",
    task_sessions.c.task_id,
    task_sessions.c.started_at,
    task_sessions.c.id,
    sqlite_where=task_sessions.c.is_primary == true(),
    postgresql_where=task_sessions.c.is_primary == true(),
)

task_session_turns = Table(
    "task_session_turns",
    metadata,
    _id(),
    Column(
        "session_id",
        String(64),
        ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _text("task_id"),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("completed_at", UTCDateTime(), nullable=True),
    # prompt_dispatch_pending / prompt_dispatch_attempted, workflow_step_id_at_start, …
    _json("metadata", "{}"),
    _created(),
    _updated(),
    # The order the current turn is chosen by (kandev.sessions.turns, migration 0012).
    Index("ix_task_session_turns_session_order", "session_id", "started_at", "created_at", "id"),
)

task_session_messages = Table(
    "task_session_messages",
    metadata,
    _id(),
    Column(
        "session_id",
        String(64),
        ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _text("task_id"),
    Column(
        "turn_id",
        String(64),
        ForeignKey("task_session_turns.id", ondelete="CASCADE"),
        nullable=True,
    ),
    Column("author_type", String(16), nullable=False, server_default=text("'user'")),
    _text("author_id"),
    Column("type", String(32), nullable=False, server_default=text("'message'")),
    Column("content", Text, nullable=False),
    _flag("requests_input"),
    _json("metadata", "{}"),
    _created(),
    _updated(),
    Index("ix_task_session_messages_session_created", "session_id", "created_at", "id"),
    Index("ix_task_session_messages_turn_id", "turn_id"),
    Index("ix_task_session_messages_task_type", "task_id", "type"),
)

# Every bundle lookup (answer, get, wait, cancel) is by metadata.pending_id alone (migration
# 0002). json_key_text renders the very expression the repositories query with:
# json_extract(metadata, '$.pending_id') on SQLite, (metadata ->> 'pending_id') on PostgreSQL.
Index(
    "ix_task_session_messages_pending_id",
    json_key_text(task_session_messages.c.metadata, "pending_id"),
)


def _is_type(message_type: str) -> ColumnElement[bool]:
    return task_session_messages.c.type == message_type


def _still_pending(message_type: str) -> ColumnElement[bool]:
    return and_(
        _is_type(message_type),
        func.coalesce(json_key_text(task_session_messages.c.metadata, "status"), "").in_(
            ["", "pending"]
        ),
    )


def _partial_message_index(name: str, where: ColumnElement[bool], *columns: Any) -> Index:
    return Index(name, *columns, sqlite_where=where, postgresql_where=where)


# The hot path of the pending-question list (kandev.clarification.list_query, migration
# 0003): only the still-pending clarification rows (status absent, '', JSON null or
# 'pending'). The predicate compiles to the literal-constant text the list query renders, so
# both planners can prove it; the key carries what the list joins on.
_partial_message_index(
    "ix_task_session_messages_pending_clarification",
    _still_pending("clarification_request"),
    task_session_messages.c.session_id,
    task_session_messages.c.turn_id,
    task_session_messages.c.task_id,
)

# The two permission questions every state change asks (kandev.pending.view, migration
# 0010), each answered without walking the session's history: "the latest permission
# request of this turn" (only permission rows, in order) and "is any permission request of
# the session pending" (only the pending ones). Partial, so neither competes with the
# clarification indexes for the clarification lookups.
_partial_message_index(
    "ix_task_session_messages_turn_permissions",
    _is_type("permission_request"),
    task_session_messages.c.turn_id,
    task_session_messages.c.created_at,
    task_session_messages.c.id,
)
_partial_message_index(
    "ix_task_session_messages_pending_permission",
    _still_pending("permission_request"),
    task_session_messages.c.session_id,
)

# What a task's other sessions owe (kandev.pending.view's OtherSessions, migration 0011),
# read by task instead of session by session: the still-pending questions in the order the
# oldest bundle is chosen by, and the still-pending permission requests.
_partial_message_index(
    "ix_task_session_messages_task_pending_clarification",
    _still_pending("clarification_request"),
    task_session_messages.c.task_id,
    task_session_messages.c.created_at,
    json_key_text(task_session_messages.c.metadata, "pending_id"),
    # What the pending-question list joins on, so its scan may use either pending index.
    task_session_messages.c.session_id,
    task_session_messages.c.turn_id,
)
_partial_message_index(
    "ix_task_session_messages_task_pending_permission",
    _still_pending("permission_request"),
    task_session_messages.c.task_id,
    task_session_messages.c.created_at,
)

queued_prompts = Table(
    "queued_prompts",
    metadata,
    _id(),
    Column(
        "session_id",
        String(64),
        ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _text("task_id"),
    Column("position", Integer, nullable=False),
    Column("content", Text, nullable=False),
    _json("metadata", "{}"),
    _text("queued_by"),
    Column("queued_at", UTCDateTime(), nullable=False),
    Index("ix_queued_prompts_session_position", "session_id", "position"),
)

pending_moves = Table(
    "pending_moves",
    metadata,
    _id(),
    Column("move_id", String(64), nullable=False),
    # One pending move per session: a newer deferred move replaces the older one.
    Column(
        "session_id",
        String(64),
        ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
        unique=True,
    ),
    _text("task_id"),
    _text("workflow_id"),
    _text("workflow_step_id"),
    Column("step_position", Integer, nullable=True),
    _text("prompt"),
    _text("instructions"),
    _flag("reset"),
    _flag("skip"),
    _text("actor"),
    _text("sender_session_id"),
    _json("metadata", "{}"),
    Column("queued_at", UTCDateTime(), nullable=False),
)

# Bounded record of applied deferred moves, so a restart never applies one twice.
applied_moves = Table(
    "applied_moves",
    metadata,
    Column("move_id", String(64), primary_key=True),
    _text("session_id"),
    Column("applied_at", UTCDateTime(), nullable=False),
    Index("ix_applied_moves_applied_at", "applied_at"),
)

# Per-session bearer tokens for the agent MCP endpoint; only the SHA-256 is stored.
agent_tokens = Table(
    "agent_tokens",
    metadata,
    _id(),
    Column(
        "session_id",
        String(64),
        ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    _text("task_id"),
    Column("prefix", String(16), nullable=False),
    Column("token_sha256", String(64), nullable=False, unique=True),
    _created(),
    Column("revoked_at", UTCDateTime(), nullable=True),
    Index("ix_agent_tokens_session_id", "session_id"),
)

# The agent processes this server started and has not seen exit: a restarted server kills
# the survivors before anything relaunches (kandev.agents.processes). No foreign key on
# purpose: the record describes a process, and must outlive a deleted session until that
# process is known to be gone.
agent_processes = Table(
    "agent_processes",
    metadata,
    Column("session_id", String(64), primary_key=True),  # one agent per session
    Column("pid", Integer, nullable=False),  # the process-group leader (the guard)
    Column("pgid", Integer, nullable=False),
    # /proc/<pid>/stat field 22 (clock ticks after boot) and the boot id: a recycled pid
    # never matches both, so it is never killed by mistake.
    Column("start_ticks", BigInteger, nullable=False),
    _text("boot_id"),
    Column("started_at", UTCDateTime(), nullable=False),
)
