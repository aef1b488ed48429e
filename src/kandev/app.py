"""Builds the ASGI app: perimeter, error mapping, auth middleware, routers, lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from kandev import __version__
from kandev.api import (
    agent_profiles,
    auth,
    clarification,
    events,
    health,
    permissions,
    repositories,
    sessions,
    task_changes,
    tasks,
    users,
    workflows,
    workspaces,
)
from kandev.api.errors import install_error_handlers
from kandev.auth.middleware import AuthMiddleware
from kandev.config import Settings
from kandev.mcp import mcp_lifespan, mount_mcp
from kandev.perimeter import install_perimeter
from kandev.services import Services, build_services
from kandev.web import router as web_router
from kandev.web import static_app


def create_app(settings: Settings | None = None, *, services: Services | None = None) -> FastAPI:
    settings = settings or Settings()
    services = services or build_services(settings)

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[None]:
        await services.prepare()
        try:
            async with mcp_lifespan(app_):  # both MCP session managers
                yield
        finally:
            await services.close()

    # No /docs or /redoc: they load Swagger/ReDoc from a CDN (nothing offline). The schema
    # stays at /openapi.json, behind auth like the API (kandev.auth.middleware).
    app = FastAPI(
        title="Kandev", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.services = services
    install_error_handlers(app)
    # The hot paths first: routes are matched one after another (FastAPI's matching costs
    # ~1-2 µs a route, ~100 µs for a route at the end), and agents and answerers hit these
    # on every turn and answer. No two routers' paths overlap (tests/api check that every
    # route still resolves to itself), so the order changes nothing else.
    for module in (
        sessions,
        clarification,
        permissions,
        events,
        health,
        auth,
        users,
        workspaces,
        repositories,
        workflows,
        tasks,
        task_changes,
        agent_profiles,
    ):
        app.include_router(module.router)
    app.include_router(web_router)  # web pages and fragments, /static/vendor (node_modules)
    app.mount("/static", static_app(), name="static")  # Kandev's own CSS and ES modules
    mount_mcp(app, services.surface)  # /mcp (people, bots) and /agent/mcp (session agents)
    app.add_middleware(AuthMiddleware, auth_service=services.auth)
    install_perimeter(app, services.settings)  # outermost: hosts, origins, bodies on every route
    return app
