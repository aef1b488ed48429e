"""SQL forms of the scoping rules in kandev.access.rules (one place for both).

A workspace is visible to user U when owner_id is '' or U. A row that hangs off a workspace
(task, workflow) is visible unless its workspace_id names an existing workspace owned by
someone else — which covers the empty and dangling cases in one predicate.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, select, true

from kandev.db.tables import workspaces


def workspace_visible(user_id: str | None) -> ColumnElement[bool]:
    if user_id is None:
        return true()
    return or_(workspaces.c.owner_id == "", workspaces.c.owner_id == user_id)


def hangs_off_visible_workspace(
    workspace_id_column: ColumnElement[str], user_id: str | None
) -> ColumnElement[bool]:
    if user_id is None:
        return true()
    foreign = select(workspaces.c.id).where(
        workspaces.c.owner_id != "", workspaces.c.owner_id != user_id
    )
    return workspace_id_column.not_in(foreign)
