"""JSON error answers sent straight from ASGI, before any framework has seen the request."""

from __future__ import annotations

import json

from starlette.types import Send


async def send_error(
    send: Send,
    status: int,
    message: str,
    hint: str = "",
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """`{"error": message}` (plus `"hint"`: what to do about it, when given) with `status`.

    The connection is kept: a body left unread (413) is then discarded by the server as it
    arrives, never buffered. Closing instead would reset the connection under a client
    still sending, and it would never see the 413.
    """
    payload = {"error": message, "hint": hint} if hint else {"error": message}
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra_headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
