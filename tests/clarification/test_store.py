"""The live waiter store (reference §4): basics, races and delivery confirmation.

Tests order events with asyncio.Event and by waiting on observable conditions (a waiter is
parked, a confirmation started); the only time-based waits are tiny store timeouts under test,
each bounded by anyio.fail_after.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from kandev.clarification.store import (
    AlreadyResponded,
    ClarificationResponse,
    ClarificationStore,
    ConfirmationFailed,
    DeliveryAbandoned,
    PendingRequest,
    RequestCancelled,
    RequestNotFound,
    RequestTimedOut,
    StoreError,
    StoreNotFound,
)
from kandev.clock import ManualClock

LIMIT = 5.0  # seconds any single test step may take before it counts as hung


def questions(prompt: str = "Deploy now?") -> list[dict[str, Any]]:
    return [
        {
            "id": "deploy",
            "title": "Deploy",
            "prompt": prompt,
            "options": [
                {"option_id": "go", "label": "Go ahead", "description": "Deploy now"},
                {"option_id": "wait", "label": "Wait", "description": "Hold"},
            ],
        }
    ]


def request(session_id: str = "s1", prompt: str = "Deploy now?", **kw: Any) -> PendingRequest:
    return PendingRequest(session_id=session_id, task_id="t1", questions=questions(prompt), **kw)


def answer(option: str = "go") -> ClarificationResponse:
    return ClarificationResponse(
        answers=[{"question_id": "deploy", "selected_options": [option], "custom_text": ""}]
    )


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"p{next(counter)}"


def make_store(**kw: Any) -> ClarificationStore:
    kw.setdefault("new_id", ids())
    return ClarificationStore(**kw)


async def until(condition: Callable[[], bool]) -> None:
    """Yield to other tasks until `condition` holds (bounded)."""
    with anyio.fail_after(LIMIT):
        # A bare yield to the other tasks (no timing): they change what `condition` reads.
        while not condition():
            await anyio.lowlevel.checkpoint()


async def parked_waiter(store: ClarificationStore, pending_id: str, n: int = 1) -> asyncio.Task:
    before = store.waiter_count(pending_id)
    task = asyncio.create_task(store.wait_for_response(pending_id))
    await until(lambda: store.waiter_count(pending_id) >= before + n)
    return task


class Gate:
    """A confirmation callback that records calls and blocks until released."""

    def __init__(self, error: Exception | None = None, block: bool = True) -> None:
        self.calls: list[ClarificationResponse] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.finished = asyncio.Event()
        self.error = error
        if not block:
            self.release.set()

    async def __call__(self, response: ClarificationResponse) -> None:
        self.calls.append(response)
        self.entered.set()
        try:
            await self.release.wait()
            if self.error is not None:
                raise self.error
        finally:
            self.finished.set()


# --- construction and requests ---------------------------------------------------------------


def test_default_timeout_is_two_hours():
    assert ClarificationStore().timeout == 7200.0
    assert ClarificationStore().started_confirmation_wait == 300.0


def test_timeout_must_be_positive():
    with pytest.raises(ValueError):
        ClarificationStore(timeout=0)


def test_create_request_generates_an_id():
    clock = ManualClock()
    store = ClarificationStore(clock=clock, new_id=lambda: "generated")
    pending_id, is_new = store.create_request(request())
    assert (pending_id, is_new) == ("generated", True)
    stored = store.get_request("generated")
    assert stored is not None
    assert stored.pending_id == "generated"
    assert stored.session_id == "s1"
    assert stored.task_id == "t1"
    assert stored.created_at == clock.now()
    assert stored.questions == questions()
    assert len(store) == 1


def test_create_request_keeps_a_given_id_and_created_at():
    store = make_store()
    created = datetime(2025, 5, 5, tzinfo=UTC)
    pending_id, is_new = store.create_request(request(pending_id="mine", created_at=created))
    assert (pending_id, is_new) == ("mine", True)
    stored = store.get_request("mine")
    assert stored is not None and stored.created_at == created


def test_create_request_normalizes_questions():
    store = make_store()
    raw = [
        {
            "prompt": "Deploy?",
            "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}],
        }
    ]
    pending_id, _ = store.create_request(PendingRequest(session_id="s1", questions=raw))
    stored = store.get_request(pending_id)
    assert stored is not None
    assert stored.questions[0]["id"] == "q1"
    assert [o["option_id"] for o in stored.questions[0]["options"]] == ["q1_opt1", "q1_opt2"]
    assert "id" not in raw[0]  # the caller's payload is left alone


def test_create_request_dedups_same_session_and_questions():
    store = make_store()
    first, is_new = store.create_request(request())
    assert is_new
    again = request()
    again.questions[0]["title"] = "Other title"  # titles/ids/context do not count
    again.questions[0]["id"] = "other"
    again.context = "different context"
    assert store.create_request(again) == (first, False)
    assert len(store) == 1


def test_create_request_different_questions_or_session_is_new():
    store = make_store()
    first, _ = store.create_request(request())
    second, is_new = store.create_request(request(prompt="Deploy later?"))
    assert is_new and second != first
    third, is_new = store.create_request(request(session_id="s2"))
    assert is_new and third not in (first, second)
    assert len(store) == 3


def test_create_request_with_a_taken_id_is_refused():
    store = make_store()
    store.create_request(request(pending_id="same"))
    with pytest.raises(ValueError):
        store.create_request(request(session_id="s2", pending_id="same"))


def test_get_request_found_and_not_found():
    store = make_store()
    pending_id, _ = store.create_request(request())
    found = store.get_request(pending_id)
    assert found is not None and found.pending_id == pending_id
    assert store.get_request("missing") is None


def test_list_pending_empty_returns_and_excludes_cancelled_and_answered():
    store = make_store()
    assert store.list_pending() == []
    a, _ = store.create_request(request(prompt="A?"))
    b, _ = store.create_request(request(prompt="B?"))
    c, _ = store.create_request(request(prompt="C?"))
    assert [r.pending_id for r in store.list_pending()] == [a, b, c]
    assert store.cancel_request(b)
    store.respond(c, answer())
    assert [r.pending_id for r in store.list_pending()] == [a]


# --- waiting and responding -------------------------------------------------------------------


async def test_wait_returns_the_response():
    clock = ManualClock()
    store = make_store(clock=clock)
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    store.respond(pending_id, answer("wait"))
    with anyio.fail_after(LIMIT):
        response = await waiter
    assert response.pending_id == pending_id
    assert response.responded_at == clock.now()
    assert response.answers == [
        {"question_id": "deploy", "selected_options": ["wait"], "custom_text": ""}
    ]
    assert response.rejected is False
    assert len(store) == 0  # consumed


async def test_response_recorded_before_the_wait_is_returned_at_once():
    store = make_store()
    pending_id, _ = store.create_request(request())
    store.respond(pending_id, answer())
    with anyio.fail_after(LIMIT):
        response = await store.wait_for_response(pending_id)
    assert response.answers[0]["selected_options"] == ["go"]


async def test_respond_keeps_a_given_responded_at():
    store = make_store(clock=ManualClock())
    pending_id, _ = store.create_request(request())
    at = datetime(2025, 1, 2, tzinfo=UTC)
    store.respond(
        pending_id, ClarificationResponse(rejected=True, reject_reason="no", responded_at=at)
    )
    with anyio.fail_after(LIMIT):
        response = await store.wait_for_response(pending_id)
    assert (response.rejected, response.reject_reason, response.responded_at) == (True, "no", at)


async def test_wait_not_found():
    store = make_store()
    with pytest.raises(RequestNotFound, match="clarification request not found: nope"):
        await store.wait_for_response("nope")


async def test_cancelled_waiter_leaves_the_entry():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert store.get_request(pending_id) is not None
    assert store.waiter_count(pending_id) == 0
    # Another waiter (the agent's retried call) still gets the answer.
    second = await parked_waiter(store, pending_id)
    store.respond(pending_id, answer())
    with anyio.fail_after(LIMIT):
        assert (await second).pending_id == pending_id


async def test_outer_wait_for_timeout_leaves_the_entry():
    store = make_store()
    pending_id, _ = store.create_request(request())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(store.wait_for_response(pending_id), 0.01)
    assert store.get_request(pending_id) is not None


async def test_cancel_request_unblocks_a_waiter():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    assert store.cancel_request(pending_id) is True
    with anyio.fail_after(LIMIT), pytest.raises(RequestCancelled, match="agent moved on"):
        await waiter
    assert len(store) == 0
    assert store.cancel_request(pending_id) is False


async def test_store_timeout():
    store = make_store(timeout=0.05)
    pending_id, _ = store.create_request(request())
    with anyio.fail_after(LIMIT), pytest.raises(RequestTimedOut, match="timed out: p1"):
        await store.wait_for_response(pending_id)
    assert len(store) == 0
    with pytest.raises(StoreNotFound):
        store.respond(pending_id, answer())


async def test_store_timeout_wakes_other_waiters_as_cancelled():
    store = make_store(timeout=0.05)
    pending_id, _ = store.create_request(request())
    waiters = [asyncio.create_task(store.wait_for_response(pending_id)) for _ in range(2)]
    with anyio.fail_after(LIMIT):
        results = await asyncio.gather(*waiters, return_exceptions=True)
    assert any(isinstance(r, RequestTimedOut) for r in results)
    assert all(isinstance(r, RequestTimedOut | RequestCancelled) for r in results)


def test_respond_not_found():
    store = make_store()
    with pytest.raises(StoreNotFound, match="not found: nope"):
        store.respond("nope", answer())


def test_respond_twice_is_already_responded():
    store = make_store()
    pending_id, _ = store.create_request(request())
    store.respond(pending_id, answer())
    with pytest.raises(AlreadyResponded):
        store.respond(pending_id, answer("wait"))


async def test_broadcast_to_multiple_waiters():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiters = [await parked_waiter(store, pending_id) for _ in range(3)]
    assert store.waiter_count(pending_id) == 3
    store.respond(pending_id, answer("wait"))
    with anyio.fail_after(LIMIT):
        responses = await asyncio.gather(*waiters)
    assert all(r.answers[0]["selected_options"] == ["wait"] for r in responses)
    assert len({id(r) for r in responses}) == 1
    assert len(store) == 0


# --- cancel_session ----------------------------------------------------------------------------


async def test_cancel_session_cancels_matching_requests():
    store = make_store()
    a, _ = store.create_request(request(prompt="A?"))
    b, _ = store.create_request(request(prompt="B?"))
    other, _ = store.create_request(request(session_id="s2"))
    waiter_a = await parked_waiter(store, a)
    waiter_b = await parked_waiter(store, b)
    assert sorted(store.cancel_session("s1")) == sorted([a, b])
    for waiter in (waiter_a, waiter_b):
        with anyio.fail_after(LIMIT), pytest.raises(RequestCancelled):
            await waiter
    assert store.get_request(other) is not None
    assert len(store) == 1


def test_cancel_session_no_match():
    store = make_store()
    pending_id, _ = store.create_request(request())
    assert store.cancel_session("s9") == []
    assert store.get_request(pending_id) is not None


async def test_cancel_session_drops_an_answered_request_without_cancelling_its_waiters():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    store.respond(pending_id, answer())
    assert store.cancel_session("s1") == []
    assert len(store) == 0
    with anyio.fail_after(LIMIT):
        assert (await waiter).pending_id == pending_id


# --- races -------------------------------------------------------------------------------------


async def test_cancel_request_after_respond_does_not_signal_cancel():
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    waiter = await parked_waiter(store, pending_id)
    store.respond(pending_id, answer())
    assert store.cancel_request(pending_id) is False
    assert entry.cancel_signals == 0 and not entry.cancelled
    with anyio.fail_after(LIMIT):
        assert (await waiter).answers[0]["selected_options"] == ["go"]


def test_respond_after_cancel_request_errors():
    store = make_store()
    pending_id, _ = store.create_request(request())
    assert store.cancel_request(pending_id)
    with pytest.raises(StoreNotFound):
        store.respond(pending_id, answer())


async def test_respond_with_confirmation_after_cancel_request_errors():
    store = make_store()
    pending_id, _ = store.create_request(request())
    assert store.cancel_request(pending_id)
    gate = Gate(block=False)
    with pytest.raises(StoreNotFound):
        await store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    assert gate.calls == []


async def race(store: ClarificationStore, pending_id: str, operations: list[str]) -> list[Any]:
    """Start every operation as its own task, release them together, return their outcomes
    (a return value or the StoreError raised), in the order given."""
    start = asyncio.Event()

    async def run(operation: str) -> Any:
        await start.wait()
        try:
            if operation == "respond":
                store.respond(pending_id, answer())
                return "responded"
            if operation == "cancel_session":
                return store.cancel_session("s1")
            return store.cancel_request(pending_id)
        except StoreError as exc:
            return exc

    tasks = [asyncio.create_task(run(op)) for op in operations]
    start.set()
    with anyio.fail_after(LIMIT):
        return await asyncio.gather(*tasks)


RESPOND_CANCEL_ORDERS = sorted(
    set(itertools.permutations(["respond", "cancel_session", "cancel_request", "cancel_request"]))
)


@pytest.mark.parametrize("order", RESPOND_CANCEL_ORDERS, ids="-".join)
async def test_cancel_session_concurrent_with_respond_never_cancels_once_delivered(order):
    """Every interleaving of respond / cancel_session / cancel_request: exactly one outcome."""
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    waiter = await parked_waiter(store, pending_id)
    outcomes = await race(store, pending_id, list(order))
    with anyio.fail_after(LIMIT):
        (result,) = await asyncio.gather(waiter, return_exceptions=True)
    by_op = list(zip(order, outcomes, strict=True))
    responded = "responded" in outcomes
    cancelled = [o for op, o in by_op if op != "respond" and o]  # True or a non-empty id list
    assert entry.cancel_signals == (0 if responded else 1)
    if responded:
        assert isinstance(result, ClarificationResponse)
        assert cancelled == []
    else:
        assert isinstance(result, RequestCancelled)
        assert len(cancelled) == 1
        assert isinstance(outcomes[order.index("respond")], StoreNotFound)
    assert order[0] != "respond" or responded  # the first one in wins


async def test_concurrent_cancel_requests_signal_once():
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    waiter = await parked_waiter(store, pending_id)
    outcomes = await race(store, pending_id, ["cancel_request"] * 10)
    with anyio.fail_after(LIMIT), pytest.raises(RequestCancelled):
        await waiter
    assert outcomes.count(True) == 1
    assert entry.cancel_signals == 1


@pytest.mark.parametrize(
    "order", [["cancel_session", "cancel_request"], ["cancel_request", "cancel_session"]]
)
async def test_cancel_session_concurrent_with_cancel_request_signals_once(order):
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    waiter = await parked_waiter(store, pending_id)
    outcomes = await race(store, pending_id, order)
    with anyio.fail_after(LIMIT), pytest.raises(RequestCancelled):
        await waiter
    assert entry.cancel_signals == 1
    assert sum(1 for o in outcomes if o) == 1
    assert outcomes[0] in (True, [pending_id])  # the first one in does it


class _CancelAfterLookup(dict):
    """The store's map, with a cancellation slipped in right after one lookup of `key`
    (the window between a responder finding the entry and claiming it)."""

    def __init__(self, entries: dict, key: str, cancel: Callable[[], Any]) -> None:
        super().__init__(entries)
        self.key = key
        self.cancel: Callable[[], Any] | None = cancel

    def get(self, key: Any, default: Any = None) -> Any:
        found = super().get(key, default)
        if key == self.key and found is not None and self.cancel is not None:
            cancel, self.cancel = self.cancel, None
            cancel()
        return found


@pytest.mark.parametrize("how", ["cancel_request", "cancel_session"])
async def test_cancellation_after_the_responders_lookup_is_not_found(how: str):
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    waiter = await parked_waiter(store, pending_id)
    cancel = (
        (lambda: store.cancel_request(pending_id))
        if how == "cancel_request"
        else (lambda: store.cancel_session("s1"))
    )
    store._entries = _CancelAfterLookup(store._entries, pending_id, cancel)
    gate = Gate(block=False)
    with pytest.raises(StoreNotFound):
        await store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    assert gate.calls == []
    assert entry.cancel_signals == 1 and not entry.resolved
    with anyio.fail_after(LIMIT), pytest.raises(RequestCancelled):
        await waiter


# --- delivery confirmation -----------------------------------------------------------------------


async def test_waiter_returns_only_after_durable_confirmation():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    gate = Gate()
    responder = asyncio.create_task(
        store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    )
    with anyio.fail_after(LIMIT):
        await gate.entered.wait()
    assert not waiter.done() and not responder.done()
    # A cancellation cannot cut in while the answer is being made durable.
    assert store.cancel_request(pending_id) is False
    assert store._entries[pending_id].cancel_signals == 0
    gate.release.set()
    with anyio.fail_after(LIMIT):
        response = await waiter
        assert await responder is None
    assert response.answers[0]["selected_options"] == ["go"]
    assert gate.calls == [response]
    assert len(store) == 0


async def test_confirmation_runs_once_for_all_waiters():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiters = [await parked_waiter(store, pending_id) for _ in range(3)]
    gate = Gate()
    responder = asyncio.create_task(
        store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    )
    with anyio.fail_after(LIMIT):
        await gate.entered.wait()
    assert not any(w.done() for w in waiters)
    gate.release.set()
    with anyio.fail_after(LIMIT):
        responses = await asyncio.gather(*waiters)
        await responder
    assert len(gate.calls) == 1
    assert all(r is responses[0] for r in responses)


async def test_waiter_arriving_after_the_response_runs_the_confirmation():
    store = make_store()
    pending_id, _ = store.create_request(request())
    gate = Gate(block=False)
    responder = asyncio.create_task(
        store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    )
    await until(lambda: store._entries[pending_id].resolved)
    with anyio.fail_after(LIMIT):
        response = await store.wait_for_response(pending_id)
        await responder
    assert gate.calls == [response]


async def test_failed_confirmation_errors_both_sides():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiters = [await parked_waiter(store, pending_id) for _ in range(2)]
    gate = Gate(error=RuntimeError("disk full"), block=False)
    with anyio.fail_after(LIMIT):
        with pytest.raises(ConfirmationFailed, match="disk full") as responder_error:
            await store.respond_with_delivery_confirmation(pending_id, answer(), gate)
        results = await asyncio.gather(*waiters, return_exceptions=True)
    assert isinstance(responder_error.value.__cause__, RuntimeError)
    for result in results:
        assert isinstance(result, ConfirmationFailed)
        assert str(result) == "confirm clarification response delivery: disk full"
        assert isinstance(result.__cause__, RuntimeError)
    assert len(gate.calls) == 1
    assert len(store) == 0


async def test_unconsumed_response_is_abandoned_and_cannot_be_consumed_later():
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    gate = Gate(block=False)
    with anyio.fail_after(LIMIT), pytest.raises(DeliveryAbandoned):
        await store.respond_with_delivery_confirmation(
            pending_id, answer(), gate, wait_seconds=0.02
        )
    assert entry.abandoned
    assert len(store) == 0
    assert gate.calls == []
    with pytest.raises(RequestNotFound):
        await store.wait_for_response(pending_id)
    with pytest.raises(StoreNotFound):
        store.respond(pending_id, answer())
    # A waiter that had already found the entry is refused too, and never confirms.
    with pytest.raises(DeliveryAbandoned):
        await store._consume(entry)
    assert gate.calls == []


async def test_store_timeout_bounds_the_responder_without_a_waiter():
    store = make_store(timeout=0.05)
    pending_id, _ = store.create_request(request())
    with anyio.fail_after(LIMIT), pytest.raises(DeliveryAbandoned):
        # 35 s asked, but the store timeout (50 ms) bounds the wait.
        await store.respond_with_delivery_confirmation(
            pending_id, answer(), Gate(block=False), wait_seconds=35.0
        )
    assert len(store) == 0


async def test_cancelled_responder_abandons_an_unstarted_delivery():
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    gate = Gate(block=False)
    responder = asyncio.create_task(
        store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    )
    await until(lambda: entry.resolved)
    responder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await responder
    assert entry.abandoned and len(store) == 0
    assert gate.calls == []


async def test_started_confirmation_finishes_after_the_responders_deadline():
    store = make_store()
    pending_id, _ = store.create_request(request())
    entry = store._entries[pending_id]
    waiter = await parked_waiter(store, pending_id)
    gate = Gate()
    responder = asyncio.create_task(
        store.respond_with_delivery_confirmation(pending_id, answer(), gate, wait_seconds=0.02)
    )
    with anyio.fail_after(LIMIT):
        await gate.entered.wait()
        await entry.extended.wait()  # the responder's own deadline has passed
    assert not responder.done() and not entry.abandoned
    gate.release.set()
    with anyio.fail_after(LIMIT):
        assert await responder is None
        response = await waiter
    assert response.pending_id == pending_id
    assert len(gate.calls) == 1


def test_extra_wait_is_capped_by_five_minutes_and_the_store_timeout():
    assert ClarificationStore(timeout=7200).started_confirmation_wait == 300.0
    assert ClarificationStore(timeout=301).started_confirmation_wait == 300.0
    assert ClarificationStore(timeout=60).started_confirmation_wait == 60.0


async def test_extra_wait_for_a_started_confirmation_is_bounded():
    store = make_store(timeout=0.05)
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    gate = Gate()  # never released while the responder waits
    with anyio.fail_after(LIMIT), pytest.raises(ConfirmationFailed, match="did not finish"):
        await store.respond_with_delivery_confirmation(
            pending_id, answer(), gate, wait_seconds=0.01
        )
    assert store._entries[pending_id].extended.is_set()
    assert not gate.finished.is_set()
    # The started confirmation still owns its durable operation and may finish later.
    gate.release.set()
    with anyio.fail_after(LIMIT):
        assert (await waiter).pending_id == pending_id
    assert len(store) == 0


async def test_cancelled_waiter_does_not_cut_a_started_confirmation():
    store = make_store()
    pending_id, _ = store.create_request(request())
    waiter = await parked_waiter(store, pending_id)
    gate = Gate()
    responder = asyncio.create_task(
        store.respond_with_delivery_confirmation(pending_id, answer(), gate)
    )
    with anyio.fail_after(LIMIT):
        await gate.entered.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not gate.finished.is_set()
    gate.release.set()
    with anyio.fail_after(LIMIT):
        assert await responder is None
    assert gate.finished.is_set()
    assert len(store) == 0


async def test_respond_with_confirmation_requires_a_callback():
    store = make_store()
    pending_id, _ = store.create_request(request())
    with pytest.raises(ValueError):
        await store.respond_with_delivery_confirmation(pending_id, answer(), None)  # type: ignore[arg-type]
    assert not store._entries[pending_id].resolved


async def test_respond_with_confirmation_not_found_and_already_responded():
    store = make_store()
    with pytest.raises(StoreNotFound):
        await store.respond_with_delivery_confirmation("nope", answer(), Gate(block=False))
    pending_id, _ = store.create_request(request())
    store.respond(pending_id, answer())
    with pytest.raises(AlreadyResponded):
        await store.respond_with_delivery_confirmation(pending_id, answer(), Gate(block=False))


async def test_responded_at_comes_from_the_clock():
    clock = ManualClock()
    store = make_store(clock=clock)
    pending_id, _ = store.create_request(request())
    clock.advance(minutes=5)
    waiter = await parked_waiter(store, pending_id)
    with anyio.fail_after(LIMIT):
        await store.respond_with_delivery_confirmation(pending_id, answer(), Gate(block=False))
        response = await waiter
    assert response.responded_at == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=5)


async def test_a_waiter_parks_on_its_future_in_its_own_frame() -> None:
    """Every coroutine frame in a waiting agent's chain is memory held for as long as it
    waits (issue: performance, RSS per waiting agent): the store's wait awaits its future
    itself, with no helper coroutine under it."""
    store = ClarificationStore(timeout=60)
    pending_id, _ = store.create_request(request())
    waiting = store.wait_for_response(pending_id)
    awaited = waiting.send(None)  # runs the wait up to where it parks
    assert isinstance(awaited, asyncio.Future) and not awaited.done()
    chain, coro = [], waiting
    while asyncio.iscoroutine(coro):
        chain.append(coro.cr_code.co_name)
        coro = coro.cr_await
    assert chain == ["wait_for_response", "_wait"]
    assert store.waiter_count(pending_id) == 1
    waiting.close()  # the wait's cleanup runs
    assert store.waiter_count(pending_id) == 0


async def test_waiters_tick_on_one_shared_timer_and_it_stops_with_the_last() -> None:
    """Progress ticks come from one timer per period for every waiter (not a timer handle
    per waiting agent); both waiters tick, and the timer is gone once neither waits."""
    store = ClarificationStore(timeout=60)
    ids = [store.create_request(request(f"s{i}"))[0] for i in range(2)]
    ticked = {pid: asyncio.Event() for pid in ids}

    def on_tick(pid: str) -> Callable[[], Awaitable[None]]:
        async def tick() -> None:
            ticked[pid].set()

        return tick

    waiters = [
        asyncio.ensure_future(store.wait_for_handoff(pid, tick_seconds=0.05, on_tick=on_tick(pid)))
        for pid in ids
    ]
    async with asyncio.timeout(10):
        for event in ticked.values():
            await event.wait()
    ticker = store._tickers[0.05]
    assert ticker._users == 2 and ticker._handle is not None
    assert all(store.waiter_count(pid) == 1 for pid in ids)
    for pid, waiter in zip(ids, waiters, strict=True):
        store.respond(pid, answer())
        response, _ = await waiter
        assert response.answers[0]["selected_options"] == ["go"]
    assert ticker._users == 0 and ticker._handle is None


async def test_a_deadline_before_the_next_tick_still_ends_the_wait_on_time() -> None:
    store = ClarificationStore(timeout=0.1)
    pending_id, _ = store.create_request(request())
    started = asyncio.get_running_loop().time()
    with pytest.raises(RequestTimedOut):
        async with asyncio.timeout(10):
            await store.wait_for_handoff(pending_id, tick_seconds=3600, on_tick=None)
    assert asyncio.get_running_loop().time() - started < 5  # not an hour's tick later
    assert store._tickers[3600]._handle is None
