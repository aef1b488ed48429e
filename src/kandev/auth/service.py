"""Authentication: modes, first-admin setup, login, sessions, personal access tokens, users.

The mode is cached in memory; it is read at startup (`refresh_mode`), set when the first
admin is created in this process, and re-checked on every request while it is `setup`
(`current_mode`), so a first admin created offline by another process counts at once.

Guards on who may call what live here too, so every surface (REST, MCP, CLI) gets the same
answers: credential management for a missing or
synthetic identity "does not exist" (NotFound), user management needs an admin (Forbidden).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth import passwords
from kandev.auth import repository as repo
from kandev.auth.identity import DEFAULT_USER_ID, ROLE_ADMIN, Identity
from kandev.auth.rate_limit import LoginRateLimiter
from kandev.auth.records import ApiToken, User
from kandev.auth.tokens import (
    hash_token,
    looks_like_session_token,
    new_pat,
    new_session_token,
    parse_pat,
)
from kandev.auth.validation import (
    MAX_PASSWORD,
    normalize_email,
    validate_display_name,
    validate_email,
    validate_password,
    validate_role,
    validate_token_name,
    validate_ttl_hours,
)
from kandev.clock import Clock, isoformat
from kandev.config import Settings
from kandev.db.engine import Database
from kandev.errors import (
    Conflict,
    DuplicateRow,
    Forbidden,
    NotFound,
    Unauthorized,
    ValidationFailed,
)
from kandev.ids import IdFactory

AuthMode = Literal["disabled", "setup", "enabled"]

DEFAULT_SESSION_TTL_HOURS = 720
# Writes on the hot path are throttled: last_seen_at / last_used_at move at most once a minute.
TOUCH_INTERVAL = timedelta(seconds=60)
MAX_USER_AGENT = 256
INVALID_CREDENTIALS = "invalid email or password"
SETUP_UNAVAILABLE = "setup is not available"
EMAIL_TAKEN = "email already registered"
VERIFIED_TOKENS_KEPT = 10_000  # personal access tokens verified and kept in memory
DELETED_TOKENS_REMEMBERED = 10_000


@dataclass(frozen=True)
class _VerifiedToken:
    """A personal access token this server verified: who it is, and what may still end it."""

    token_id: str
    user_id: str
    role: str
    expires_at: datetime | None
    last_used_at: datetime | None


@dataclass(frozen=True)
class SessionGrant:
    """A freshly created browser session: the raw cookie value is only ever held here."""

    user: dict[str, Any]
    token: str = field(repr=False)
    max_age: int  # cookie Max-Age, seconds


def user_json(user: User) -> dict[str, Any]:
    """The public shape of a user; hashes and settings never leave the service."""
    return {
        "id": user.id,
        "email": user.email,
        "display_name": user.display_name,
        "role": user.role,
        "status": user.status,
        "created_at": isoformat(user.created_at),
        "updated_at": isoformat(user.updated_at),
    }


def token_json(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "created_at": isoformat(token.created_at),
        "expires_at": isoformat(token.expires_at),
        "last_used_at": isoformat(token.last_used_at),
    }


def require_real(identity: Identity | None) -> Identity:
    """Credential management does not exist for internal or synthetic (auth off) callers."""
    if identity is None or identity.synthetic:
        raise NotFound("not found")
    return identity


def require_admin(identity: Identity | None) -> Identity:
    identity = require_real(identity)
    if not identity.is_admin:
        raise Forbidden("admin role required")
    return identity


class AuthService:
    def __init__(
        self, db: Database, clock: Clock, settings: Settings, id_factory: IdFactory
    ) -> None:
        self._db = db
        self._clock = clock
        self._settings = settings
        self._new_id = id_factory
        # Fail closed until refresh_mode has read the database: credentials required.
        self._mode: AuthMode = "enabled" if settings.auth else "disabled"
        self._setup_lock = asyncio.Lock()
        self._limiter = LoginRateLimiter(
            clock, settings.login_attempts, settings.login_window_seconds
        )
        # Personal access tokens by digest, so a scripted caller is not looked up on every
        # request. Only this server deletes a token (delete_token forgets it before the
        # deleting transaction commits, and a deleted id is never kept again); expiry is
        # checked on every use; users are never disabled and their role does not change.
        self._verified: OrderedDict[str, _VerifiedToken] = OrderedDict()
        self._deleted_token_ids: OrderedDict[str, None] = OrderedDict()
        self._token_generation = 0

    # --- mode -------------------------------------------------------------------------

    @property
    def mode(self) -> AuthMode:
        return self._mode

    @property
    def session_ttl(self) -> timedelta:
        hours = self._settings.session_ttl_hours
        return timedelta(hours=hours if hours > 0 else DEFAULT_SESSION_TTL_HOURS)

    @property
    def session_max_age(self) -> int:
        return int(self.session_ttl.total_seconds())

    async def refresh_mode(self) -> AuthMode:
        if not self._settings.auth:
            self._mode = "disabled"
            return self._mode
        async with self._db.read() as conn:
            admins = await repo.count_admin_identities(conn)
        self._mode = "enabled" if admins else "setup"
        return self._mode

    async def current_mode(self) -> AuthMode:
        """The mode, re-read from the database only while it is `setup` (one COUNT per
        request until the first admin exists; free afterwards). It only ever moves forward,
        so a racing reader can't put a server that just left setup back into it."""
        if self._mode != "setup":
            return self._mode
        async with self._db.read() as conn:
            admins = await repo.count_admin_identities(conn)
        if admins and self._mode == "setup":
            self._mode = "enabled"
        return self._mode

    async def ensure_default_user(self) -> None:
        async with self._db.write() as conn:
            await repo.insert_default_user_if_missing(conn, self._clock.now())

    # --- setup and users --------------------------------------------------------------

    async def setup(
        self,
        email: str,
        password: str,
        display_name: str | None = None,
        *,
        client_ip: str = "",
        user_agent: str = "",
    ) -> SessionGrant:
        """Create the first admin (the default-user row, promoted) and log them in."""
        if self._mode != "setup":
            raise Conflict(SETUP_UNAVAILABLE)
        email = validate_email(email)
        password = validate_password(password)
        display_name = validate_display_name(display_name)
        password_hash = await passwords.hash_password_async(password)
        async with self._setup_lock:
            if self._mode != "setup":
                raise Conflict(SETUP_UNAVAILABLE)
            now = self._clock.now()
            try:
                # One transaction: admin, identity, claimed workspaces and session, or nothing.
                async with self._db.write() as conn:
                    user = await self._install_first_admin(
                        conn, email, display_name, password_hash, now
                    )
                    token = await self._insert_session(conn, user.id, client_ip, user_agent, now)
            except DuplicateRow as exc:  # a racing writer took the email or the identity
                await self.refresh_mode()
                raise Conflict(SETUP_UNAVAILABLE) from exc
            except Conflict:
                await self.refresh_mode()
                raise
            self._mode = "enabled"
        return SessionGrant(user=user_json(user), token=token, max_age=self.session_max_age)

    async def create_user(
        self,
        email: str,
        password: str,
        display_name: str | None = None,
        role: str | None = None,
        *,
        actor: Identity | None,
    ) -> dict[str, Any]:
        """Add a user with a local password. `actor=None` is the offline CLI (no guard).

        The first admin ever created (no admin identity yet) goes through the setup path, so
        its id stays default-user and it claims the workspaces made while auth was off.
        """
        if actor is not None:
            require_admin(actor)
        email = validate_email(email)
        password = validate_password(password)
        display_name = validate_display_name(display_name)
        role = validate_role(role)
        password_hash = await passwords.hash_password_async(password)
        first_admin = False
        async with self._setup_lock:
            now = self._clock.now()
            try:
                async with self._db.write() as conn:
                    if role == ROLE_ADMIN and await repo.count_admin_identities(conn) == 0:
                        first_admin = True
                        user = await self._install_first_admin(
                            conn, email, display_name, password_hash, now
                        )
                    else:
                        user = await self._insert_user(
                            conn, email, display_name, role, password_hash, now
                        )
            except DuplicateRow as exc:  # a concurrent insert won the unique email
                raise Conflict(EMAIL_TAKEN) from exc
            if first_admin:
                await self.refresh_mode()
        return user_json(user)

    async def list_users(self, actor: Identity | None) -> list[dict[str, Any]]:
        require_admin(actor)
        async with self._db.read() as conn:
            rows = await repo.list_users(conn)
        return [user_json(row) for row in rows]

    async def identity_for_email(self, email: str) -> Identity:
        """The identity of an active user, for offline tools acting on their behalf."""
        async with self._db.read() as conn:
            user = await repo.get_user_by_email(conn, normalize_email(email))
        if user is None or user.status != repo.STATUS_ACTIVE:
            raise NotFound(f"no active user with email {normalize_email(email)!r}")
        return Identity(user_id=user.id, role=user.role)

    async def _install_first_admin(
        self,
        conn: AsyncConnection,
        email: str,
        display_name: str,
        password_hash: str,
        now: datetime,
    ) -> User:
        owner = await repo.get_user_by_email(conn, email)
        if owner is not None and owner.id != DEFAULT_USER_ID:
            raise Conflict(EMAIL_TAKEN)
        await repo.insert_default_user_if_missing(conn, now)
        # The UPDATE row-locks default-user, so a racing setup waits here and then sees our
        # committed identity in the count below.
        await repo.promote_default_user(conn, email=email, display_name=display_name, now=now)
        if await repo.count_admin_identities(conn) > 0:
            raise Conflict(SETUP_UNAVAILABLE)
        await repo.claim_unowned_workspaces(conn, DEFAULT_USER_ID)
        try:
            await repo.insert_local_identity(
                conn,
                identity_id=self._new_id(),
                user_id=DEFAULT_USER_ID,
                email=email,
                password_hash=password_hash,
                now=now,
            )
        except DuplicateRow as exc:
            raise Conflict(SETUP_UNAVAILABLE) from exc
        user = await repo.get_user(conn, DEFAULT_USER_ID)
        assert user is not None
        return user

    async def _insert_user(
        self,
        conn: AsyncConnection,
        email: str,
        display_name: str,
        role: str,
        password_hash: str,
        now: datetime,
    ) -> User:
        if await repo.get_user_by_email(conn, email) is not None:
            raise Conflict(EMAIL_TAKEN)
        user_id = self._new_id()
        await repo.insert_user(
            conn, user_id=user_id, email=email, display_name=display_name, role=role, now=now
        )
        await repo.insert_local_identity(
            conn,
            identity_id=self._new_id(),
            user_id=user_id,
            email=email,
            password_hash=password_hash,
            now=now,
        )
        user = await repo.get_user(conn, user_id)
        assert user is not None
        return user

    # --- login / logout / me ----------------------------------------------------------

    async def login(
        self, email: str, password: str, client_ip: str = "", user_agent: str = ""
    ) -> SessionGrant:
        if self._mode == "disabled":
            raise Conflict("login is not available while auth is disabled")
        if not isinstance(email, str) or not isinstance(password, str):
            raise Unauthorized(INVALID_CREDENTIALS)
        if len(password) > MAX_PASSWORD:
            raise ValidationFailed("password", f"must be at most {MAX_PASSWORD} characters")
        email = normalize_email(email)
        key = LoginRateLimiter.key(client_ip, email)
        self._limiter.hit(key)  # before any check, so the right password can't skip the brake
        async with self._db.read() as conn:
            record = await repo.get_login_record(conn, email)
        if record is None or record.user.status != repo.STATUS_ACTIVE:
            await passwords.dummy_verify_async(password)
            raise Unauthorized(INVALID_CREDENTIALS)
        if not await passwords.verify_password_async(record.password_hash, password):
            raise Unauthorized(INVALID_CREDENTIALS)
        self._limiter.reset(key)
        now = self._clock.now()
        async with self._db.write() as conn:
            token = await self._insert_session(conn, record.user.id, client_ip, user_agent, now)
        return SessionGrant(user=user_json(record.user), token=token, max_age=self.session_max_age)

    async def logout(self, identity: Identity | None) -> None:
        """End the cookie session the caller used (a PAT caller has none to end)."""
        if identity is None or identity.synthetic or identity.session_id is None:
            return
        async with self._db.write() as conn:
            await repo.delete_session(conn, identity.session_id)

    async def me(self, identity: Identity | None) -> dict[str, Any]:
        anonymous = {"mode": self._mode, "authenticated": False, "user": None}
        if identity is None:
            return anonymous
        async with self._db.read() as conn:
            user = await repo.get_user(conn, identity.user_id)
        if user is None:
            return anonymous
        return {"mode": self._mode, "authenticated": True, "user": user_json(user)}

    async def _insert_session(
        self, conn: AsyncConnection, user_id: str, client_ip: str, user_agent: str, now: datetime
    ) -> str:
        token = new_session_token()
        await repo.insert_session(
            conn,
            session_id=self._new_id(),
            user_id=user_id,
            token_sha256=hash_token(token),
            now=now,
            expires_at=now + self.session_ttl,
            user_agent=(user_agent or "")[:MAX_USER_AGENT],
            ip=client_ip or "",
        )
        return token

    # --- credential resolution (middleware) -------------------------------------------

    async def resolve_session_token(self, raw: str, client_ip: str = "") -> Identity | None:
        """The identity behind a session cookie, sliding its expiry; None when not valid."""
        if not looks_like_session_token(raw):
            return None
        async with self._db.read() as conn:
            session = await repo.get_session_by_hash(conn, hash_token(raw))
            user = await repo.get_user(conn, session.user_id) if session else None
        if session is None:
            return None
        now = self._clock.now()
        if session.expires_at <= now:
            async with self._db.write() as conn:
                await repo.delete_session(conn, session.id)
            return None
        if user is None or user.status != repo.STATUS_ACTIVE:
            return None
        if now - session.last_seen_at > TOUCH_INTERVAL:
            async with self._db.write() as conn:
                await repo.touch_session(
                    conn,
                    session.id,
                    last_seen_at=now,
                    expires_at=now + self.session_ttl,
                    ip=client_ip if client_ip != session.ip else None,
                )
        return Identity(user_id=user.id, role=user.role, session_id=session.id)

    async def resolve_bearer(self, raw: str) -> Identity | None:
        """The identity behind a personal access token; other bearer kinds are not ours."""
        token = parse_pat(raw)
        if token is None:
            return None
        verified = self._verified.get(token.sha256)
        if verified is None:
            verified = await self._verify_token(token.sha256)
            if verified is None:
                return None
        now = self._clock.now()
        if verified.expires_at is not None and verified.expires_at <= now:
            self._verified.pop(token.sha256, None)
            return None
        if verified.last_used_at is None or now - verified.last_used_at > TOUCH_INTERVAL:
            async with self._db.write() as conn:
                await repo.touch_api_token(conn, verified.token_id, now)
            if token.sha256 in self._verified:
                self._verified[token.sha256] = replace(verified, last_used_at=now)
        return Identity(user_id=verified.user_id, role=verified.role, token_id=verified.token_id)

    async def _verify_token(self, digest: str) -> _VerifiedToken | None:
        generation = self._token_generation
        async with self._db.read() as conn:
            row = await repo.get_api_token_by_hash(conn, digest)
            user = await repo.get_user(conn, row.user_id) if row else None
        if row is None or user is None or user.status != repo.STATUS_ACTIVE:
            return None
        verified = _VerifiedToken(row.id, user.id, user.role, row.expires_at, row.last_used_at)
        # Kept unless a token was deleted while the row was read (maybe this one).
        if generation == self._token_generation and row.id not in self._deleted_token_ids:
            self._verified[digest] = verified
            while len(self._verified) > VERIFIED_TOKENS_KEPT:
                self._verified.popitem(last=False)
        return verified

    def _forget_token(self, token_id: str) -> None:
        self._token_generation += 1
        self._deleted_token_ids[token_id] = None
        while len(self._deleted_token_ids) > DELETED_TOKENS_REMEMBERED:
            self._deleted_token_ids.popitem(last=False)
        for digest in [d for d, v in self._verified.items() if v.token_id == token_id]:
            del self._verified[digest]

    # --- personal access tokens -------------------------------------------------------

    async def create_token(
        self, identity: Identity | None, name: str, ttl_hours: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Mint a PAT; the raw string is returned once and only its SHA-256 is stored."""
        owner = require_real(identity)
        name = validate_token_name(name)
        hours = validate_ttl_hours(ttl_hours)
        token = new_pat()
        now = self._clock.now()
        token_id = self._new_id()
        async with self._db.write() as conn:
            await repo.insert_api_token(
                conn,
                token_id=token_id,
                user_id=owner.user_id,
                name=name,
                prefix=token.prefix,
                token_sha256=token.sha256,
                now=now,
                expires_at=now + timedelta(hours=hours) if hours else None,
            )
            row = await repo.get_api_token(conn, token_id)
        assert row is not None
        return token.raw, token_json(row)

    async def list_tokens(self, identity: Identity | None) -> list[dict[str, Any]]:
        owner = require_real(identity)
        async with self._db.read() as conn:
            rows = await repo.list_api_tokens(conn, owner.user_id)
        return [token_json(row) for row in rows]

    async def delete_token(self, identity: Identity | None, token_id: str) -> None:
        owner = require_real(identity)
        async with self._db.write() as conn:
            deleted = await repo.delete_api_token(conn, token_id, owner.user_id)
            if deleted:  # refused from now on, before the delete even commits
                self._forget_token(token_id)
        if not deleted:
            raise NotFound("not found")
