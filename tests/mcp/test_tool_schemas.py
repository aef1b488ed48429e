"""What tools/list publishes, through the official MCP client on both surfaces: every tool is
described, and ask_user_question_kandev declares its nested questions/options."""

from __future__ import annotations

import httpx

from tests.mcp.conftest import agent_token, board, mcp_client


async def test_published_tools_are_described_and_the_ask_schema_is_typed(
    mcp_server_factory, sqlite_url
) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        _, creds = await agent_token(http, (await board(http))["task"]["id"])
    async with (
        mcp_client(server.external_url) as external,
        mcp_client(creds["mcp_url"], creds["token"]) as agent,
    ):
        external_tools = (await external.list_tools()).tools
        agent_tools = (await agent.list_tools()).tools

    for tool in [*external_tools, *agent_tools]:
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object", tool.name

    ask = next(t for t in agent_tools if t.name == "ask_user_question_kandev").input_schema
    assert ask["required"] == ["questions"]
    questions = ask["properties"]["questions"]
    assert questions["type"] == "array"
    assert (questions["minItems"], questions["maxItems"]) == (1, 4)
    question = questions["items"]
    assert question["type"] == "object"
    assert question["required"] == ["prompt", "options"]
    assert set(question["properties"]) == {"id", "title", "prompt", "options"}
    assert all(p["type"] == "string" for k, p in question["properties"].items() if k != "options")
    options = question["properties"]["options"]
    assert (options["type"], options["minItems"], options["maxItems"]) == ("array", 2, 6)
    option = options["items"]
    assert option["type"] == "object"
    assert option["required"] == ["label", "description"]
    assert set(option["properties"]) == {"option_id", "label", "description"}
    described = [
        questions,
        question,
        options,
        option,
        *question["properties"].values(),
        *option["properties"].values(),
    ]
    assert all(node.get("description") for node in described)
    assert ask["properties"]["context"]["type"] == "string"
    assert ask["properties"]["context_paragraphs"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "The context as paragraphs (overrides `context` when given).",
        "title": "Context Paragraphs",
    }
