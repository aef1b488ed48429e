"""Who is calling an MCP tool: the resolved caller of the HTTP request that carried the call.

The ASGI gate in `kandev.mcp.auth` resolves the bearer into an `McpCaller` and stores it in
the request scope (and in contextvars, `enter_caller`): the caller's identity for the services,
its agent principal for `current_agent()`. The tool runner installs it again only when the
call's context lacks it.
The agent's session and task come from its token only, never from tool arguments.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from kandev.auth.agent_tokens import AgentPrincipal
from kandev.auth.identity import Identity, reset_identity, set_identity

SCOPE_KEY = "kandev.mcp.caller"


@dataclass(frozen=True, slots=True)
class McpCaller:
    """The authenticated caller of one MCP HTTP request."""

    identity: Identity
    agent: AgentPrincipal | None = None  # set on the agent surface only


# One variable for the caller and its agent principal: each variable set for a request is a
# token and a context node kept as long as the request (hours, for an agent waiting).
_caller: ContextVar[McpCaller | None] = ContextVar("kandev_mcp_caller", default=None)


def current_agent() -> AgentPrincipal | None:
    """The agent session behind the current tool call (agent surface), else None."""
    caller = _caller.get()
    return caller.agent if caller is not None else None


def current_caller() -> McpCaller | None:
    return _caller.get()


CallerTokens = tuple[Token[Identity | None], Token[McpCaller | None]]


def enter_caller(caller: McpCaller) -> CallerTokens:
    """Install the caller (its identity, and its agent principal) until `exit_caller` — or,
    for the auth gate, for the rest of the request's own task. Plain tokens rather than a
    context manager: the MCP request holds them while an agent waits (no generator per
    waiting agent)."""
    return set_identity(caller.identity), _caller.set(caller)


def exit_caller(tokens: CallerTokens) -> None:
    identity, caller = tokens
    _caller.reset(caller)
    reset_identity(identity)


def caller_from_scope(scope: dict[str, Any] | None) -> McpCaller | None:
    if scope is None:
        return None
    caller = scope.get(SCOPE_KEY)
    return caller if isinstance(caller, McpCaller) else None
