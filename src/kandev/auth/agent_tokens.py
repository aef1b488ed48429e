"""Per-session agent tokens for the agent MCP endpoint.

`kandev_agent_<8 hex>_<secret>`, only the SHA-256 stored, revoked when the session ends.
The token binds one session and its task; the caller acts as the task's workspace owner
(reference §1.8): auth off → unscoped; unowned or no workspace → a member identity that sees
only unowned rows; an owner that is missing or disabled → the token is refused.
"""

from __future__ import annotations

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
        return await repo.revoke_session_tokens(conn, session_id, self.clock.now())

    async def resolve(self, raw: str) -> AgentPrincipal | None:
        token = parse_prefixed_token(raw, AGENT_KIND)
        if token is None:
            return None
        async with self.db.read() as conn:
            row = await repo.resolve_agent_token(conn, token.sha256)
        if row is None or row["session_state"] in TERMINAL_STATES or row["task_id"] is None:
            return None
        identity = self._identity_for(row)
        if identity is None:
            return None
        return AgentPrincipal(row["id"], row["session_id"], row["task_id"], identity)

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
