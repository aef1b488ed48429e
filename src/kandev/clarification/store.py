"""Live waiters: agents blocked in their ask, and the one answer each of them gets.

Reference clarification-baseline §4, on asyncio. The database decides who wins; this store
only hands a claimed answer to an agent still blocked in its call, and makes that hand-over
durable first: a responder may attach a confirmation (the durable finalize) that the first
waiter to consume the response runs, exactly once, before any waiter returns the answer —
or, for a waiter that hands the answer on (the agent's MCP call), once the answer has
actually been handed over: that waiter takes a `Handoff` and confirms (or aborts) it after
the tool result was written to the agent (see docs/questions.md, "Delivery guarantees").

Each entry is settled at most once, either by a response or by a cancellation; the two are
mutually exclusive, so a cancellation is never signalled after a response was recorded and
never twice. All state changes happen between awaits on one event loop, so they need no lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from kandev.clarification.questions import normalize_questions, questions_equal
from kandev.clarification.signal import Signal, Ticker, arm, disarm
from kandev.clock import Clock, SystemClock
from kandev.errors import ValidationFailed
from kandev.ids import IdFactory
from kandev.ids import new_id as default_new_id

DEFAULT_TIMEOUT_SECONDS = 7200.0
DEFAULT_DELIVERY_WAIT_SECONDS = 35.0
# How long a responder keeps waiting past its deadline for a confirmation that has already
# started (a started confirmation owns its durable operation, so it is allowed to finish).
STARTED_CONFIRMATION_CAP_SECONDS = 300.0


class StoreError(Exception):
    """Base of the store's errors (internal signals; callers translate them)."""

    def __init__(self, message: str, pending_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.pending_id = pending_id


class RequestNotFound(StoreError):
    """A waiter asked for an id the store does not hold."""


class RequestCancelled(StoreError):
    """The request was cancelled while a waiter was parked on it (the agent moved on)."""


class RequestTimedOut(StoreError):
    """No response within the store timeout."""


class ConfirmationFailed(StoreError):
    """The delivery confirmation failed (or did not finish in time).

    `delivered`: the answer had already been handed to the agent when it failed (a handoff
    was confirmed after the result was sent), so it must not be offered again.
    """

    def __init__(self, message: str, pending_id: str = "", *, delivered: bool = False) -> None:
        super().__init__(message, pending_id)
        self.delivered = delivered


class WaitStopped(StoreError):
    """The waiter's `stop` signal was set before a response came (the server is stopping)."""


class HandoffNotSent(StoreError):
    """A waiter took the answer but could not hand it over (the agent's call went away)."""


class DeliveryAbandoned(StoreError):
    """No waiter took the response before the responder's deadline; it can't be consumed."""


class StoreNotFound(StoreError):
    """A responder found no live, uncancelled request (deliver some other way)."""


class AlreadyResponded(StoreError):
    """A response was already recorded for the request."""


@dataclass(slots=True)
class PendingRequest:
    pending_id: str = ""
    session_id: str = ""
    task_id: str = ""
    questions: list[dict[str, Any]] = field(default_factory=list)
    context: str = ""
    created_at: datetime | None = None


@dataclass
class ClarificationResponse:
    pending_id: str = ""
    # each {question_id, selected_options: list[str], custom_text: str}
    answers: list[dict[str, Any]] = field(default_factory=list)
    rejected: bool = False
    reject_reason: str = ""
    responded_at: datetime | None = None


Confirm = Callable[[ClarificationResponse], Awaitable[None]]


Tick = Callable[[], Awaitable[None]]


class _Entry:
    """One request and the state of its single resolution (one per waiting agent, for as
    long as it waits: slotted, with `Signal`s rather than `asyncio.Event`s, to stay small)."""

    __slots__ = (
        "abandoned",
        "cancel_signals",
        "cancelled",
        "confirm",
        "confirmation",
        "confirmation_done",
        "confirmation_error",
        "extended",
        "handoff_taken",
        "request",
        "resolved",
        "response",
        "settled",
        "waiters",
    )

    def __init__(self, request: PendingRequest) -> None:
        self.request = request
        self.settled = Signal()  # set once: by the response or by the cancellation
        self.resolved = False
        self.cancelled = False
        self.cancel_signals = 0  # times a cancellation was signalled (invariant: ≤ 1)
        self.response: ClarificationResponse | None = None
        self.confirm: Confirm | None = None
        self.confirmation: asyncio.Task[None] | None = None  # started ⇔ not None
        self.confirmation_done = Signal()
        self.confirmation_error: BaseException | None = None
        self.handoff_taken = False  # a waiter took the answer to hand it over (counts as started)
        self.abandoned = False
        self.extended = Signal()  # the responder waits past its deadline
        self.waiters = 0  # waiters parked on `settled`


def _not_found(pending_id: str) -> str:
    return f"clarification request not found: {pending_id}"


class ClarificationStore:
    def __init__(
        self,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        clock: Clock | None = None,
        new_id: IdFactory | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self._clock = clock or SystemClock()
        self._new_id = new_id or default_new_id
        self._entries: dict[str, _Entry] = {}
        self._tickers: dict[float, Ticker] = {}  # by period: one timer for all the waiters

    @property
    def started_confirmation_wait(self) -> float:
        """Extra wait for a started confirmation: capped at 5 minutes and the store timeout."""
        return min(self.timeout, STARTED_CONFIRMATION_CAP_SECONDS)

    def __len__(self) -> int:
        return len(self._entries)

    # --- requests -----------------------------------------------------------------------

    def create_request(self, request: PendingRequest) -> tuple[str, bool]:
        """Store a request; an identical one of the same session is reused: (id, is_new)."""
        try:
            questions, _ = normalize_questions(request.questions)
        except ValidationFailed:
            questions = list(request.questions)  # callers validate; the store only keys
        for entry in self._entries.values():
            if entry.request.session_id == request.session_id and questions_equal(
                entry.request.questions, questions
            ):
                return entry.request.pending_id, False
        pending_id = request.pending_id or self._new_id()
        if pending_id in self._entries:
            raise ValueError(f"clarification request {pending_id} already exists")
        stored = replace(
            request,
            pending_id=pending_id,
            questions=questions,
            created_at=request.created_at or self._clock.now(),
        )
        self._entries[pending_id] = _Entry(stored)
        return pending_id, True

    def get_request(self, pending_id: str) -> PendingRequest | None:
        entry = self._entries.get(pending_id)
        return entry.request if entry is not None else None

    def list_pending(self) -> list[PendingRequest]:
        """Requests still awaiting a response, in creation order."""
        return [e.request for e in self._entries.values() if not e.resolved]

    def waiter_count(self, pending_id: str) -> int:
        """How many waiters are parked on the request (0 if unknown)."""
        entry = self._entries.get(pending_id)
        return entry.waiters if entry is not None else 0

    # --- waiting ------------------------------------------------------------------------

    async def wait_for_response(self, pending_id: str) -> ClarificationResponse:
        """Block until the request is answered (and its delivery confirmed), cancelled, or
        the store timeout passes. Cancelling the calling task leaves the entry in place."""
        response, handoff = await self._wait(pending_id, take_handoff=False)
        assert handoff is None
        return response

    def wait_for_handoff(
        self,
        pending_id: str,
        *,
        stop: Signal | None = None,
        tick_seconds: float | None = None,
        on_tick: Tick | None = None,
    ) -> Coroutine[Any, Any, tuple[ClarificationResponse, Handoff | None]]:
        """Like wait_for_response, for a waiter that hands the answer on itself.

        The first such consumer of a response that needs confirming gets a `Handoff` and
        must `confirm()` it once the answer reached its recipient, or `abort()` it when it
        could not be handed over; other waiters get (response, None) after that settled.
        `stop` set first ends the wait with WaitStopped (the request stays); `on_tick` runs
        every `tick_seconds` of waiting (progress for the agent), in the caller's task.
        """
        return self._wait(
            pending_id, take_handoff=True, stop=stop, tick_seconds=tick_seconds, on_tick=on_tick
        )

    async def _wait(
        self,
        pending_id: str,
        *,
        take_handoff: bool,
        stop: Signal | None = None,
        tick_seconds: float | None = None,
        on_tick: Tick | None = None,
    ) -> tuple[ClarificationResponse, Handoff | None]:
        entry = self._entries.get(pending_id)
        if entry is None:
            raise RequestNotFound(_not_found(pending_id), pending_id)
        # The waiter parks in the caller's own task and frame on one future: no helper task
        # or coroutine, no asyncio.wait, no Timeout. Its ticks come from the store's shared
        # ticker; a timer of its own only when its deadline comes before the next tick.
        signals = (entry.settled,) if stop is None else (entry.settled, stop)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        ticker = self._ticker(tick_seconds) if tick_seconds is not None else None
        entry.waiters += 1
        try:
            while not entry.settled.is_set():
                if stop is not None and stop.is_set():
                    raise WaitStopped("the wait was stopped", pending_id)
                left = deadline - loop.time()
                if left <= 0:
                    self._cancel_entry(entry)
                    raise RequestTimedOut(
                        f"clarification request timed out: {pending_id}", pending_id
                    )
                tick = ticker.signal if ticker is not None else None
                waits = signals if tick is None else (*signals, tick)
                own_timer = left if ticker is None or left < ticker.period else None
                armed = arm(waits, own_timer)
                try:
                    await armed[0]
                finally:
                    disarm(armed, waits)
                ticked = tick is not None and tick.is_set() and loop.time() < deadline
                if ticked and on_tick is not None and not any(s.is_set() for s in signals):
                    await on_tick()
        finally:
            entry.waiters -= 1
            if ticker is not None:
                ticker.leave()
        if entry.cancelled:
            self._discard(entry)
            raise RequestCancelled(
                f"clarification cancelled (agent moved on): {pending_id}", pending_id
            )
        return await self._consume(entry, take_handoff)

    def _ticker(self, period: float) -> Ticker:
        ticker = self._tickers.get(period)
        if ticker is None:
            ticker = self._tickers[period] = Ticker(period)
        ticker.join()
        return ticker

    async def _consume(
        self, entry: _Entry, take_handoff: bool = False
    ) -> tuple[ClarificationResponse, Handoff | None]:
        pending_id = entry.request.pending_id
        if entry.abandoned:
            self._discard(entry)
            raise DeliveryAbandoned(
                f"clarification response delivery was abandoned: {pending_id}", pending_id
            )
        assert entry.response is not None
        if entry.confirm is not None:
            if entry.confirmation is None and not entry.handoff_taken:
                if take_handoff:
                    entry.handoff_taken = True
                    self._discard(entry)
                    return entry.response, Handoff(self, entry)
                # The first consumer starts it; as its own task so a consumer that goes away
                # cannot cut a durable operation in half. Everyone waits for the same one.
                entry.confirmation = asyncio.create_task(self._run_confirmation(entry))
            await entry.confirmation_done.wait()
            error = entry.confirmation_error
            if error is not None:
                self._discard(entry)
                raise ConfirmationFailed(
                    f"confirm clarification response delivery: {error}", pending_id
                ) from error
        self._discard(entry)
        return entry.response, None

    async def _run_confirmation(self, entry: _Entry) -> None:
        assert entry.confirm is not None and entry.response is not None
        try:
            await entry.confirm(entry.response)
        except asyncio.CancelledError as exc:
            # Only loop shutdown cancels this task; report it as a failed confirmation.
            entry.confirmation_error = exc
        except Exception as exc:
            entry.confirmation_error = exc
        finally:
            entry.confirmation_done.set()
            self._discard(entry)

    # --- responding ---------------------------------------------------------------------

    def _record(
        self, pending_id: str, response: ClarificationResponse, confirm: Confirm | None
    ) -> _Entry:
        entry = self._entries.get(pending_id)
        if entry is None or entry.cancelled:
            raise StoreNotFound(_not_found(pending_id), pending_id)
        if entry.resolved:
            raise AlreadyResponded(f"response already submitted: {pending_id}", pending_id)
        entry.response = replace(
            response,
            pending_id=pending_id,
            responded_at=response.responded_at or self._clock.now(),
        )
        entry.confirm = confirm
        entry.resolved = True
        entry.settled.set()
        return entry

    def respond(self, pending_id: str, response: ClarificationResponse) -> None:
        """Record a response without delivery confirmation (waiters return it as is)."""
        self._record(pending_id, response, None)

    async def respond_with_delivery_confirmation(
        self,
        pending_id: str,
        response: ClarificationResponse,
        confirm: Confirm,
        wait_seconds: float = DEFAULT_DELIVERY_WAIT_SECONDS,
    ) -> None:
        """Record a response and return once a waiter has run `confirm` successfully.

        Raises StoreNotFound / AlreadyResponded before recording anything; afterwards
        ConfirmationFailed (confirm raised, or a started confirmation did not finish within
        the extra wait), HandoffNotSent (a waiter took the answer but could not hand it
        over) or DeliveryAbandoned (no waiter took it within `wait_seconds`).
        """
        if confirm is None:
            raise ValueError("a delivery confirmation is required")
        entry = self._record(pending_id, response, confirm)
        deadline = min(wait_seconds, self.timeout)
        try:
            if not await entry.confirmation_done.wait(deadline):
                if entry.confirmation is None and not entry.handoff_taken:
                    self._abandon(entry)
                    raise DeliveryAbandoned(
                        "wait for clarification delivery confirmation: no waiter took the "
                        f"response within {deadline:g}s: {pending_id}",
                        pending_id,
                    )
                await self._wait_started_confirmation(entry)
        except asyncio.CancelledError:
            if entry.confirmation is None and not entry.handoff_taken:
                self._abandon(entry)
            raise
        error = entry.confirmation_error
        if isinstance(error, HandoffNotSent):
            raise error
        if error is not None:
            raise ConfirmationFailed(
                f"confirm clarification response delivery: {error}",
                pending_id,
                delivered=entry.handoff_taken,
            ) from error

    async def _wait_started_confirmation(self, entry: _Entry) -> None:
        extra = self.started_confirmation_wait
        entry.extended.set()
        if not await entry.confirmation_done.wait(extra):
            pending_id = entry.request.pending_id
            raise ConfirmationFailed(
                "wait for clarification delivery confirmation: it did not finish within "
                f"{extra:g}s past the deadline: {pending_id}",
                pending_id,
            )

    def _abandon(self, entry: _Entry) -> None:
        entry.abandoned = True
        self._discard(entry)

    # --- cancelling ---------------------------------------------------------------------

    def _cancel_entry(self, entry: _Entry) -> bool:
        """Signal the cancellation: only once, and never after a response was recorded."""
        if entry.resolved or entry.cancelled:
            return False
        entry.cancelled = True
        entry.cancel_signals += 1
        entry.settled.set()
        self._discard(entry)
        return True

    def cancel_request(self, pending_id: str) -> bool:
        """Cancel an unanswered request, waking its waiters. False if missing, answered or
        already cancelled (an answered request is left to its waiters)."""
        entry = self._entries.get(pending_id)
        if entry is None:
            return False
        return self._cancel_entry(entry)

    def cancel_session(self, session_id: str) -> list[str]:
        """Drop every request of the session; returns the ids that were cancelled (those
        still unanswered). Answered ones are only dropped: their waiters still consume."""
        cancelled: list[str] = []
        for pending_id, entry in list(self._entries.items()):
            if entry.request.session_id != session_id:
                continue
            self._discard(entry)
            if self._cancel_entry(entry):
                cancelled.append(pending_id)
        return cancelled

    def _discard(self, entry: _Entry) -> None:
        """Remove the entry, unless the id now belongs to a newer entry."""
        pending_id = entry.request.pending_id
        if self._entries.get(pending_id) is entry:
            del self._entries[pending_id]


class Handoff:
    """An answer a waiter took to hand over itself; its confirmation runs only after that.

    Exactly one of `confirm()` (the answer reached the recipient: run the responder's
    durable confirmation) and `abort()` (it did not) takes effect; later calls are no-ops
    (a second confirm() waits for and reports the first one's outcome).
    """

    def __init__(self, store: ClarificationStore, entry: _Entry) -> None:
        self._store = store
        self._entry = entry

    @property
    def settled(self) -> bool:
        return self._entry.confirmation is not None or self._entry.confirmation_done.is_set()

    async def confirm(self) -> None:
        entry = self._entry
        if entry.confirmation is None:
            if entry.confirmation_done.is_set():  # aborted before
                return
            entry.confirmation = asyncio.create_task(self._store._run_confirmation(entry))
        await asyncio.shield(entry.confirmation)
        error = entry.confirmation_error
        if error is not None:
            pending_id = entry.request.pending_id
            raise ConfirmationFailed(
                f"confirm clarification response delivery: {error}", pending_id, delivered=True
            ) from error

    def abort(self, reason: str) -> None:
        entry = self._entry
        if self.settled:
            return
        entry.confirmation_error = HandoffNotSent(reason, entry.request.pending_id)
        entry.confirmation_done.set()
