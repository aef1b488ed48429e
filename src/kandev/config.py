"""Settings, read from flags and KANDEV_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SQLITE_FILE_NAME = "kandev.db"  # the database in the data dir, without --database-url


def default_data_dir() -> Path:
    return Path.home() / ".kandev"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KANDEV_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8420
    # KANDEV_HOME names the data dir (CONTRACT §1); `data_dir` is the field behind it.
    data_dir: Path = Field(
        default_factory=default_data_dir, validation_alias=AliasChoices("KANDEV_HOME", "data_dir")
    )
    database_url: str = ""
    auth: bool = False
    session_ttl_hours: int = 720
    login_attempts: int = 10
    login_window_seconds: int = 300
    # Seconds between MCP progress notifications while an agent waits for an answer.
    clarification_progress_seconds: float = 20.0
    # How agents started by this server reach it (agent MCP endpoint); derived when empty.
    public_url: str = ""
    # The perimeter (CONTRACT §8). Extra Host names to answer (comma-separated; loopback,
    # the bound host and the public URL's host are always allowed).
    allowed_hosts: str = ""
    # Addresses of reverse proxies whose X-Forwarded-For / -Proto are believed (comma-separated).
    trust_proxy: str = ""
    # Largest request body accepted, in bytes (413 beyond it, before parsing).
    max_body_bytes: int = 1024 * 1024
    # Seconds an agent has to start: spawn, ACP initialize, authenticate, session/new or load
    # (a cold `npx --yes` download of an adapter counts against it).
    agent_start_timeout: float = Field(default=120.0, gt=0)
    # Seconds between sweeps for worktrees of deleted tasks (`kandev gc`); 0 = no sweep.
    worktree_sweep_seconds: float = Field(default=3600.0, ge=0)
    # Seconds a request may queue for a database connection (or SQLite's write lock) before
    # it is refused with 503 + Retry-After instead of piling up (kandev.db.engine).
    db_queue_timeout_seconds: float = Field(default=30.0, gt=0)
    # Startup failures print a traceback instead of one line.
    debug: bool = False
    # The server's log: Kandev's own lines (agents, questions, the perimeter) and uvicorn's.
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_log_level(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    def public_base_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def resolved_database_url(self) -> str:
        """The SQLAlchemy async URL: the configured one, or a SQLite file in the data dir."""
        return normalize_database_url(self.database_url, self.data_dir)


def normalize_database_url(url: str, data_dir: Path) -> str:
    """Accept the URLs users type (postgresql://, sqlite:///x) and pick the async driver."""
    if not url:
        return f"sqlite+aiosqlite:///{(data_dir / SQLITE_FILE_NAME).resolve()}"
    for plain, driver in (
        ("postgresql://", "postgresql+asyncpg://"),
        ("postgres://", "postgresql+asyncpg://"),
        ("sqlite://", "sqlite+aiosqlite://"),
    ):
        if url.startswith(plain):
            return driver + url[len(plain) :]
    if url.startswith(("postgresql+asyncpg://", "sqlite+aiosqlite://")):
        return url
    raise ValueError(
        f"database URL must start with postgresql:// or sqlite:// (got {url.split('://', 1)[0]!r})"
    )
