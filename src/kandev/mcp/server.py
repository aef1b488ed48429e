"""The one MCP server factory: one MCPServer per surface, over the shared tool registry.

Tools are registered as SDK `Tool`s whose argument model passes the raw arguments through,
so that our own pydantic models (strict; unknown arguments ignored) validate them and a bad
argument becomes the CONTRACT §5 VALIDATION_ERROR result rather than the SDK's own text.
The published input schema is the JSON schema of that same model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ConfigDict

from kandev import __version__
from kandev.errors import ValidationFailed
from kandev.mcp.context import (
    McpCaller,
    caller_from_scope,
    current_caller,
    enter_caller,
    exit_caller,
)
from kandev.mcp.errors import error_result, tool_error, tool_success
from kandev.mcp.tools import ToolContext, ToolSpec, tools_for
from kandev.perimeter.nul import find_nul

if TYPE_CHECKING:
    from kandev.services import SurfaceServices

SurfaceName = Literal["external", "agent"]
SERVER_NAMES = {"external": "kandev", "agent": "kandev-agent"}
NO_CALLER = "no authenticated caller"


class _RawArguments(ArgModelBase):
    """Accepts any argument object and hands it over untouched as `arguments`."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        # The validated extras themselves, not a copy: the SDK's frames hold this for as
        # long as the call runs (hours, for an agent waiting), and nothing writes to it.
        return {"arguments": self.model_extra if self.model_extra is not None else {}}


class KandevMCPServer(MCPServer):
    """MCPServer whose every tool failure has the CONTRACT §5 shape, including the ones the
    SDK raises itself (an unknown tool name)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if context is None:
            context = Context(mcp_server=self, subscriptions=self._subscriptions)
        try:
            # What MCPServer.call_tool does, in this frame rather than under it: a call that
            # waits for hours (an agent's ask) then keeps one frame here, not two.
            return await self._tool_manager.call_tool(name, arguments, context, convert_result=True)
        except UnexpectedToolError as exc:
            return error_result(exc.__cause__ or exc, name)
        except ToolError:
            if all(tool.name != name for tool in await self.list_tools()):
                return tool_error("NOT_FOUND", f"unknown tool: {name}")
            raise


def _request_scope(ctx: Context[Any, Any]) -> dict[str, Any] | None:
    try:
        request = ctx.request_context.request
    except ValueError:  # not inside a request (in-process use)
        return None
    return getattr(request, "scope", None)


def resolve_caller(ctx: Context[Any, Any]) -> McpCaller | None:
    """The caller of the HTTP request carrying this call: from the request scope the auth gate
    filled, else from the contextvar the gate set (the SDK carries the sender's context)."""
    return caller_from_scope(_request_scope(ctx)) or current_caller()


def reject_nul(arguments: dict[str, Any]) -> None:
    """U+0000 in any argument is a VALIDATION_ERROR naming it, on both databases
    (PostgreSQL would refuse it mid-transaction; CONTRACT §8)."""
    field = find_nul(arguments)
    if field is not None:
        raise ValidationFailed(field or "arguments", "must not contain NUL characters")


def _sdk_tool(spec: ToolSpec, services: SurfaceServices) -> Tool:
    async def run(arguments: dict[str, Any], ctx: Context[Any, Any]) -> CallToolResult:
        caller = resolve_caller(ctx)
        if caller is None:
            return tool_error("UNAUTHORIZED", NO_CALLER)
        # The SDK runs the call in a task that copied the request's context: the gate's
        # caller is usually installed already (then nothing is set for the hours it waits).
        tokens = enter_caller(caller) if current_caller() is not caller else None
        try:
            reject_nul(arguments)
            # No local for the validated arguments: the handler takes what it needs, and
            # nothing else of them stays for the hours an agent may wait in this frame.
            call = spec.handler(ToolContext(services, ctx), spec.args.model_validate(arguments))
            payload = await call
        except Exception as exc:  # every failure becomes a tool error result
            return error_result(exc, spec.name)
        finally:
            if tokens is not None:
                exit_caller(tokens)
        return tool_success(payload)

    run.__name__ = spec.name
    return Tool(
        fn=run,
        name=spec.name,
        description=spec.description,
        parameters=spec.input_schema(),
        fn_metadata=FuncMetadata(arg_model=_RawArguments),
        is_async=True,
        context_kwarg="ctx",
    )


def build_mcp_server(services: SurfaceServices, surface: SurfaceName) -> MCPServer:
    if surface not in SERVER_NAMES:
        raise ValueError(f"unknown MCP surface {surface!r}")
    return KandevMCPServer(
        SERVER_NAMES[surface],
        version=__version__,
        tools=[_sdk_tool(spec, services) for spec in tools_for(surface)],
        log_level="WARNING",
    )
