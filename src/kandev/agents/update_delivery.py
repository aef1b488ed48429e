"""Delivering an agent's streamed updates in order, a run of text chunks as one update.

Each delivered update is a write (a message inserted or its content grown, and an event
carrying the whole message). A streaming agent sends text in many small chunks, faster than
they can be written one by one: the chunks that queued up while the previous write ran are
delivered as one update — the same text, in the same order, one write instead of one each.
Nothing waits to gather them (no timer): an update is delivered as soon as the previous one
was, with whatever has arrived behind it of the same kind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from kandev.agents.runtime import AgentUpdate

log = logging.getLogger(__name__)

# Chunks of these kinds extend the run before them (kandev.sessions.orchestrator appends
# them to the open message of the same type); other updates are delivered one by one.
TEXT_KINDS = frozenset({"agent_text", "agent_thought"})


def _joins(run: AgentUpdate, chunk: AgentUpdate) -> bool:
    return chunk.kind == run.kind and chunk.key is None and chunk.metadata == run.metadata


async def deliver_updates(
    queue: asyncio.Queue[AgentUpdate],
    deliver: Callable[[AgentUpdate], Awaitable[None]],
    session_id: str = "",
) -> None:
    """Forever: take the next update (with the text chunks queued right behind it, when it
    is one) and `deliver` it; `queue.task_done()` for every update taken, once delivered —
    so `queue.join()` returns when everything put before it was delivered. A delivery that
    fails is logged and the stream goes on."""
    held: AgentUpdate | None = None  # taken from the queue, not delivered yet
    try:
        while True:
            update = held if held is not None else await queue.get()
            held, taken = None, 1
            if update.kind in TEXT_KINDS and update.key is None:
                parts = [update.content]
                while not queue.empty():
                    chunk = queue.get_nowait()
                    if not _joins(update, chunk):
                        held = chunk  # delivered next, in its turn
                        break
                    parts.append(chunk.content)
                    taken += 1
                if taken > 1:
                    update = dataclasses.replace(update, content="".join(parts))
            try:
                await deliver(update)
            except Exception:
                log.exception("on_agent_update failed for session %s", session_id)
            finally:
                for _ in range(taken):
                    queue.task_done()
    finally:
        if held is not None:  # cancelled while holding one: join() must not wait for it
            queue.task_done()
