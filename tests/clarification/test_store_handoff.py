"""Handoffs: a waiter that hands the answer on confirms the delivery only after it did.

The responder (`respond_with_delivery_confirmation`) returns only once the confirmation ran,
which for a handoff is after the waiter's `confirm()` (the agent's tool result was sent);
an `abort()` (nothing reached the agent) is reported as HandoffNotSent so the answer can be
delivered another way. No sleeps: ordering by events and observable state.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest

from kandev.clarification.store import (
    ClarificationResponse,
    ConfirmationFailed,
    HandoffNotSent,
)
from tests.clarification.test_store import LIMIT, answer, make_store, parked_waiter, request, until


class Confirm:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[ClarificationResponse] = []
        self.fail = fail

    async def __call__(self, response: ClarificationResponse) -> None:
        self.calls.append(response)
        if self.fail:
            raise RuntimeError("database is gone")


async def test_confirmation_runs_only_when_the_handoff_is_confirmed() -> None:
    store = make_store()
    pending_id, _ = store.create_request(request())
    confirm = Confirm()
    with anyio.fail_after(LIMIT):
        waiter = asyncio.ensure_future(store.wait_for_handoff(pending_id))
        await until(lambda: store.waiter_count(pending_id) == 1)
        responder = asyncio.ensure_future(
            store.respond_with_delivery_confirmation(pending_id, answer(), confirm)
        )
        response, handoff = await waiter
        assert handoff is not None and response.answers == answer().answers
        await anyio.lowlevel.checkpoint()
        assert confirm.calls == [] and not responder.done()  # not delivered yet
        await handoff.confirm()
        await responder  # returns once the delivered mark is written
        assert len(confirm.calls) == 1
        await handoff.confirm()  # idempotent
    assert len(confirm.calls) == 1
    assert len(store) == 0


async def test_aborted_handoff_tells_the_responder_nothing_was_delivered() -> None:
    store = make_store()
    pending_id, _ = store.create_request(request())
    confirm = Confirm()
    with anyio.fail_after(LIMIT):
        waiter = asyncio.ensure_future(store.wait_for_handoff(pending_id))
        await until(lambda: store.waiter_count(pending_id) == 1)
        responder = asyncio.ensure_future(
            store.respond_with_delivery_confirmation(pending_id, answer(), confirm)
        )
        _, handoff = await waiter
        assert handoff is not None
        handoff.abort("the client went away")
        with pytest.raises(HandoffNotSent):
            await responder
        await handoff.confirm()  # too late: no effect
    assert confirm.calls == []


async def test_a_taken_handoff_is_not_abandoned_at_the_responders_deadline() -> None:
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    confirm = Confirm()
    with anyio.fail_after(LIMIT):
        waiter = asyncio.ensure_future(store.wait_for_handoff(pending_id))
        await until(lambda: store.waiter_count(pending_id) == 1)
        responder = asyncio.ensure_future(
            store.respond_with_delivery_confirmation(
                pending_id, answer(), confirm, wait_seconds=0.01
            )
        )
        _, handoff = await waiter
        assert handoff is not None
        # The deadline passes while the result is still being written: it keeps waiting.
        await until(entry.extended.is_set)
        assert not responder.done() and not entry.abandoned
        await handoff.confirm()
        await responder
    assert len(confirm.calls) == 1


async def test_failed_confirmation_after_the_handoff_is_marked_delivered() -> None:
    store = make_store()
    pending_id, _ = store.create_request(request())
    with anyio.fail_after(LIMIT):
        waiter = asyncio.ensure_future(store.wait_for_handoff(pending_id))
        await until(lambda: store.waiter_count(pending_id) == 1)
        responder = asyncio.ensure_future(
            store.respond_with_delivery_confirmation(pending_id, answer(), Confirm(fail=True))
        )
        _, handoff = await waiter
        assert handoff is not None
        with pytest.raises(ConfirmationFailed) as waiter_error:
            await handoff.confirm()
        with pytest.raises(ConfirmationFailed) as responder_error:
            await responder
    # The agent has the answer: the responder must not restore it for a retry.
    assert waiter_error.value.delivered and responder_error.value.delivered


async def test_other_waiters_get_the_answer_after_the_handoff_confirmed() -> None:
    store = make_store()
    pending_id, _ = store.create_request(request())
    with anyio.fail_after(LIMIT):
        handing = asyncio.ensure_future(store.wait_for_handoff(pending_id))
        await until(lambda: store.waiter_count(pending_id) == 1)
        plain = await parked_waiter(store, pending_id)
        responder = asyncio.ensure_future(
            store.respond_with_delivery_confirmation(pending_id, answer(), Confirm())
        )
        _, handoff = await handing
        assert handoff is not None
        await anyio.lowlevel.checkpoint()
        assert not plain.done()
        await handoff.confirm()
        assert (await plain).answers == answer().answers
        await responder
