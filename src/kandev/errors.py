"""Domain errors. Each surface maps them to statuses/codes in exactly one place."""

from __future__ import annotations


class KandevError(Exception):
    """Base of every error a caller is meant to see."""

    code = "INTERNAL_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(KandevError):
    """Missing *or invisible*: the two must be indistinguishable to the caller."""

    code = "NOT_FOUND"


class ValidationFailed(KandevError):
    code = "VALIDATION_ERROR"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class BadRequest(KandevError):
    code = "BAD_REQUEST"


class Conflict(KandevError):
    code = "CONFLICT"


class DuplicateRow(Conflict):
    """A write clashed with a unique key; repositories raise it in place of the database's
    integrity error. `what` names the unique thing that clashed (e.g. "users.email");
    services usually catch it and raise the Conflict their callers are promised."""

    def __init__(self, what: str) -> None:
        super().__init__(f"duplicate {what}")
        self.what = what


class Unauthorized(KandevError):
    code = "UNAUTHORIZED"


class Forbidden(KandevError):
    code = "FORBIDDEN"


class RateLimited(KandevError):
    code = "RATE_LIMITED"


class Unavailable(KandevError):
    """Something the server needs is missing on this machine (e.g. no `git` on PATH)."""

    code = "UNAVAILABLE"


class ServerBusy(KandevError):
    """Too much at once: the request waited its bound (KANDEV_DB_QUEUE_TIMEOUT_SECONDS) for
    the database and gave up before doing anything, so retrying is safe. REST answers 503
    with `Retry-After: retry_after_seconds`."""

    code = "SERVER_BUSY"

    def __init__(self, message: str, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds
