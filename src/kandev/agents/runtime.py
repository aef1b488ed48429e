"""The agent runtime protocol: how the orchestrator drives one agent process.

The orchestrator (turns, messages, states) only talks to these types; `acp_runtime.py`
implements them over the Agent Client Protocol. A fake in tests would implement the same
protocol, but the tests here use real ACP subprocesses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

UpdateKind = Literal[
    "agent_text",  # a chunk of the agent's reply text (append to the open text message)
    "agent_thought",  # a chunk of the agent's reasoning text
    "tool_call",  # a new tool call (key = tool_call_id)
    "tool_call_update",  # status/content change of an existing tool call (same key)
    "plan",  # the agent's current plan (replaces the previous one; key = "plan")
]


@dataclass(frozen=True)
class AgentLaunch:
    """Everything needed to start (or restart) the agent of one Kandev session."""

    session_id: str
    command: list[str]
    env: dict[str, str]
    cwd: Path
    mcp_url: str  # Kandev's agent MCP endpoint, passed in ACP mcpServers as "kandev"
    mcp_token: str  # bearer for that endpoint: this session's agent token
    resume_acp_session_id: str | None = None  # try ACP session/load with it when supported


@dataclass(frozen=True)
class AgentUpdate:
    """One streamed `session/update`, already reduced to what Kandev stores."""

    kind: UpdateKind
    content: str  # text chunk, tool call title, or rendered plan
    key: str | None = None  # identity for updates that modify an earlier one
    metadata: dict[str, Any] = field(default_factory=dict)


class AgentFailed(Exception):
    """The agent could not be started, or died; the message is shown to the user."""


class AgentEvents(Protocol):
    """Callbacks the runtime makes into the orchestrator."""

    async def on_agent_update(self, session_id: str, update: AgentUpdate) -> None: ...

    async def on_agent_exit(self, session_id: str, reason: str) -> None:
        """The process ended without being asked to stop (crash, exit, broken pipe)."""
        ...


class AgentHandle(Protocol):
    """A running agent process with one open ACP session."""

    @property
    def acp_session_id(self) -> str: ...

    @property
    def resumed(self) -> bool:
        """True when start() reattached with session/load instead of opening a new session."""
        ...

    @property
    def alive(self) -> bool: ...

    async def prompt(self, text: str, on_sent: Callable[[], None] | None = None) -> str:
        """Run one turn; returns the ACP stop reason ('end_turn', 'cancelled', …).

        `on_sent()` is called once the prompt was written to the agent (not only queued).
        Raises AgentFailed when the process dies during the turn.
        """
        ...

    async def cancel(self) -> None:
        """Ask the agent to stop the running turn (ACP session/cancel)."""
        ...

    async def stop(self) -> None:
        """End the process (terminate, then kill after a grace period). Idempotent."""
        ...


class AgentRuntime(Protocol):
    async def start(self, launch: AgentLaunch, events: AgentEvents) -> AgentHandle:
        """Spawn, initialize, open (or load) the ACP session. Raises AgentFailed."""
        ...
