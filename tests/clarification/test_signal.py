"""clarification.signal: the one-shot flag a waiting ask parks on (instead of asyncio.Event)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest

from kandev.clarification.signal import Signal, wait_any


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the other tasks until `condition` holds (bounded; no timing)."""
    with anyio.fail_after(5):
        while not condition():
            await anyio.lowlevel.checkpoint()


def waiting(signal: Signal) -> int:
    return len(signal._waiters or ())


async def test_set_wakes_every_waiter_and_later_waits_return_at_once() -> None:
    signal = Signal()
    waiters = [asyncio.create_task(signal.wait()) for _ in range(3)]
    await until(lambda: waiting(signal) == 3)
    assert not any(w.done() for w in waiters)
    signal.set()
    assert await asyncio.gather(*waiters) == [True, True, True]
    assert signal._waiters is None  # nothing held once nobody waits
    assert await signal.wait(0) is True


async def test_a_timeout_returns_false_and_leaves_nothing_behind() -> None:
    signal = Signal()
    assert await signal.wait(0.001) is False
    assert signal._waiters is None
    assert not signal.is_set()


async def test_wait_any_returns_on_the_first_of_two_and_unregisters_from_both() -> None:
    first, second = Signal(), Signal()
    waiter = asyncio.create_task(wait_any((first, second), 60))
    await until(lambda: waiting(first) == 1 and waiting(second) == 1)
    second.set()
    assert await waiter is True
    assert first._waiters is None and second._waiters is None
    assert not first.is_set()


async def test_a_cancelled_waiter_is_removed_and_a_later_set_wakes_the_others() -> None:
    signal = Signal()
    gone = asyncio.create_task(signal.wait())
    stays = asyncio.create_task(signal.wait())
    await until(lambda: waiting(signal) == 2)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert waiting(signal) == 1
    signal.set()
    assert await stays is True
