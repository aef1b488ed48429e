"""Kandev's two MCP endpoints: external `/mcp` and agent `/agent/mcp` (CONTRACT §5)."""

from kandev.mcp.context import current_agent
from kandev.mcp.mount import mcp_lifespan, mount_mcp
from kandev.mcp.server import build_mcp_server

__all__ = ["build_mcp_server", "current_agent", "mcp_lifespan", "mount_mcp"]
