"""Repositories translate unique-key clashes into DuplicateRow, on SQLite and PostgreSQL;
other integrity failures are bugs and pass through as the driver's error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from kandev.auth import repository as auth_repo
from kandev.db.engine import Database
from kandev.db.integrity import unique_key
from kandev.db.tables import users
from kandev.errors import Conflict, DuplicateRow

NOW = datetime(2025, 1, 1, tzinfo=UTC)


async def test_a_duplicate_email_is_a_duplicate_row(db: Database) -> None:
    async with db.write() as conn:
        await auth_repo.insert_user(
            conn, user_id="u1", email="a@example.com", display_name="", role="member", now=NOW
        )
    with pytest.raises(DuplicateRow) as caught:
        async with db.write() as conn:
            await auth_repo.insert_user(
                conn, user_id="u2", email="a@example.com", display_name="", role="member", now=NOW
            )
    assert caught.value.what == "users.email"
    assert isinstance(caught.value, Conflict)
    assert isinstance(caught.value.__cause__, IntegrityError)
    async with db.read() as conn:  # the failed transaction was rolled back, nothing else lost
        assert await auth_repo.get_user(conn, "u2") is None
        assert (await auth_repo.get_user(conn, "u1")) is not None


async def test_other_integrity_errors_pass_through(db: Database) -> None:
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            with unique_key("users.email"):
                await conn.execute(insert(users).values(id="u3", email=None))
