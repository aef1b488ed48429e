"""kandev.agents.update_delivery: text chunks queued behind each other are delivered as one
update (same text, same order), everything else one by one, and join() still means
"everything put before it was delivered"."""

from __future__ import annotations

import asyncio

import anyio

from kandev.agents.runtime import AgentUpdate
from kandev.agents.update_delivery import deliver_updates


def text(content: str, kind: str = "agent_text") -> AgentUpdate:
    return AgentUpdate(kind=kind, content=content)  # type: ignore[arg-type]


async def _delivered(queued: list[AgentUpdate]) -> list[AgentUpdate]:
    """Everything queued before the delivery starts, as it is delivered."""
    queue: asyncio.Queue[AgentUpdate] = asyncio.Queue()
    for update in queued:
        queue.put_nowait(update)
    delivered: list[AgentUpdate] = []

    async def deliver(update: AgentUpdate) -> None:
        delivered.append(update)

    task = asyncio.create_task(deliver_updates(queue, deliver))
    with anyio.fail_after(5):
        await queue.join()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return delivered


async def test_a_run_of_queued_chunks_is_one_update_in_order() -> None:
    tool = AgentUpdate(kind="tool_call", content="Read", key="t1", metadata={"status": "pending"})
    delivered = await _delivered(
        [
            text("Hel"),
            text("lo, "),
            text("world"),
            text("hmm", "agent_thought"),
            text("…", "agent_thought"),
            tool,
            text("done"),
            text("."),
        ]
    )
    assert [(u.kind, u.content) for u in delivered] == [
        ("agent_text", "Hello, world"),
        ("agent_thought", "hmm…"),
        ("tool_call", "Read"),
        ("agent_text", "done."),
    ]
    assert delivered[2] is tool  # other updates pass as they are


async def test_tool_calls_are_never_merged() -> None:
    calls = [AgentUpdate(kind="tool_call", content=f"c{i}", key=f"k{i}") for i in range(3)]
    assert await _delivered(calls) == calls


async def test_a_failed_delivery_is_logged_and_the_stream_goes_on() -> None:
    queue: asyncio.Queue[AgentUpdate] = asyncio.Queue()
    delivered: list[str] = []

    async def deliver(update: AgentUpdate) -> None:
        if update.kind == "tool_call":
            raise RuntimeError("the database is gone")
        delivered.append(update.content)

    for update in (text("a"), text("b"), AgentUpdate(kind="tool_call", content="x"), text("c")):
        queue.put_nowait(update)
    task = asyncio.create_task(deliver_updates(queue, deliver, "s1"))
    with anyio.fail_after(5):
        await queue.join()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert delivered == ["ab", "c"]


async def test_cancelled_while_holding_an_update_join_does_not_hang() -> None:
    queue: asyncio.Queue[AgentUpdate] = asyncio.Queue()
    gate = asyncio.Event()
    started = asyncio.Event()

    async def deliver(update: AgentUpdate) -> None:
        started.set()
        await gate.wait()  # the first run's write is slow: cancelled during it

    queue.put_nowait(text("a"))
    queue.put_nowait(AgentUpdate(kind="plan", content="1. x"))  # taken and held behind it
    task = asyncio.create_task(deliver_updates(queue, deliver))
    with anyio.fail_after(5):
        await started.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    with anyio.fail_after(5):
        await queue.join()  # both were accounted for
