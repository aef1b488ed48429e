"""An in-process HTTP client for REST tests that need no streaming (lifespan included)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from kandev.app import create_app
from kandev.clock import ManualClock
from kandev.config import Settings
from kandev.services import build_services


@asynccontextmanager
async def asgi_client(
    tmp_path: Path, database_url: str = "", clock: ManualClock | None = None, **settings: object
) -> AsyncIterator[httpx.AsyncClient]:
    config = Settings(data_dir=tmp_path / "home", database_url=database_url, **settings)
    services = build_services(config, clock=clock or ManualClock())
    app = create_app(config, services=services)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            client.services = services  # type: ignore[attr-defined]
            yield client
