"""A one-shot wake-up flag for many waiters, lighter than `asyncio.Event`.

Every blocked agent's ask holds a few of these for hours, so their size is server memory per
waiting agent: an `asyncio.Event` carries a 600-byte deque from birth; a `Signal` holds a
list only while someone waits. `wait(timeout)` needs one future and one timer handle, where
`asyncio.timeout(...)` around `Event.wait()` takes a Timeout object, a handle and a future
besides. One future may wait on several signals at once (`wait_any`): the first set wins.
"""

from __future__ import annotations

import asyncio
import contextlib


class Signal:
    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Set for good (there is no clear) and wake every waiter."""
        if self._set:
            return
        self._set = True
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(True)

    def _add(self, fut: asyncio.Future[bool]) -> None:
        if self._waiters is None:
            self._waiters = [fut]
        else:
            self._waiters.append(fut)

    def _discard(self, fut: asyncio.Future[bool]) -> None:
        waiters = self._waiters
        if waiters is not None:
            with contextlib.suppress(ValueError):
                waiters.remove(fut)
            if not waiters:
                self._waiters = None

    async def wait(self, timeout: float | None = None) -> bool:
        """True once set; False when `timeout` seconds passed first."""
        return await wait_any((self,), timeout)


Armed = tuple["asyncio.Future[bool]", "asyncio.TimerHandle | None"]


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


def arm(signals: tuple[Signal, ...], timeout: float | None) -> Armed:
    """A future that any of `signals` sets to True, or the timer to False after `timeout`
    seconds; await it, then `disarm` it. (`wait_any` in two halves, for a waiter that waits
    for hours: awaiting the future in its own frame needs no coroutine of ours besides.)"""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[bool] = loop.create_future()
    if any(s._set for s in signals):
        fut.set_result(True)
        return fut, None
    for s in signals:
        s._add(fut)
    return fut, loop.call_later(timeout, _expire, fut) if timeout is not None else None


def disarm(armed: Armed, signals: tuple[Signal, ...]) -> None:
    fut, handle = armed
    if handle is not None:
        handle.cancel()
    for s in signals:
        s._discard(fut)


async def wait_any(signals: tuple[Signal, ...], timeout: float | None = None) -> bool:
    """True once any of `signals` is set; False when `timeout` seconds passed first."""
    armed = arm(signals, timeout)
    try:
        return await armed[0]
    finally:
        disarm(armed, signals)


class Ticker:
    """One timer for every waiter that wakes at one period (an ask's progress ticks): each
    tick sets the current `signal` and puts a fresh one in its place. A waiter waits on the
    current signal beside its own, so it holds no timer of its own for hours — one future in
    a list instead of a timer handle per waiting agent. The ticks are the ticker's, not the
    waiter's: the first comes within one period of joining."""

    __slots__ = ("_handle", "_loop", "_users", "period", "signal")

    def __init__(self, period: float) -> None:
        if period <= 0:
            raise ValueError("a tick period must be positive")
        self.period = period
        self.signal = Signal()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._users = 0

    def join(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a ticker outlives a loop only in tests
            self._loop, self._users, self._handle = loop, 0, None
        self._users += 1
        if self._handle is None:
            self._handle = loop.call_later(self.period, self._tick)

    def leave(self) -> None:
        self._users -= 1
        if self._users <= 0 and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        fired, self.signal = self.signal, Signal()
        loop = self._loop
        self._handle = loop.call_later(self.period, self._tick) if loop and self._users else None
        fired.set()
