"""Serve both MCP surfaces on the app: `/mcp` (external) and `/agent/mcp` (agent).

Both speak Streamable HTTP; both `/mcp` and `/mcp/` answer (no redirect: the SDK client posts
to the exact URL it is given). The legacy (2024-11-05 … 2025-11-25) transport runs stateless:
every POST is self-contained, a tool call's progress notifications stream on that POST's
SSE response; 2026-07-28 requests are always self-contained. Each endpoint's session manager
must run for the app's lifetime: enter `mcp_lifespan(app)` inside the app lifespan.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import BaseRoute, Route

from kandev.mcp.auth import McpAuthGate
from kandev.mcp.server import SurfaceName, build_mcp_server

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from kandev.config import Settings
    from kandev.services import SurfaceServices

EXTERNAL_PATH = "/mcp"
AGENT_PATH = "/agent/mcp"
STATELESS_HTTP = True


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The SDK's own Host/Origin check is off: PerimeterMiddleware, outside the whole app,
    already answers both MCP endpoints with the one allowed-host list (421 / 403 JSON, the
    same as every other route), so a second, differently-spelled list would only drift."""
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


@dataclass
class McpEndpoints:
    external: MCPServer
    agent: MCPServer

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run both session managers (each can run once per instance)."""
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.external.session_manager.run())
            await stack.enter_async_context(self.agent.session_manager.run())
            yield


def _endpoint_routes(server: MCPServer, services: SurfaceServices, surface: SurfaceName, path: str):
    # Builds the session manager; we route to it directly instead of mounting the SDK's
    # Starlette app, so there is no Mount redirect between `/mcp` and `/mcp/`.
    server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=STATELESS_HTTP,
        json_response=False,
        transport_security=transport_security(services.settings),
    )
    gate = McpAuthGate(server.session_manager.handle_request, services, surface)
    return [Route(path, endpoint=gate), Route(path + "/", endpoint=gate)]


def mount_mcp(app: Starlette, services: SurfaceServices) -> McpEndpoints:
    """Add both MCP endpoints in front of the app's other routes; returns (and stores in
    `app.state.mcp`) the servers, whose session managers `mcp_lifespan(app)` runs."""
    endpoints = McpEndpoints(
        external=build_mcp_server(services, "external"),
        agent=build_mcp_server(services, "agent"),
    )
    routes: list[BaseRoute] = [
        *_endpoint_routes(endpoints.external, services, "external", EXTERNAL_PATH),
        *_endpoint_routes(endpoints.agent, services, "agent", AGENT_PATH),
    ]
    app.router.routes[0:0] = routes
    app.state.mcp = endpoints
    return endpoints


def is_mounted(app: Starlette) -> bool:
    return getattr(app.state, "mcp", None) is not None


@asynccontextmanager
async def mcp_lifespan(app: Starlette) -> AsyncIterator[None]:
    """Run the session managers of the endpoints `mount_mcp(app, …)` added."""
    endpoints: McpEndpoints = app.state.mcp
    async with endpoints.run():
        yield
