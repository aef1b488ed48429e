"""What a tool is: a name, an argument model, a handler, and the surfaces that offer it.

A handler parses nothing itself: the runner validates the arguments with the tool's pydantic
model (strict; unknown arguments ignored) and passes the model. It calls one service method
and returns a JSON object. Errors are raised, never returned; `kandev.mcp.errors` maps them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from kandev import CLI_CLIENT_NAME
from kandev.auth.agent_tokens import AgentPrincipal
from kandev.errors import Unauthorized
from kandev.mcp.context import current_agent
from kandev.mcp.delivery import ResponseReceipt, receipt_from_scope

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from kandev.services import SurfaceServices

Surface = Literal["external", "agent"]
EXTERNAL: frozenset[Surface] = frozenset({"external"})
AGENT: frozenset[Surface] = frozenset({"agent"})
BOTH: frozenset[Surface] = frozenset({"external", "agent"})


class ToolArgs(BaseModel):
    """Base of every tool's arguments: strict types, unknown arguments ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", str_max_length=100_000)


class NoArgs(ToolArgs):
    pass


@dataclass
class ToolContext:
    """What a handler may use besides its arguments."""

    services: SurfaceServices
    mcp: Context[Any, Any] | None = None

    @property
    def agent(self) -> AgentPrincipal | None:
        return current_agent()

    def require_agent(self) -> AgentPrincipal:
        agent = current_agent()
        if agent is None:
            raise Unauthorized("this tool needs an agent session token")
        return agent

    def response_receipt(self) -> ResponseReceipt | None:
        """The receipt of the HTTP request carrying this call (None in-process)."""
        scope = None
        if self.mcp is not None:
            try:
                scope = getattr(self.mcp.request_context.request, "scope", None)
            except ValueError:  # not inside a request
                scope = None
        return receipt_from_scope(scope)

    def answer_surface(self) -> str:
        """Where an answer given through this call comes from: "cli" when the MCP client is
        the `kandev` terminal (it names itself CLI_CLIENT_NAME in clientInfo), else "mcp"."""
        name = None
        if self.mcp is not None:
            try:
                params = self.mcp.request_context.session.client_params
            except (ValueError, AttributeError):  # not inside a request
                params = None
            name = params.client_info.name if params is not None else None
        return "cli" if name == CLI_CLIENT_NAME else "mcp"

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """An MCP progress notification on this call (dropped if the client sent no token)."""
        if self.mcp is not None:
            await self.mcp.report_progress(progress, total, message)


Handler = Callable[[ToolContext, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[ToolArgs]
    handler: Handler
    surfaces: frozenset[Surface]

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()
