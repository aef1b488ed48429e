"""The ACP transport over an agent's stdio (kandev.agents.stdio_transport), on real pipes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from kandev.agents.acp_runtime import AcpRuntime
from kandev.agents.runtime import AgentFailed
from kandev.agents.stdio_transport import StdioTransport
from tests.agents.conftest import WAIT_SECONDS, Recorder
from tests.agents.test_acp_runtime import launch_for

# Echoes each stdin line back on stdout, after the parent says "go" (so a line can be held
# in the pipe while the test looks at what was sent).
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()\n"


async def _echo() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ECHO,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def test_a_message_is_one_compact_line_and_on_sent_follows_its_drain() -> None:
    proc = await _echo()
    assert proc.stdin is not None and proc.stdout is not None
    sent: list[dict[str, Any]] = []
    transport = StdioTransport(proc.stdin, on_sent=sent.append)
    prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"t": "é"}}
    try:
        with anyio.fail_after(WAIT_SECONDS):
            await transport.send(prompt)
            assert sent == [prompt]  # told once send() returned: written and drained
            await transport.send({"jsonrpc": "2.0", "method": "session/cancel"})
            first = await proc.stdout.readline()
            second = await proc.stdout.readline()
    finally:
        proc.stdin.close()
        await proc.wait()
    assert first == (json.dumps(prompt, separators=(",", ":")) + "\n").encode()
    assert json.loads(second) == {"jsonrpc": "2.0", "method": "session/cancel"}
    assert [m.get("method") for m in sent] == ["session/prompt", "session/cancel"]


async def test_sending_to_an_agent_that_is_gone_raises_a_connection_error() -> None:
    proc = await _echo()
    assert proc.stdin is not None
    proc.kill()
    await proc.wait()
    sent: list[dict[str, Any]] = []
    transport = StdioTransport(proc.stdin, on_sent=sent.append)
    returned = 0
    with anyio.fail_after(WAIT_SECONDS), pytest.raises(ConnectionError):
        for _ in range(64):  # a first write may still land before the pipe is seen closed
            await transport.send({"jsonrpc": "2.0", "method": "x", "params": "y" * 4096})
            returned += 1
    assert len(sent) == returned  # the send that failed was not reported as sent


async def test_json_objects_reach_the_sdk_in_order_and_anything_else_is_refused() -> None:
    proc = await _echo()
    assert proc.stdin is not None
    transport = StdioTransport(proc.stdin)
    try:
        assert transport.feed_line(b'{"jsonrpc":"2.0","id":1,"result":{}}')
        assert not transport.feed_line(b"{not json")
        assert not transport.feed_line(b'{"a":1} trailing words')
        assert not transport.feed_line(b"[1, 2]")
        assert transport.feed_line(b'{"jsonrpc":"2.0","method":"session/update"}')
        transport.feed_eof()
        with anyio.fail_after(WAIT_SECONDS):
            received = [await transport.receive() for _ in range(3)]
    finally:
        proc.stdin.close()
        await proc.wait()
    assert received == [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "method": "session/update"},
        None,  # the agent's stdout ended
    ]


async def test_a_brace_line_that_is_not_json_is_reported_as_printed_output(
    tmp_path: Path, recorder: Recorder
) -> None:
    """A line that looks like JSON but is not is what the agent printed, shown in the
    failure (the SDK's own reader logged and dropped it)."""
    command = [sys.executable, "-c", "print('{starting up'); raise SystemExit(3)"]

    with anyio.fail_after(WAIT_SECONDS), pytest.raises(AgentFailed) as failed:
        await AcpRuntime().start(launch_for(tmp_path, command=command), recorder)

    message = str(failed.value)
    assert "agent exited with code 3" in message
    assert "it printed (not ACP): {starting up" in message
