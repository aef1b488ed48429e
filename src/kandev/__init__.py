"""Kandev: a self-hosted control plane for AI coding agents."""

__version__ = "0.1.0"

# The MCP clientInfo.name the `kandev` terminal commands send; the MCP surface records their
# answers via "cli" instead of "mcp".
CLI_CLIENT_NAME = "kandev-cli"
