"""SQL for repositories (and the task columns that point at them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.tables import repositories, task_file_reviews, task_review_snapshots, tasks
from kandev.repos.models import Repository


async def insert_repository(conn: AsyncConnection, values: dict[str, Any]) -> Repository:
    await conn.execute(insert(repositories).values(**values))
    repository = await get_repository(conn, values["id"])
    assert repository is not None
    return repository


async def lock_registrations_of(conn: AsyncConnection, workspace_id: str, path: str) -> None:
    """PostgreSQL: registrations of one path in one workspace queue on this lock until the
    transaction ends, so the second sees the first (SQLite: its one write lock does it)."""
    if conn.dialect.name != "postgresql":
        return
    key = f"repository-path:{workspace_id}:{path}"
    await conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))


async def registration_of(conn: AsyncConnection, workspace_id: str, path: str) -> Repository | None:
    """The workspace's registration of the repository at `path`, if it has one."""
    row = (
        (
            await conn.execute(
                select(repositories).where(
                    repositories.c.workspace_id == workspace_id, repositories.c.path == path
                )
            )
        )
        .mappings()
        .first()
    )
    return Repository.from_row(row) if row else None


async def get_repository(conn: AsyncConnection, repository_id: str) -> Repository | None:
    row = (
        (await conn.execute(select(repositories).where(repositories.c.id == repository_id)))
        .mappings()
        .first()
    )
    return Repository.from_row(row) if row else None


async def list_repositories(conn: AsyncConnection, workspace_id: str) -> list[Repository]:
    rows = (
        await conn.execute(
            select(repositories)
            .where(repositories.c.workspace_id == workspace_id)
            .order_by(repositories.c.created_at, repositories.c.id)
        )
    ).mappings()
    return [Repository.from_row(r) for r in rows]


async def update_repository(
    conn: AsyncConnection, repository_id: str, values: dict[str, Any]
) -> None:
    await conn.execute(
        update(repositories).where(repositories.c.id == repository_id).values(**values)
    )


async def delete_repository(conn: AsyncConnection, repository_id: str) -> None:
    await conn.execute(delete(repositories).where(repositories.c.id == repository_id))


async def count_tasks_on(conn: AsyncConnection, repository_id: str) -> int:
    stmt = select(func.count()).select_from(tasks).where(tasks.c.repository_id == repository_id)
    return int((await conn.execute(stmt)).scalar_one())


async def open_task_rows_on(conn: AsyncConnection, repository_id: str) -> list[dict[str, Any]]:
    """Unarchived tasks of a repository that have a branch (overlap candidates)."""
    rows = (
        await conn.execute(
            select(tasks.c.id, tasks.c.title, tasks.c.branch, tasks.c.worktree_path)
            .where(
                tasks.c.repository_id == repository_id,
                tasks.c.archived_at.is_(None),
                tasks.c.branch != "",
            )
            .order_by(tasks.c.created_at, tasks.c.id)
        )
    ).mappings()
    return [dict(r) for r in rows]


async def set_task_worktree(
    conn: AsyncConnection, task_id: str, *, branch: str, worktree_path: str, now: Any
) -> None:
    await conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(branch=branch, worktree_path=worktree_path, updated_at=now)
    )


async def task_ids(conn: AsyncConnection) -> set[str]:
    """Every task's id (archived ones too): what the worktree collector keeps."""
    return {row.id for row in await conn.execute(select(tasks.c.id))}


async def task_exists(conn: AsyncConnection, task_id: str) -> bool:
    return (await conn.execute(select(tasks.c.id).where(tasks.c.id == task_id))).first() is not None


async def branch_in_use(conn: AsyncConnection, branch: str) -> bool:
    stmt = select(tasks.c.id).where(tasks.c.branch == branch).limit(1)
    return (await conn.execute(stmt)).first() is not None


async def repository_paths(conn: AsyncConnection) -> set[str]:
    return {row.path for row in await conn.execute(select(repositories.c.path))}


async def set_task_totals(
    conn: AsyncConnection, task_id: str, *, additions: int, deletions: int
) -> bool:
    """Store a task's change totals; False when they were already these (or no task)."""
    result = await conn.execute(
        update(tasks)
        .where(
            tasks.c.id == task_id,
            (tasks.c.additions != additions) | (tasks.c.deletions != deletions),
        )
        .values(additions=additions, deletions=deletions)
    )
    return bool(result.rowcount)


# --- per-file "reviewed" marks (task_file_reviews) -------------------------------------


async def reviewed_marks(conn: AsyncConnection, task_id: str) -> dict[str, str]:
    """path -> the fingerprint of the file's diff when it was marked reviewed."""
    rows = await conn.execute(
        select(task_file_reviews.c.path, task_file_reviews.c.fingerprint).where(
            task_file_reviews.c.task_id == task_id
        )
    )
    return {row.path: row.fingerprint for row in rows}


async def set_reviewed_mark(
    conn: AsyncConnection, task_id: str, path: str, fingerprint: str | None
) -> None:
    """Mark `path` reviewed at `fingerprint`, or (None) clear the mark."""
    where = (task_file_reviews.c.task_id == task_id) & (task_file_reviews.c.path == path)
    await conn.execute(delete(task_file_reviews).where(where))
    if fingerprint is not None:
        await conn.execute(
            insert(task_file_reviews).values(task_id=task_id, path=path, fingerprint=fingerprint)
        )


# --- the worktree as each reviewer last reviewed it (task_review_snapshots) ---------------


async def review_snapshot(
    conn: AsyncConnection, task_id: str, reviewer_id: str
) -> tuple[str, datetime] | None:
    """(snapshot commit, reviewed_at) of the reviewer's last review of the task, or None."""
    row = (
        await conn.execute(
            select(
                task_review_snapshots.c.snapshot_commit, task_review_snapshots.c.reviewed_at
            ).where(
                task_review_snapshots.c.task_id == task_id,
                task_review_snapshots.c.reviewer_id == reviewer_id,
            )
        )
    ).first()
    return (row.snapshot_commit, row.reviewed_at) if row else None


async def set_review_snapshot(
    conn: AsyncConnection, task_id: str, reviewer_id: str, commit: str, reviewed_at: datetime
) -> None:
    where = (task_review_snapshots.c.task_id == task_id) & (
        task_review_snapshots.c.reviewer_id == reviewer_id
    )
    updated = await conn.execute(
        update(task_review_snapshots)
        .where(where)
        .values(snapshot_commit=commit, reviewed_at=reviewed_at)
    )
    if not updated.rowcount:
        await conn.execute(
            insert(task_review_snapshots).values(
                task_id=task_id,
                reviewer_id=reviewer_id,
                snapshot_commit=commit,
                reviewed_at=reviewed_at,
            )
        )
