"""The MCP response receipt: a confirmation runs only after the response was sent."""

from __future__ import annotations

from typing import Any

import pytest

from kandev.mcp.delivery import receipt_from_scope, run_with_receipt


class Wire:
    """Fake ASGI server side: records what was sent; can fail or report a disconnect."""

    def __init__(self, *, fail_on_final: bool = False, disconnect: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail_on_final = fail_on_final
        self.disconnect = disconnect

    async def send(self, message: dict[str, Any]) -> None:
        if self.fail_on_final and not message.get("more_body", False):
            raise OSError("connection reset")
        self.sent.append(message)

    async def receive(self) -> dict[str, Any]:
        if self.disconnect:
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": b"", "more_body": False}


def app_registering(events: list[str], *, chunks: int = 2, read_first: bool = False):  # type: ignore[no-untyped-def]
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if read_first:
            await receive()
        receipt = receipt_from_scope(scope)
        assert receipt is not None

        async def on_sent() -> None:
            events.append("confirmed")

        receipt.after_sent(on_sent, lambda reason: events.append(f"aborted: {reason}"))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(chunks):
            events.append(f"chunk {i}")
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
        events.append("final")
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def test_confirms_after_the_final_chunk_was_sent() -> None:
    events: list[str] = []
    wire = Wire()
    await run_with_receipt(app_registering(events), {"type": "http"}, wire.receive, wire.send)
    assert events == ["chunk 0", "chunk 1", "final", "confirmed"]
    assert wire.sent[-1]["more_body"] is False


async def test_a_failed_send_aborts() -> None:
    events: list[str] = []
    wire = Wire(fail_on_final=True)
    with pytest.raises(OSError):
        await run_with_receipt(app_registering(events), {"type": "http"}, wire.receive, wire.send)
    assert events[-1] == "aborted: no response was sent"


async def test_a_disconnected_client_aborts_even_if_send_returned() -> None:
    events: list[str] = []
    wire = Wire(disconnect=True)
    app = app_registering(events, read_first=True)
    await run_with_receipt(app, {"type": "http"}, wire.receive, wire.send)
    assert events[-1] == "aborted: the client went away"


async def test_an_app_that_ends_without_a_full_response_aborts() -> None:
    events: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        receipt = receipt_from_scope(scope)
        assert receipt is not None

        async def on_sent() -> None:
            events.append("confirmed")

        receipt.after_sent(on_sent, lambda reason: events.append("aborted"))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x", "more_body": True})
        raise RuntimeError("stream broke")

    wire = Wire()
    with pytest.raises(RuntimeError):
        await run_with_receipt(app, {"type": "http"}, wire.receive, wire.send)
    assert events == ["aborted"]


async def test_the_gates_check_runs_first_and_a_refusal_answers_alone() -> None:
    served: list[str] = []

    async def refuse(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert receipt_from_scope(scope) is None  # a refused request gets no receipt
        served.append("refused")
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        served.append(f"app as {scope['caller']}")

    async def admit_nobody(scope: dict[str, Any]) -> Any:
        return refuse

    async def admit_alice(scope: dict[str, Any]) -> Any:
        scope["caller"] = "alice"
        return None

    wire = Wire()
    await run_with_receipt(app, {"type": "http"}, wire.receive, wire.send, admit=admit_nobody)
    assert served == ["refused"] and wire.sent[0]["status"] == 401
    await run_with_receipt(app, {"type": "http"}, wire.receive, wire.send, admit=admit_alice)
    assert served == ["refused", "app as alice"]
