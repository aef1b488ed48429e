"""Database integrity errors translated into domain errors, for the repositories.

A repository wraps a write that can clash with a unique key in `unique_key(...)`, so the
services above it see `DuplicateRow` (a `Conflict`) and never the driver's `IntegrityError`.
The error is raised from inside the statement (no constraint here is deferred), so it leaves
the caller's `db.write()` block exactly as the `IntegrityError` did and rolls the transaction
back; on PostgreSQL that transaction is aborted anyway, so nothing may run in it afterwards.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import IntegrityError

from kandev.errors import DuplicateRow

PG_UNIQUE_VIOLATION = "23505"
SQLITE_UNIQUE_VIOLATIONS = frozenset(
    {sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY}
)


def is_unique_violation(exc: IntegrityError) -> bool:
    """A unique or primary key clash (SQLite or PostgreSQL), as opposed to a NOT NULL, CHECK
    or foreign key failure."""
    orig = exc.orig
    sqlite_code = getattr(orig, "sqlite_errorcode", None)
    if sqlite_code is not None:
        return sqlite_code in SQLITE_UNIQUE_VIOLATIONS
    return getattr(orig, "sqlstate", None) == PG_UNIQUE_VIOLATION


@contextmanager
def unique_key(what: str) -> Iterator[None]:
    """Raise `DuplicateRow(what)` when a statement inside clashes with a unique key.

    `what` names the unique thing the caller can clash on (e.g. "users.email"). Any other
    integrity error is a bug, not a conflict, and passes through unchanged.
    """
    try:
        yield
    except IntegrityError as exc:
        if not is_unique_violation(exc):
            raise
        raise DuplicateRow(what) from exc
