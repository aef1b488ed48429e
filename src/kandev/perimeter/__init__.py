"""The HTTP perimeter (CONTRACT §8): one ASGI middleware around the whole app.

It answers for hosts (DNS rebinding), origins (CSRF), body size, NUL characters and
forwarded headers on every route — REST, SSE, pages and both MCP endpoints — because it
wraps the app from the outside; nothing a router adds can slip past it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kandev.perimeter.middleware import PerimeterMiddleware
from kandev.perimeter.policy import PerimeterPolicy, allowed_hosts
from kandev.perimeter.serving import uvicorn_options

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.types import ASGIApp

    from kandev.config import Settings

__all__ = [
    "PerimeterMiddleware",
    "PerimeterPolicy",
    "allowed_hosts",
    "install_perimeter",
    "uvicorn_options",
]


def install_perimeter(app: Starlette, settings: Settings) -> None:
    """Put PerimeterMiddleware outside Starlette's own stack (`add_middleware` would place it
    inside ServerErrorMiddleware), so it runs first on every request and catches what that
    stack lets escape."""
    policy = PerimeterPolicy.from_settings(settings)  # bad settings fail at startup
    build_stack = app.build_middleware_stack

    def build_wrapped_stack() -> ASGIApp:
        return PerimeterMiddleware(build_stack(), policy)

    app.build_middleware_stack = build_wrapped_stack  # type: ignore[method-assign]
