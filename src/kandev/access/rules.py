"""The scoping rules (reference §1.7 / CONTRACT §2), stated once:

- unscoped callers (no identity = internal, or the synthetic identity) see everything;
- a workspace is visible to user U when its owner_id is '' or U;
- a task or workflow is visible when its workspace_id is '', names no existing workspace
  (dangling reference), or names a visible workspace;
- a session is visible through its task.
Denial is the not-found error, worded exactly like a missing row, so a foreign id and a
fabricated id cannot be told apart. List queries use the same rules as SQL (access.sql).
"""

from __future__ import annotations

from kandev.auth.identity import caller_scope

WORKSPACE_NOT_FOUND = "workspace not found"
WORKFLOW_NOT_FOUND = "workflow not found"
TASK_NOT_FOUND = "task not found"
SESSION_NOT_FOUND = "session not found"


def owner_visible_to(owner_id: str, user_id: str | None) -> bool:
    """A workspace owned by `owner_id` is visible to `user_id` (None = unscoped)."""
    return user_id is None or owner_id in ("", user_id)


def scope() -> str | None:
    """The user id list queries must be limited to; None = unscoped."""
    return caller_scope()
