"""The smallest useful ACP agent: answers every prompt with one text chunk ("ok"), or, for
a prompt "stream N", with N chunks of four characters sent back to back (a streaming
model's reply, as fast as the pipe takes it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, stdio_streams, update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)


class TrivialAgent:
    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="trivial", version="1"),
        )

    async def new_session(self, cwd: str, mcp_servers: list[Any], **_: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=str(uuid.uuid4()))

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        words = text.split()
        chunks = int(words[1]) if len(words) == 2 and words[0] == "stream" else 0
        for _ in range(chunks):
            await self._conn.session_update(
                session_id=session_id, update=update_agent_message_text("word")
            )
        if not chunks:
            await self._conn.session_update(
                session_id=session_id, update=update_agent_message_text("ok")
            )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **_: Any) -> None:
        return None


async def _main() -> None:
    reader, writer = await stdio_streams()
    await run_agent(TrivialAgent(), writer, reader)


if __name__ == "__main__":
    asyncio.run(_main())
