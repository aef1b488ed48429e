"""Who is calling: an Identity in a contextvar, set by the HTTP middleware or MCP verifier.

Three caller classes decide visibility everywhere (reference §1.2):
- no identity      → internal caller (orchestrator, background work): unscoped;
- synthetic        → auth is off: unscoped;
- real user        → scoped to that user's workspaces.
Business code branches on the identity, never on the auth mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass

DEFAULT_USER_ID = "default-user"
ROLE_ADMIN = "admin"
ROLE_MEMBER = "member"


@dataclass(frozen=True)
class Identity:
    user_id: str
    role: str = ROLE_MEMBER
    synthetic: bool = False
    session_id: str | None = None  # set when authenticated by the session cookie
    token_id: str | None = None  # set when authenticated by a personal access token

    @property
    def is_admin(self) -> bool:
        return self.role == ROLE_ADMIN

    @property
    def scoped_user_id(self) -> str | None:
        """The user id visibility is limited to, or None for an unscoped caller."""
        return None if self.synthetic else self.user_id


SYNTHETIC_IDENTITY = Identity(user_id=DEFAULT_USER_ID, role=ROLE_ADMIN, synthetic=True)

_current: ContextVar[Identity | None] = ContextVar("kandev_identity", default=None)


def current_identity() -> Identity | None:
    return _current.get()


def caller_scope() -> str | None:
    """The user id the current caller is scoped to; None means unscoped (sees everything)."""
    identity = _current.get()
    return None if identity is None else identity.scoped_user_id


@contextmanager
def acting_as(identity: Identity | None) -> Iterator[None]:
    token = set_identity(identity)
    try:
        yield
    finally:
        reset_identity(token)


def set_identity(identity: Identity | None) -> Token[Identity | None]:
    """`acting_as` without the context manager, for code that holds it while a request
    waits for hours (a generator frame per waiting agent): reset it with `reset_identity`."""
    return _current.set(identity)


def reset_identity(token: Token[Identity | None]) -> None:
    _current.reset(token)
