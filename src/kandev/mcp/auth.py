"""The authentication gate in front of each MCP endpoint (plain ASGI, before any MCP work).

External `/mcp`: auth off → the synthetic identity; otherwise `Bearer kandev_pat_…` (or a
valid browser session cookie when no Authorization header is sent), else 401 — saying a
token is required when none was sent, "invalid or expired credentials" (REST's words) when
one was and is not valid.
Agent `/agent/mcp`: always `Bearer kandev_agent_…` (the token names the session, also with
auth off), else 401.

The resolved `McpCaller` goes into the request scope (read back by the tool runner from the
SDK's request context) and into the identity/caller contextvars for the rest of the request.
Each authorized request also gets a `ResponseReceipt` (kandev.mcp.delivery): a tool can ask
to confirm something only once its result was actually sent to the client.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kandev.auth.identity import SYNTHETIC_IDENTITY
from kandev.auth.middleware import INVALID_CREDENTIALS, SESSION_COOKIE
from kandev.mcp.context import SCOPE_KEY, McpCaller, enter_caller
from kandev.mcp.delivery import run_with_receipt

if TYPE_CHECKING:
    from kandev.services import SurfaceServices

EXTERNAL_UNAUTHORIZED = "external MCP requires a personal access token"
AGENT_UNAUTHORIZED = "agent MCP requires the session's agent token"


def _bearer(conn: HTTPConnection) -> str | None:
    """The bearer credential, '' for a malformed Authorization header, None when absent."""
    header = conn.headers.get("authorization")
    if header is None:
        return None
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer":
        return ""
    return credential.strip()


def unauthorized(message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=401, headers={"WWW-Authenticate": "Bearer"})


class McpAuthGate:
    def __init__(self, app: ASGIApp, services: SurfaceServices, surface: str) -> None:
        self.app = app
        self.services = services
        self.surface = surface

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not itself a coroutine: the check runs in the receipt's frame (see
        # run_with_receipt), so a request waiting for hours carries one frame of both.
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        return run_with_receipt(self.app, scope, receive, send, admit=self._admit)

    async def _admit(self, scope: Scope) -> ASGIApp | None:
        """None once the caller is known — in the scope (what the tool runner reads) and in
        the identity and caller contextvars for the rest of the request's own task — else
        the 401 that refuses it."""
        conn = HTTPConnection(scope)
        if self.surface == "agent":
            caller = await self._agent_caller(conn)
            message = AGENT_UNAUTHORIZED
        else:
            caller = await self._external_caller(conn)
            # As REST says it: nothing sent, or something sent that is not (or no longer) valid.
            sent = _bearer(conn) is not None or bool(conn.cookies.get(SESSION_COOKIE))
            message = INVALID_CREDENTIALS if sent else EXTERNAL_UNAUTHORIZED
        if caller is None:
            return unauthorized(message)
        scope[SCOPE_KEY] = caller
        enter_caller(caller)  # not reset: the request's task ends with it (ASGI servers
        return None  # run each request in a task of its own, which copied the context)

    async def _external_caller(self, conn: HTTPConnection) -> McpCaller | None:
        auth = self.services.auth
        if auth.mode == "disabled":
            return McpCaller(SYNTHETIC_IDENTITY)
        bearer = _bearer(conn)
        if bearer is None:
            cookie = conn.cookies.get(SESSION_COOKIE)
            if not cookie:
                return None
            client_ip = conn.client.host if conn.client else ""
            identity = await auth.resolve_session_token(cookie, client_ip)
        else:
            identity = await auth.resolve_bearer(bearer) if bearer else None
        return McpCaller(identity) if identity is not None else None

    async def _agent_caller(self, conn: HTTPConnection) -> McpCaller | None:
        bearer = _bearer(conn)
        if not bearer:
            return None
        principal = await self.services.agent_tokens.resolve(bearer)
        if principal is None:
            return None
        return McpCaller(principal.identity, agent=principal)
