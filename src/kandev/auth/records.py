"""Typed records of the auth tables, built by the repository from its rows.

The service reads these instead of database rows; `user_json` / `token_json` turn them into
the public shapes. Hashes stay on the records that need them and never reach JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Self


def _pick(cls: type[Any], row: Mapping[Any, Any]) -> dict[str, Any]:
    return {f.name: row[f.name] for f in fields(cls)}


@dataclass(frozen=True)
class User:
    """A row of `users` (its `settings` are not read here)."""

    id: str
    email: str
    display_name: str
    role: str
    status: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(**_pick(cls, row))


@dataclass(frozen=True)
class LoginRecord:
    """A user together with the hash of its local password identity."""

    user: User
    password_hash: str = field(repr=False)

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(user=User.from_row(row), password_hash=row["password_hash"])


@dataclass(frozen=True)
class BrowserSession:
    """A row of `auth_sessions`: a cookie session, known by its token's SHA-256."""

    id: str
    user_id: str
    token_sha256: str = field(repr=False)
    created_at: datetime
    expires_at: datetime
    last_seen_at: datetime
    user_agent: str
    ip: str

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(**_pick(cls, row))


@dataclass(frozen=True)
class ApiToken:
    """A row of `auth_api_tokens`: a personal access token, known by its SHA-256."""

    id: str
    user_id: str
    name: str
    prefix: str
    token_sha256: str = field(repr=False)
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Self:
        return cls(**_pick(cls, row))
