"""The ACP SDK's message `Transport` over an agent process's stdin and the JSON lines of its
stdout (the runtime reads stdout itself and routes every JSON line here, parsed).

Why not the SDK's stdio form (`connect_to_agent(client, stdin, reader)`): it writes each
message through a queue and a writer task (two task switches and a future per message),
re-scans every line the runtime already split, and — to tell the runtime when the prompt
was drained to the agent — needs a stream observer, which makes the SDK deep-copy every
message in both directions. For a streamed reply (hundreds of chunk notifications per
turn) those copies were most of the runtime's CPU. Here a message is written and drained
by the task that sends it (in call order: `write` is synchronous, and concurrent drains
are allowed), and `on_sent` is told about each message once it was drained.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

# The SDK's own framing: compact JSON, one message per line.
_SEPARATORS = (",", ":")


class StdioTransport:
    def __init__(
        self,
        stdin: asyncio.StreamWriter,
        on_sent: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._stdin = stdin
        self._on_sent = on_sent
        self._incoming: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    # --- the SDK's side (acp.Transport) -----------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        """Write and drain one message; a dead agent's pipe raises ConnectionError (as the
        SDK's own sender does)."""
        line = json.dumps(message, separators=_SEPARATORS) + "\n"
        self._stdin.write(line.encode())
        await self._stdin.drain()
        if self._on_sent is not None:
            self._on_sent(message)

    async def receive(self) -> dict[str, Any] | None:
        """The next message from the agent; None once its stdout ended."""
        return await self._incoming.get()

    async def close(self) -> None:
        """Nothing to release: the runtime owns the process and its pipes."""

    # --- the runtime's side ---------------------------------------------------------------

    def feed_line(self, line: bytes) -> bool:
        """Hand one stdout line starting with '{' to the SDK; False when it is not a JSON
        object (the caller keeps it as stray output)."""
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        self._incoming.put_nowait(message)
        return True

    def feed_eof(self) -> None:
        self._incoming.put_nowait(None)
