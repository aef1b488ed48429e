"""Fixtures for real ACP subprocess tests: a recording AgentEvents and started-agent cleanup."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import pytest

from kandev.agents.acp_runtime import AcpAgentHandle, AcpRuntime
from kandev.agents.runtime import AgentLaunch, AgentUpdate
from tests.agents.mcp_stub import StubMcpServer

WAIT_SECONDS = 5.0


class Recorder:
    """AgentEvents that records everything, in order, and lets tests wait for it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, object]] = []  # ("update"|"exit", session_id, payload)
        self._changed = asyncio.Condition()

    @property
    def updates(self) -> list[AgentUpdate]:
        return [payload for kind, _, payload in self.log if kind == "update"]  # type: ignore[misc]

    @property
    def exits(self) -> list[str]:
        return [payload for kind, _, payload in self.log if kind == "exit"]  # type: ignore[misc]

    def text(self) -> str:
        return "".join(u.content for u in self.updates if u.kind == "agent_text")

    async def on_agent_update(self, session_id: str, update: AgentUpdate) -> None:
        async with self._changed:
            self.log.append(("update", session_id, update))
            self._changed.notify_all()

    async def on_agent_exit(self, session_id: str, reason: str) -> None:
        async with self._changed:
            self.log.append(("exit", session_id, reason))
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[Recorder], bool]) -> None:
        with anyio.fail_after(WAIT_SECONDS):
            async with self._changed:
                await self._changed.wait_for(lambda: predicate(self))


StartAgent = Callable[[AgentLaunch, Recorder], Awaitable[AcpAgentHandle]]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def start_agent() -> AsyncIterator[StartAgent]:
    """Start agents with AcpRuntime; every one still running is stopped after the test."""
    runtime = AcpRuntime(init_timeout=10.0, stop_grace=2.0)
    handles: list[AcpAgentHandle] = []

    async def start(launch: AgentLaunch, events: Recorder) -> AcpAgentHandle:
        with anyio.fail_after(WAIT_SECONDS * 2):
            handle = await runtime.start(launch, events)
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        await handle.stop()


@pytest.fixture
def mcp_stub() -> Iterator[Callable[..., StubMcpServer]]:
    servers: list[StubMcpServer] = []

    def make(**kwargs: object) -> StubMcpServer:
        server = StubMcpServer(**kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
