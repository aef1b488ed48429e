"""An agent runtime built when the first agent starts, not when the server does.

The ACP SDK's schema module alone takes ~0.3 s of CPU to import — a sixth of a server's
start — and a server may never launch an agent (or only minutes later). `DeferredRuntime`
holds a builder instead; the first `start()` runs the builder's imports in a worker thread
(the event loop keeps serving meanwhile) and every later start reuses what it built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kandev.agents.runtime import AgentEvents, AgentHandle, AgentLaunch, AgentRuntime


class DeferredRuntime:
    """Implements `AgentRuntime` by building the real one on the first `start()`."""

    def __init__(self, build: Callable[[], AgentRuntime]) -> None:
        self._build = build
        self._runtime: AgentRuntime | None = None
        self._building: asyncio.Lock | None = None  # made in the loop that first starts

    @property
    def built(self) -> AgentRuntime | None:
        """The real runtime once the first start has built it."""
        return self._runtime

    async def start(self, launch: AgentLaunch, events: AgentEvents) -> AgentHandle:
        runtime = self._runtime or await self._built()
        return await runtime.start(launch, events)

    async def _built(self) -> AgentRuntime:
        if self._building is None:
            self._building = asyncio.Lock()
        async with self._building:  # two first starts at once build one runtime
            if self._runtime is None:
                # Imports run in the thread; the builder's objects touch no loop state.
                self._runtime = await asyncio.to_thread(self._build)
            return self._runtime
