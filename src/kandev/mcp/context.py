"""Who is calling an MCP tool: the resolved caller of the HTTP request that carried the call.

The ASGI gate in `kandev.mcp.auth` resolves the bearer into an `McpCaller` and stores it in
the request scope (and in contextvars). The tool runner installs it around every tool call:
`acting_as(caller.identity)` for the services, and the agent principal for `current_agent()`.
The agent's session and task come from its token only, never from tool arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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


_agent: ContextVar[AgentPrincipal | None] = ContextVar("kandev_mcp_agent", default=None)
_caller: ContextVar[McpCaller | None] = ContextVar("kandev_mcp_caller", default=None)


def current_agent() -> AgentPrincipal | None:
    """The agent session behind the current tool call (agent surface), else None."""
    return _agent.get()


def current_caller() -> McpCaller | None:
    return _caller.get()


@contextmanager
def calling_as(caller: McpCaller | None) -> Iterator[None]:
    """Install the caller (and its agent principal) for the duration of a block."""
    caller_token = _caller.set(caller)
    agent_token = _agent.set(caller.agent if caller is not None else None)
    try:
        yield
    finally:
        _agent.reset(agent_token)
        _caller.reset(caller_token)


CallerTokens = tuple[Token[Identity | None], Token[McpCaller | None], Token[AgentPrincipal | None]]


def enter_caller(caller: McpCaller) -> CallerTokens:
    """`acting_as(caller.identity)` and `calling_as(caller)` without context managers (the
    MCP request holds them while an agent waits: no generator per waiting agent)."""
    return set_identity(caller.identity), _caller.set(caller), _agent.set(caller.agent)


def exit_caller(tokens: CallerTokens) -> None:
    identity, caller, agent = tokens
    _agent.reset(agent)
    _caller.reset(caller)
    reset_identity(identity)


def caller_from_scope(scope: dict[str, Any] | None) -> McpCaller | None:
    if scope is None:
        return None
    caller = scope.get(SCOPE_KEY)
    return caller if isinstance(caller, McpCaller) else None
