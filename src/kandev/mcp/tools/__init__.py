"""Every MCP tool, once. A tool names its surfaces (EXTERNAL, AGENT or BOTH) in its ToolSpec;
adding one is one entry in its area's TOOLS (plus the area once here)."""

from __future__ import annotations

from kandev.mcp.tools import board, moves, permissions, questions, sessions
from kandev.mcp.tools.base import AGENT, BOTH, EXTERNAL, ToolContext, ToolSpec

ALL_TOOLS: tuple[ToolSpec, ...] = (
    *board.TOOLS,
    *sessions.TOOLS,
    *questions.TOOLS,
    *permissions.TOOLS,
    *moves.TOOLS,
)


def tools_for(surface: str) -> tuple[ToolSpec, ...]:
    return tuple(t for t in ALL_TOOLS if surface in t.surfaces)


__all__ = ["AGENT", "ALL_TOOLS", "BOTH", "EXTERNAL", "ToolContext", "ToolSpec", "tools_for"]
