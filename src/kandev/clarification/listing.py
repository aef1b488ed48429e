"""`list_pending_questions`: the caller-facing list of active bundles (seed spec L1-L16).

Argument rules, so each surface (the MCP tool `list_pending_questions_kandev`) only forwards:
- `workspace_id`: optional; '' means not supplied (L7a);
- `created_since`: optional RFC 3339 timestamp with a zone; '' means not supplied (L8);
- `cursor`: the opaque `next_cursor` of an earlier page; '' means the first page (L9);
- `limit`: default 50, below 1 or absent → 50, above 200 → 200 (L10).
An unparseable `created_since` or `cursor` is a validation error naming it (L13); both
together are an intersection (L14). The envelope is `{bundles, count, next_cursor}` (L11).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from kandev.auth.identity import caller_scope
from kandev.clarification.list_query import list_active_bundles
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import KandevError, ValidationFailed

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
LIST_FAILED = "Failed to list pending questions"

_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)
_CURSOR = re.compile(r"^[A-Za-z0-9_-]+$")


def clamp_limit(limit: Any) -> int:
    """L10: absent or below 1 → the default, above the cap → the cap."""
    if limit is None:
        return DEFAULT_LIMIT
    if isinstance(limit, bool):
        raise ValidationFailed("limit", "must be an integer")
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    elif isinstance(limit, str):
        try:
            limit = int(limit.strip())
        except ValueError:
            raise ValidationFailed("limit", "must be an integer") from None
    if not isinstance(limit, int):
        raise ValidationFailed("limit", "must be an integer")
    if limit < 1:
        return DEFAULT_LIMIT
    return min(limit, MAX_LIMIT)


def parse_rfc3339(value: str) -> datetime | None:
    """An aware datetime, or None when `value` is not an RFC 3339 date-time with a zone."""
    match = _RFC3339.match(value)
    if match is None:
        return None
    date, time, fraction, zone = match.groups()
    fraction = f".{(fraction or '')[:6].ljust(6, '0')}"  # microseconds; more is truncated
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        parsed = datetime.fromisoformat(f"{date}T{time}{fraction}{zone}")
        parsed.astimezone(UTC)  # representable in UTC (not 0001-01-01T00:00+01:00)
    except (ValueError, OverflowError):  # 2026-02-30, 25:00:00, +24:00 …
        return None
    return parsed


def parse_created_since(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    parsed = parse_rfc3339(value) if isinstance(value, str) else None
    if parsed is None:
        raise ValidationFailed(
            "created_since", "must be an RFC 3339 timestamp, e.g. 2026-01-01T00:00:00Z"
        )
    return parsed


def encode_cursor(created_at: str, pending_id: str) -> str:
    """Opaque to callers: unpadded urlsafe base64 of JSON [created_at, pending_id]."""
    raw = json.dumps([created_at, pending_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(value: Any) -> tuple[datetime, str] | None:
    """The (created_at, pending_id) position; None for the first page; corrupt → error."""
    if value is None or value == "":
        return None
    invalid = ValidationFailed("cursor", "invalid cursor; pass a next_cursor value unchanged")
    if not isinstance(value, str) or not _CURSOR.match(value):
        raise invalid
    try:
        decoded = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (binascii.Error, ValueError):  # bad base64, bad UTF-8, bad JSON
        raise invalid from None
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or not all(isinstance(part, str) for part in decoded)
        or not decoded[1]
    ):
        raise invalid
    created_at = parse_rfc3339(decoded[0])
    if created_at is None:
        raise invalid
    return created_at, decoded[1]


def _workspace_filter(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValidationFailed("workspace_id", "must be a string")
    return value


async def list_pending_questions(
    db: Database,
    clock: Clock,
    *,
    workspace_id: Any = None,
    created_since: str | None = None,
    cursor: str | None = None,
    limit: Any = None,
) -> dict[str, Any]:
    """`{"bundles": [...], "count": len(bundles), "next_cursor": "<cursor or ''>"}`."""
    size = clamp_limit(limit)
    since = parse_created_since(created_since)
    after = decode_cursor(cursor)
    workspace = _workspace_filter(workspace_id)
    try:
        async with db.read() as conn:
            bundles, has_more = await list_active_bundles(
                conn,
                user_id=caller_scope(),
                workspace_id=workspace,
                created_since=since,
                after=after,
                limit=size,
                now=clock.now(),
            )
    except SQLAlchemyError as exc:
        log.exception("listing pending questions failed")
        raise KandevError(LIST_FAILED) from exc
    next_cursor = ""
    if has_more and bundles:
        last = bundles[-1]
        next_cursor = encode_cursor(last["created_at"], last["pending_id"])
    return {"bundles": bundles, "count": len(bundles), "next_cursor": next_cursor}
