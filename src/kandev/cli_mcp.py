"""The terminal's MCP client: one HTTP POST per tool call on the external endpoint.

`kandev questions|permissions` speak MCP like any other client (CONTRACT §1), but the
official SDK client costs a terminal command about a second before it sends a byte
(`import mcp` builds its protocol models: ~0.85 s of CPU here) and three requests per call
(discover, the call, then tools/list to check the result's schema). The streamable-HTTP
transport of the protocol version the server speaks is stateless: a tool call is one POST
of a JSON-RPC request carrying the protocol version and the client's name in `_meta` (the
server records answers given this way as coming from the terminal by that name). The
answer is the JSON-RPC response, as JSON or as a server-sent event stream.

`tests/test_cli_mcp.py` holds PROTOCOL_VERSION to the installed SDK's and the requests to
what the SDK client sends.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from kandev.cli_http import error_text

if TYPE_CHECKING:
    import httpx

PROTOCOL_VERSION = "2026-07-28"
_META = "io.modelcontextprotocol/"


class McpRefused(Exception):
    """The endpoint answered the request with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class McpProtocolError(Exception):
    """A JSON-RPC error, or an answer that is not a JSON-RPC response to the call."""


class McpToolResult:
    __slots__ = ("is_error", "text")

    def __init__(self, text: str, is_error: bool) -> None:
        self.text = text
        self.is_error = is_error


class McpClient:
    """Tool calls on `endpoint` through `http` (its headers carry the token)."""

    def __init__(self, http: httpx.AsyncClient, endpoint: str, name: str, version: str) -> None:
        self._http = http
        self._endpoint = endpoint
        self._meta = {
            f"{_META}protocolVersion": PROTOCOL_VERSION,
            f"{_META}clientInfo": {"name": name, "version": version},
            f"{_META}clientCapabilities": {},
        }
        self._ids = itertools.count(1)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        request_id = next(self._ids)
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": self._meta},
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "MCP-Method": "tools/call",
            "MCP-Name": name,
        }
        response = await self._http.post(self._endpoint, content=json.dumps(body), headers=headers)
        if response.status_code >= 400:
            raise McpRefused(response.status_code, error_text(response))
        message = _response_to(request_id, response)
        if "error" in message:
            error = message["error"] or {}
            raise McpProtocolError(str(error.get("message") or error))
        result = message.get("result") or {}
        text = "".join(
            block.get("text", "")
            for block in result.get("content") or []
            if isinstance(block, dict)
        )
        return McpToolResult(text, bool(result.get("isError")))


def _response_to(request_id: int, response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response to `request_id`: the body, or the event of the stream that
    carries it (progress notifications before it are skipped)."""
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    candidates = _events(response.text) if kind == "text/event-stream" else [response.text]
    for text in candidates:
        try:
            message = json.loads(text)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
    raise McpProtocolError(f"no answer to the call in the server's response ({kind or 'no type'})")


def _events(stream: str) -> list[str]:
    """The data of each server-sent event (its `data:` lines joined)."""
    events, data = [], []
    for line in stream.splitlines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            events.append("\n".join(data))
            data = []
    if data:
        events.append("\n".join(data))
    return events
