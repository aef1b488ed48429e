"""Knowing that an MCP response reached the client: the per-request `ResponseReceipt`.

A tool whose result carries something that must be delivered exactly once (the answer in
`ask_user_question_kandev`) cannot record "delivered" while it builds the result: the
server could die before the result is written to the agent's connection. Instead it asks
the request's receipt to run a confirmation *after the HTTP response was sent*.

The MCP auth gate wraps every request's ASGI `send`/`receive` in a receipt. The response
counts as sent once the final body chunk (`more_body` false: for the SSE transport the
stream closes right after the event carrying the JSON-RPC result) was handed to the
server — `await send(...)` returned — and the client had not disconnected. Right then the
`on_sent` callbacks start (in their own task, so the app's teardown cannot cut them off;
the request does not finish before they did); otherwise (the client went away, nothing or
only part of the response was sent) `on_unsent` runs when the app is done.

On loopback a returned `send` means the bytes are in the agent's socket; uvicorn drops
writes to a connection it already knows is closed without an error, which is why the
disconnect seen on `receive` is checked as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kandev.faults import fault_point

log = logging.getLogger(__name__)

RECEIPT_SCOPE_KEY = "kandev.mcp.receipt"
OnSent = Callable[[], Awaitable[None]]
OnUnsent = Callable[[str], None]

# The gate's check, run first in `run_with_receipt`'s frame: None admits the request, else
# the ASGI app that refuses it.
Admit = Callable[[Scope], Awaitable[ASGIApp | None]]


class ResponseReceipt:
    """Callbacks to run once this request's response was (or was not) sent."""

    __slots__ = (
        "_callbacks",
        "_confirming",
        "_disconnected",
        "_receive",
        "_send",
        "_sent",
        "_settled",
    )

    def __init__(self, send: Send, receive: Receive) -> None:
        self._send = send
        self._receive = receive
        self._callbacks: list[tuple[OnSent, OnUnsent]] = []
        self._sent = False
        self._disconnected = False
        self._settled = False
        self._confirming: asyncio.Task[None] | None = None

    def after_sent(self, on_sent: OnSent, on_unsent: OnUnsent) -> None:
        """Run `on_sent()` after the response was sent, else `on_unsent(reason)`."""
        if self._settled or self._sent:
            on_unsent("the response was already finished")
            return
        self._callbacks.append((on_sent, on_unsent))

    async def send(self, message: Message) -> None:
        final = message["type"] == "http.response.body" and not message.get("more_body", False)
        await self._send(message)
        if final and not self._disconnected and not self._sent:
            self._sent = True
            callbacks, self._callbacks = self._callbacks, []
            if callbacks:
                self._confirming = asyncio.ensure_future(self._confirm(callbacks))

    async def _confirm(self, callbacks: list[tuple[OnSent, OnUnsent]]) -> None:
        fault_point("after_flush")
        for on_sent, _ in callbacks:
            try:
                await on_sent()
            except Exception:
                log.exception("delivery confirmation after an MCP response failed")

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._disconnected = True
        return message

    async def settle(self) -> None:
        """The app is done: wait for the confirmations the sent response started, and
        abort what never went out."""
        if self._settled:
            return
        self._settled = True
        callbacks, self._callbacks = self._callbacks, []
        reason = "the client went away" if self._disconnected else "no response was sent"
        for _, on_unsent in callbacks:
            _call_unsent(on_unsent, reason)
        if self._confirming is not None:
            await asyncio.shield(self._confirming)


def _call_unsent(on_unsent: OnUnsent, reason: str) -> None:
    try:
        on_unsent(reason)
    except Exception:
        log.exception("delivery abort after an MCP response failed")


def receipt_from_scope(scope: dict[str, Any] | None) -> ResponseReceipt | None:
    found = scope.get(RECEIPT_SCOPE_KEY) if scope is not None else None
    return found if isinstance(found, ResponseReceipt) else None


async def run_with_receipt(
    app: Any, scope: Scope, receive: Receive, send: Send, admit: Admit | None = None
) -> None:
    """Serve one request through `app` with a receipt; settle it when the app is done.

    `admit` (the auth gate's check) runs first, in this same frame: a request that waits
    for hours (an agent's ask) then keeps one frame of the gate and the receipt, not two.
    The receipt is found through the scope only (the tool runner reads it from the SDK's
    request), so no contextvar is set for it either."""
    if admit is not None:
        refusal = await admit(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
    receipt = ResponseReceipt(send, receive)
    scope[RECEIPT_SCOPE_KEY] = receipt
    try:
        await app(scope, receipt.receive, receipt.send)
    except BaseException:
        # Also when cancelled: a confirmation owns its durable write once it started.
        await asyncio.shield(receipt.settle())
        raise
    await receipt.settle()
