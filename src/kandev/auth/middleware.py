"""The one HTTP authentication gate, as plain ASGI so the identity contextvar set here is
the one endpoints see (BaseHTTPMiddleware would run them in another task/context).

Auth off: every request is the synthetic identity. Auth on: the session cookie, then a
`Bearer kandev_pat_…` header. Without a valid credential only public paths (and anything
outside /api/, which includes the web UI and the MCP endpoints that authenticate
themselves) go through, with no identity; other /api/ paths get a JSON 401: "authentication
required" when no credential came, "invalid or expired credentials" when one came and is not
valid (so a script can tell a missing token from a revoked one).

While the mode is `setup` every request re-reads it from the database (one COUNT), so a first
admin created by `kandev user create --admin` against the same database takes effect without
a restart; once `enabled` it is never read again.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kandev.auth.identity import SYNTHETIC_IDENTITY, Identity, acting_as
from kandev.auth.service import AuthService

SESSION_COOKIE = "kandev_session"
PUBLIC_ROUTES = frozenset(
    {
        ("GET", "/health"),
        ("HEAD", "/health"),
        ("GET", "/api/v1/auth/me"),
        ("POST", "/api/v1/auth/login"),
        ("POST", "/api/v1/auth/setup"),
    }
)
# The API's schema describes the API: it needs a credential like the API does.
PROTECTED_OUTSIDE_API = frozenset({"/openapi.json"})
_SLASHES = re.compile(r"/{2,}")
# The MCP endpoints authenticate their own callers (PAT or agent token) in kandev.mcp.auth;
# resolving credentials here too would cost a second token lookup per call.
SELF_AUTHENTICATING_PREFIXES = ("/mcp", "/agent/mcp")


def is_protected(method: str, path: str) -> bool:
    """True when a request to this path needs a credential."""
    # Collapse '//' so '//api/…' can't dodge the /api/ prefix check.
    path = _SLASHES.sub("/", path)
    if (method.upper(), path) in PUBLIC_ROUTES:
        return False
    return path == "/api" or path.startswith("/api/") or path in PROTECTED_OUTSIDE_API


def _self_authenticating(path: str) -> bool:
    path = _SLASHES.sub("/", path)
    return any(path == p or path.startswith(p + "/") for p in SELF_AUTHENTICATING_PREFIXES)


AUTHENTICATION_REQUIRED = "authentication required"
INVALID_CREDENTIALS = "invalid or expired credentials"


def unauthorized_response(message: str = AUTHENTICATION_REQUIRED) -> JSONResponse:
    return JSONResponse(
        {"error": message},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


class AuthMiddleware:
    def __init__(self, app: ASGIApp, auth_service: AuthService) -> None:
        self.app = app
        self.auth = auth_service

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # The MCP endpoints' requests (an agent's ask waits for hours) go straight on, with
        # no frame of this middleware left waiting with them.
        if scope["type"] not in ("http", "websocket") or _self_authenticating(scope["path"]):
            return self.app(scope, receive, send)
        return self._authenticate(scope, receive, send)

    async def _authenticate(self, scope: Scope, receive: Receive, send: Send) -> None:
        mode = self.auth.mode
        if mode == "setup":  # an offline `kandev user create --admin` may have ended it
            mode = await self.auth.current_mode()
        presented = False
        if mode == "disabled":
            identity: Identity | None = SYNTHETIC_IDENTITY
        else:
            identity, presented = await self._resolve(HTTPConnection(scope))
        # A websocket can't receive a JSON 401; its endpoint checks the identity itself.
        if (
            identity is None
            and scope["type"] == "http"
            and is_protected(scope["method"], scope["path"])
        ):
            message = INVALID_CREDENTIALS if presented else AUTHENTICATION_REQUIRED
            await unauthorized_response(message)(scope, receive, send)
            return
        with acting_as(identity):
            await self.app(scope, receive, send)

    async def _resolve(self, conn: HTTPConnection) -> tuple[Identity | None, bool]:
        """The caller's identity, and whether any credential was presented at all."""
        client_ip = conn.client.host if conn.client else ""
        cookie = conn.cookies.get(SESSION_COOKIE)
        if cookie:
            identity = await self.auth.resolve_session_token(cookie, client_ip)
            if identity is not None:
                return identity, True
        header = conn.headers.get("authorization", "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer" and credential.strip():
            return await self.auth.resolve_bearer(credential.strip()), True
        return None, bool(cookie) or bool(header.strip())
