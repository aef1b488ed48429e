"""All SQL for users, auth identities, browser sessions and API tokens (SQLAlchemy Core).

Every function takes the caller's AsyncConnection, so the service decides what shares a
transaction. Rows come back as the typed records of `kandev.auth.records`; a write that
clashes with a unique key raises `DuplicateRow` (never the driver's IntegrityError).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.identity import DEFAULT_USER_ID, ROLE_ADMIN
from kandev.auth.records import ApiToken, BrowserSession, LoginRecord, User
from kandev.db.integrity import unique_key
from kandev.db.tables import auth_api_tokens, auth_identities, auth_sessions, users, workspaces

DEFAULT_USER_EMAIL = "default@kandev.local"
LOCAL_PROVIDER = "local"
STATUS_ACTIVE = "active"

# --- users ------------------------------------------------------------------------------


async def count_admin_identities(conn: AsyncConnection) -> int:
    """Active admin users that can log in; zero means the server is still in setup mode."""
    stmt = (
        select(func.count())
        .select_from(auth_identities.join(users, users.c.id == auth_identities.c.user_id))
        .where(users.c.role == ROLE_ADMIN, users.c.status == STATUS_ACTIVE)
    )
    return int((await conn.execute(stmt)).scalar_one())


async def get_user(conn: AsyncConnection, user_id: str) -> User | None:
    row = (await conn.execute(select(users).where(users.c.id == user_id))).mappings().first()
    return User.from_row(row) if row else None


async def get_user_by_email(conn: AsyncConnection, email: str) -> User | None:
    row = (await conn.execute(select(users).where(users.c.email == email))).mappings().first()
    return User.from_row(row) if row else None


async def insert_user(
    conn: AsyncConnection,
    *,
    user_id: str,
    email: str,
    display_name: str,
    role: str,
    now: datetime,
) -> None:
    """Raises DuplicateRow("users.email") when the email is taken."""
    with unique_key("users.email"):
        await conn.execute(
            insert(users).values(
                id=user_id,
                email=email,
                display_name=display_name,
                role=role,
                status=STATUS_ACTIVE,
                created_at=now,
                updated_at=now,
            )
        )


async def insert_default_user_if_missing(conn: AsyncConnection, now: datetime) -> None:
    """Seed the default-user row; ON CONFLICT DO NOTHING so racing starters both succeed."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = (
        dialect.insert(users)
        .values(
            id=DEFAULT_USER_ID,
            email=DEFAULT_USER_EMAIL,
            display_name="",
            role=ROLE_ADMIN,
            status=STATUS_ACTIVE,
            created_at=now,
            updated_at=now,
        )
        .on_conflict_do_nothing()
    )
    await conn.execute(stmt)


async def promote_default_user(
    conn: AsyncConnection, *, email: str, display_name: str, now: datetime
) -> bool:
    """Turn default-user into the first admin in place (its id and settings are kept).

    On PostgreSQL the UPDATE also takes the row lock that serializes racing setups. Raises
    DuplicateRow("users.email") when another user holds the email.
    """
    with unique_key("users.email"):
        result = await conn.execute(
            update(users)
            .where(users.c.id == DEFAULT_USER_ID)
            .values(
                email=email,
                display_name=display_name,
                role=ROLE_ADMIN,
                status=STATUS_ACTIVE,
                updated_at=now,
            )
        )
    return result.rowcount == 1


async def list_users(conn: AsyncConnection) -> list[User]:
    stmt = select(users).order_by(users.c.created_at, users.c.id)
    return [User.from_row(row) for row in (await conn.execute(stmt)).mappings()]


async def claim_unowned_workspaces(conn: AsyncConnection, user_id: str) -> int:
    """Give every workspace created while auth was off to the first admin."""
    result = await conn.execute(
        update(workspaces).where(workspaces.c.owner_id == "").values(owner_id=user_id)
    )
    return result.rowcount


# --- identities -------------------------------------------------------------------------


async def insert_local_identity(
    conn: AsyncConnection,
    *,
    identity_id: str,
    user_id: str,
    email: str,
    password_hash: str,
    now: datetime,
) -> None:
    """Raises DuplicateRow when the user already has a local identity or the email (the
    subject) is another's."""
    with unique_key("auth_identities.local"):
        await conn.execute(
            insert(auth_identities).values(
                id=identity_id,
                user_id=user_id,
                provider=LOCAL_PROVIDER,
                subject=email,
                password_hash=password_hash,
                created_at=now,
                updated_at=now,
            )
        )


async def get_login_record(conn: AsyncConnection, email: str) -> LoginRecord | None:
    """The user with this email plus its local password hash (None without a local identity)."""
    stmt = (
        select(users, auth_identities.c.password_hash)
        .select_from(users.join(auth_identities, auth_identities.c.user_id == users.c.id))
        .where(users.c.email == email, auth_identities.c.provider == LOCAL_PROVIDER)
    )
    row = (await conn.execute(stmt)).mappings().first()
    return LoginRecord.from_row(row) if row else None


# --- browser sessions -------------------------------------------------------------------


async def insert_session(
    conn: AsyncConnection,
    *,
    session_id: str,
    user_id: str,
    token_sha256: str,
    now: datetime,
    expires_at: datetime,
    user_agent: str,
    ip: str,
) -> None:
    with unique_key("auth_sessions.token_sha256"):
        await conn.execute(
            insert(auth_sessions).values(
                id=session_id,
                user_id=user_id,
                token_sha256=token_sha256,
                created_at=now,
                expires_at=expires_at,
                last_seen_at=now,
                user_agent=user_agent,
                ip=ip,
            )
        )


async def get_session_by_hash(conn: AsyncConnection, token_sha256: str) -> BrowserSession | None:
    stmt = select(auth_sessions).where(auth_sessions.c.token_sha256 == token_sha256)
    row = (await conn.execute(stmt)).mappings().first()
    return BrowserSession.from_row(row) if row else None


async def get_session(conn: AsyncConnection, session_id: str) -> BrowserSession | None:
    stmt = select(auth_sessions).where(auth_sessions.c.id == session_id)
    row = (await conn.execute(stmt)).mappings().first()
    return BrowserSession.from_row(row) if row else None


async def touch_session(
    conn: AsyncConnection,
    session_id: str,
    *,
    last_seen_at: datetime,
    expires_at: datetime,
    ip: str | None = None,
) -> None:
    values: dict[str, Any] = {"last_seen_at": last_seen_at, "expires_at": expires_at}
    if ip:
        values["ip"] = ip
    await conn.execute(update(auth_sessions).where(auth_sessions.c.id == session_id).values(values))


async def delete_session(conn: AsyncConnection, session_id: str) -> bool:
    result = await conn.execute(delete(auth_sessions).where(auth_sessions.c.id == session_id))
    return result.rowcount > 0


# --- personal access tokens -------------------------------------------------------------


async def insert_api_token(
    conn: AsyncConnection,
    *,
    token_id: str,
    user_id: str,
    name: str,
    prefix: str,
    token_sha256: str,
    now: datetime,
    expires_at: datetime | None,
) -> None:
    with unique_key("auth_api_tokens.token_sha256"):
        await conn.execute(
            insert(auth_api_tokens).values(
                id=token_id,
                user_id=user_id,
                name=name,
                prefix=prefix,
                token_sha256=token_sha256,
                created_at=now,
                last_used_at=None,
                expires_at=expires_at,
            )
        )


async def get_api_token(conn: AsyncConnection, token_id: str) -> ApiToken | None:
    stmt = select(auth_api_tokens).where(auth_api_tokens.c.id == token_id)
    row = (await conn.execute(stmt)).mappings().first()
    return ApiToken.from_row(row) if row else None


async def get_api_token_by_hash(conn: AsyncConnection, token_sha256: str) -> ApiToken | None:
    stmt = select(auth_api_tokens).where(auth_api_tokens.c.token_sha256 == token_sha256)
    row = (await conn.execute(stmt)).mappings().first()
    return ApiToken.from_row(row) if row else None


async def list_api_tokens(conn: AsyncConnection, user_id: str) -> list[ApiToken]:
    stmt = (
        select(auth_api_tokens)
        .where(auth_api_tokens.c.user_id == user_id)
        .order_by(auth_api_tokens.c.created_at, auth_api_tokens.c.id)
    )
    return [ApiToken.from_row(row) for row in (await conn.execute(stmt)).mappings()]


async def delete_api_token(conn: AsyncConnection, token_id: str, user_id: str) -> bool:
    """Scoped by owner: another user's token id deletes nothing."""
    result = await conn.execute(
        delete(auth_api_tokens).where(
            auth_api_tokens.c.id == token_id, auth_api_tokens.c.user_id == user_id
        )
    )
    return result.rowcount > 0


async def touch_api_token(conn: AsyncConnection, token_id: str, now: datetime) -> None:
    await conn.execute(
        update(auth_api_tokens).where(auth_api_tokens.c.id == token_id).values(last_used_at=now)
    )
