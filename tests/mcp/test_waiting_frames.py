"""What a waiting agent's ask keeps of ours (issue: performance, RSS per waiting agent).

An agent may wait for hours in `ask_user_question_kandev`; every coroutine frame in its
request's tasks is memory held that long. The layers in between (perimeter, auth gate,
delivery receipt, tool runner, service) either hand back the coroutine that serves, or keep
one frame. This lists, in the server's own loop, the frames of Kandev's code in the tasks of
a parked ask, so a layer that starts to await (or a helper coroutine under the wait) fails
here.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx

from tests.mcp.conftest import McpLiveServer, agent_token, board, mcp_client, ok
from tests.mcp.test_ask_tool import QUESTIONS, _pending_id

REQUEST_LAYERS = ("perimeter/", "mcp/", "clarification/")
# (file, function) of every frame of ours in the tasks of one parked ask.
EXPECTED = sorted(
    [
        ("perimeter/middleware.py", "_http"),  # the perimeter's one frame
        ("mcp/delivery.py", "run_with_receipt"),  # the auth gate's check, then the receipt
        ("mcp/delivery.py", "receive"),  # … which notes a disconnect
        ("mcp/server.py", "call_tool"),  # errors in CONTRACT §5's shape
        ("mcp/server.py", "run"),  # the tool runner
        ("clarification/asking.py", "ask"),
        ("clarification/store.py", "_wait"),  # parked on its future, no helper under it
    ]
)


def _frames_of_ours(task: asyncio.Task[Any]) -> list[tuple[str, str]]:
    found = []
    coro: Any = task.get_coro()
    while coro is not None:
        code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
        if code is None:
            break
        if "/kandev/" in code.co_filename:
            found.append((code.co_filename.split("/kandev/")[-1], code.co_name))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return found


async def _parked_frames(server: McpLiveServer, pending_id: str) -> list[tuple[str, str]]:
    """On the server's loop: once the ask waits, the frames of ours in the tasks serving
    requests (not the server's background loops: event followers, sweeps)."""
    store = server.services.clarifications.store
    async with asyncio.timeout(20):
        while store.waiter_count(pending_id) != 1:  # bounded poll of the store
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.01):
                    await asyncio.Event().wait()
    frames = []
    for task in asyncio.all_tasks():
        if task is asyncio.current_task():
            continue
        ours = _frames_of_ours(task)
        if any(f[0].startswith(REQUEST_LAYERS) for f in ours):
            frames += ours
    return sorted(frames)


async def test_a_parked_ask_keeps_one_frame_per_layer(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    assert server.loop is not None
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        sid, creds = await agent_token(http, b["task"]["id"])
        async with mcp_client(creds["mcp_url"], creds["token"]) as agent:
            call = asyncio.create_task(
                agent.call_tool("ask_user_question_kandev", {"questions": QUESTIONS})
            )
            pending_id = await _pending_id(http, sid)
            parked = asyncio.run_coroutine_threadsafe(
                _parked_frames(server, pending_id), server.loop
            )
            assert await asyncio.wrap_future(parked) == EXPECTED
            r = await http.post(
                f"/api/v1/clarification/{pending_id}/respond",
                json={"answers": [{"question_id": "db", "selected_options": ["pg"]}]},
            )
            assert r.status_code == 200, r.text
            assert ok(await call)["answers"]["db"]["selected_options"] == ["pg"]
