"""Reading a request body under a size cap, before anything parses it (CONTRACT §8).

The cap is enforced on the bytes as they arrive: a `Content-Length` over it is refused
without reading a byte, and a chunked body is abandoned as soon as it crosses the cap, so
an oversized request costs at most `max_body_bytes` of memory.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import Message, Receive


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    """The client disconnected before its body arrived."""


def declared_length(value: bytes | None) -> int | None:
    """The `Content-Length`, or None when absent; the servers reject malformed ones."""
    if value is None:
        return None
    text = value.strip()
    return int(text) if text.isdigit() else None


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole body, or BodyTooLarge the moment it grows past `limit` bytes."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body += message.get("body", b"")
        if len(body) > limit:
            raise BodyTooLarge
        if not message.get("more_body", False):
            return bytes(body)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then the real channel (which
    is how streaming responses notice the client leaving)."""
    return _Replay(body, receive)


class _Replay:
    """Not a coroutine after the body: it hands back the channel's own, so a request that
    waits for hours (an agent's ask, whose disconnect watcher is always receiving) keeps no
    frame of ours — and a slotted object, not a closure with its cells."""

    __slots__ = ("_body", "_receive")

    def __init__(self, body: bytes, receive: Receive) -> None:
        self._body: bytes | None = body
        self._receive = receive

    def __call__(self) -> Awaitable[Message]:
        body, self._body = self._body, None
        if body is not None:
            return _ready({"type": "http.request", "body": body, "more_body": False})
        return self._receive()


async def _ready(message: Message) -> Message:
    return message
