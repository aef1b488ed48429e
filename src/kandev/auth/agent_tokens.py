"""Per-session agent tokens for the agent MCP endpoint.

`kandev_agent_<8 hex>_<secret>`, only the SHA-256 stored, revoked when the session ends.
The token binds one session and its task; the caller acts as the task's workspace owner
(reference §1.8): auth off → unscoped; unowned or no workspace → a member identity that sees
only unowned rows; an owner that is missing or disabled → the token is refused.

Every agent MCP request presents the token, so the verified principal is kept in memory by
token digest. It is forgotten when the token is revoked (the session ends, or its agent is
relaunched with a new token) — as soon as the revoking UPDATE ran, and a token seen revoked
is never cached again, so a lookup racing the revoking transaction cannot bring it back —
and when the session ends (`invalidate_session`, a session_ended hook). What else the
principal depends on cannot change under a live session: a workspace with tasks cannot be
deleted, its owner never changes and users are never disabled — except unowned workspaces,
which the first admin's setup (maybe offline) claims: those principals are not cached.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth import agent_token_repository as repo
from kandev.auth.identity import ROLE_MEMBER, SYNTHETIC_IDENTITY, Identity
from kandev.auth.tokens import new_prefixed_token, parse_prefixed_token
from kandev.catalog.states import TERMINAL_STATES
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.ids import IdFactory

AGENT_KIND = "agent"
UNOWNED_WORKSPACE_USER = "kandev:unowned-workspace"
PRINCIPAL_CACHE_SIZE = 10_000  # verified tokens kept (a few per live session)
REVOKED_MEMORY = 10_000  # revoked digests remembered, so none is cached again meanwhile


@dataclass(frozen=True)
class AgentPrincipal:
    """Who an agent token speaks for."""

    token_id: str
    session_id: str
    task_id: str
    identity: Identity


class AgentTokenService:
    def __init__(self, db: Database, clock: Clock, new_id: IdFactory, auth_enabled: bool) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id
        self.auth_enabled = auth_enabled
        self._principals: OrderedDict[str, AgentPrincipal] = OrderedDict()  # by digest
        # A tuple, not a set: a session has one token or two (a set is 216 bytes per
        # session, for as long as its agent waits).
        self._digests_of_session: dict[str, tuple[str, ...]] = {}
        self._revoked: OrderedDict[str, None] = OrderedDict()
        self._generation = 0  # bumped by every invalidation

    async def mint(self, conn: AsyncConnection, session_id: str, task_id: str) -> str:
        """A new token for the session, inside the caller's transaction; the raw value once."""
        token = new_prefixed_token(AGENT_KIND)
        await repo.insert_agent_token(
            conn,
            {
                "id": self.new_id(),
                "session_id": session_id,
                "task_id": task_id,
                "prefix": token.prefix,
                "token_sha256": token.sha256,
                "created_at": self.clock.now(),
            },
        )
        return token.raw

    async def revoke_for_session(self, conn: AsyncConnection, session_id: str) -> int:
        """Revoke the session's tokens inside the caller's transaction; refused from the
        next request on (not cached from now, whether or not the transaction commits)."""
        digests = await repo.revoke_session_tokens(conn, session_id, self.clock.now())
        for digest in digests:
            self._revoked[digest] = None
            self._revoked.move_to_end(digest)
            while len(self._revoked) > REVOKED_MEMORY:
                self._revoked.popitem(last=False)
        self.invalidate_session(session_id)
        return len(digests)

    def invalidate_session(self, session_id: str) -> None:
        """Forget the cached principals of a session (it ended, or its tokens changed)."""
        self._generation += 1
        for digest in self._digests_of_session.pop(session_id, ()):
            self._principals.pop(digest, None)

    async def forget_session(self, session_id: str) -> None:
        """The session ended (a session_ended hook, after its transaction committed)."""
        self.invalidate_session(session_id)

    def invalidate_all(self) -> None:
        self._generation += 1
        self._principals.clear()
        self._digests_of_session.clear()

    async def resolve(self, raw: str) -> AgentPrincipal | None:
        token = parse_prefixed_token(raw, AGENT_KIND)
        if token is None:
            return None
        cached = self._principals.get(token.sha256)
        if cached is not None:
            return cached
        generation = self._generation
        async with self.db.read() as conn:
            row = await repo.resolve_agent_token(conn, token.sha256)
        if row is None or row["session_state"] in TERMINAL_STATES or row["task_id"] is None:
            return None
        identity = self._identity_for(row)
        if identity is None:
            return None
        principal = AgentPrincipal(row["id"], row["session_id"], row["task_id"], identity)
        # Cached only if nothing was invalidated or revoked while the row was read, and
        # not for an unowned workspace (setup may claim it; see the module docstring).
        if (
            generation == self._generation
            and token.sha256 not in self._revoked
            and identity.user_id != UNOWNED_WORKSPACE_USER
        ):
            self._remember(token.sha256, principal)
        return principal

    def _remember(self, digest: str, principal: AgentPrincipal) -> None:
        self._principals[digest] = principal
        digests = self._digests_of_session.get(principal.session_id, ())
        if digest not in digests:
            self._digests_of_session[principal.session_id] = (*digests, digest)
        while len(self._principals) > PRINCIPAL_CACHE_SIZE:
            old_digest, old = self._principals.popitem(last=False)
            of_session = self._digests_of_session.get(old.session_id, ())
            kept = tuple(d for d in of_session if d != old_digest)
            if kept:
                self._digests_of_session[old.session_id] = kept
            else:
                self._digests_of_session.pop(old.session_id, None)

    def _identity_for(self, row) -> Identity | None:  # type: ignore[no-untyped-def]
        if not self.auth_enabled:
            return SYNTHETIC_IDENTITY
        owner = row["owner_id"] or ""
        if row["workspace_id"] and row["workspace_row_id"] is None:
            return None  # the task names a workspace that no longer exists: refuse
        if owner == "":
            # Never an identity-free context: that would read as "internal, sees everything".
            return Identity(user_id=UNOWNED_WORKSPACE_USER, role=ROLE_MEMBER)
        if row["owner_status"] != "active":
            return None
        return Identity(user_id=owner, role=row["owner_role"] or ROLE_MEMBER)
