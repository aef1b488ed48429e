"""The terminal's own MCP client (kandev.cli_mcp) against the official SDK: it speaks the
protocol version the installed SDK speaks, and its tool call is the request the SDK client
sends (method, `_meta`, headers); it reads the answer as JSON or as an event stream (the
progress notifications before it skipped), on a real `kandev serve`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from kandev.cli_mcp import PROTOCOL_VERSION, McpClient, McpProtocolError, McpRefused


def test_the_protocol_version_is_the_sdk_s() -> None:
    from mcp_types import LATEST_PROTOCOL_VERSION

    assert PROTOCOL_VERSION == LATEST_PROTOCOL_VERSION


def _tool_call(requests: list[Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of the tools/call among the recorded requests."""
    for headers, body in requests:
        if body.get("method") == "tools/call":
            return headers, body
    raise AssertionError(f"no tools/call in {requests}")


def _recording(requests: list[Any]) -> Any:
    async def record(request: Any) -> None:
        wanted = ("mcp-", "accept", "content-type")
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith(wanted)}
        requests.append((headers, json.loads(request.content)))

    return {"request": [record]}


async def test_a_tool_call_is_the_request_the_sdk_sends(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    arguments = {"limit": 3}
    sdk: list[Any] = []
    async with (
        httpx2.AsyncClient(event_hooks=_recording(sdk)) as http2,
        Client(
            streamable_http_client(f"{server.url}/mcp", http_client=http2),
            client_info=Implementation(name="kandev-cli", version="9"),
        ) as client,
    ):
        expected = await client.call_tool("list_pending_questions_kandev", arguments)
    ours: list[Any] = []
    async with httpx.AsyncClient(event_hooks=_recording(ours)) as http:
        got = await McpClient(http, f"{server.url}/mcp", "kandev-cli", "9").call_tool(
            "list_pending_questions_kandev", arguments
        )
    (sdk_headers, sdk_body), (our_headers, our_body) = _tool_call(sdk), _tool_call(ours)
    assert our_body["params"] == sdk_body["params"]
    assert {k: our_headers.get(k) for k in sdk_headers} == sdk_headers
    assert (got.text, got.is_error) == (expected.content[0].text, expected.is_error)
    assert json.loads(got.text) == {"bundles": [], "count": 0, "next_cursor": ""}

    async with httpx.AsyncClient() as http:
        unknown = await McpClient(http, f"{server.url}/mcp", "kandev-cli", "9").call_tool(
            "no_such_tool", {}
        )
        assert unknown.is_error and json.loads(unknown.text)["code"] == "NOT_FOUND"
        with pytest.raises(McpRefused) as refused:
            await McpClient(http, f"{server.url}/nowhere", "x", "1").call_tool("t", {})
        assert refused.value.status == 404


def _responder(body: bytes, content_type: str) -> httpx.MockTransport:
    def answer(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    return httpx.MockTransport(answer)


@pytest.mark.parametrize(
    "stream",
    [
        # A progress notification, then the answer (data split over two lines).
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
        '"params":{"progress":1}}\n\n'
        'event: message\ndata: {"jsonrpc":"2.0","id":1,\ndata: "result":{"content":'
        '[{"type":"text","text":"{\\"ok\\": true}"}],"isError":false}}\n\n',
        # No blank line after the last event.
        'data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}]}}',
    ],
)
async def test_an_event_stream_answer_is_read(stream: str) -> None:
    transport = _responder(stream.encode(), "text/event-stream; charset=utf-8")
    async with httpx.AsyncClient(transport=transport) as http:
        result = await McpClient(http, "http://k/mcp", "kandev-cli", "0").call_tool("t", {})
    assert not result.is_error
    assert json.loads(result.text) in ({"ok": True}, {})


@pytest.mark.parametrize(
    "body, content_type",
    [
        (
            b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad params"}}',
            "application/json",
        ),
        (b'{"jsonrpc":"2.0","id":7,"result":{}}', "application/json"),  # not our call
        (b"<html>proxy error</html>", "text/html"),
    ],
)
async def test_an_answer_that_is_not_the_call_s_result_is_a_protocol_error(
    body: bytes, content_type: str
) -> None:
    async with httpx.AsyncClient(transport=_responder(body, content_type)) as http:
        with pytest.raises(McpProtocolError):
            await McpClient(http, "http://k/mcp", "kandev-cli", "0").call_tool("t", {})


def test_concurrent_calls_get_their_own_ids() -> None:
    seen: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        request_id = json.loads(request.content)["id"]
        seen.append(request_id)
        body = {"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}
        return httpx.Response(200, json=body)

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
            client = McpClient(http, "http://k/mcp", "n", "0")
            await asyncio.gather(*(client.call_tool("t", {}) for _ in range(5)))

    asyncio.run(run())
    assert sorted(seen) == [1, 2, 3, 4, 5]
