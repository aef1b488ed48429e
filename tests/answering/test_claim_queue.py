"""Answers to one bundle queue for each other in the process, not on its database locks
inside a transaction that holds a connection slot (PostgreSQL: a burst of answers to one
question would otherwise fill every slot with transactions waiting on that question)."""

from __future__ import annotations

import asyncio

import pytest

from kandev.keyed_locks import Held, KeyedLocks
from kandev.services import Services
from tests.answering.test_resolve_bundle import GOOD, _bundle, _resolve

ANSWERS = 5


class _Arrivals(KeyedLocks):
    """KeyedLocks that says when `expected` callers have asked for a key."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.arrived = 0
        self.all_arrived = asyncio.Event()

    async def acquire(self, key: str) -> Held:
        self.arrived += 1
        if self.arrived == self.expected:
            self.all_arrived.set()
        return await super().acquire(key)


async def test_answers_to_one_bundle_wait_for_each_other_without_a_connection(
    services: Services,
) -> None:
    _, _, pending_id = await _bundle(services)
    queue = _Arrivals(expected=ANSWERS + 1)  # the test's own hold, then the answers
    services.clarifications._resolve._claims = queue
    held = await queue.acquire(pending_id)
    answers = [asyncio.create_task(_resolve(services, pending_id, GOOD)) for _ in range(ANSWERS)]
    async with asyncio.timeout(30):
        await queue.all_arrived.wait()
    # Every answer has read and validated the bundle and waits for its turn to claim; none
    # holds a connection slot meanwhile.
    db = services.db
    assert db._slots is not None and db._slots._value == db.max_transactions
    assert not any(a.done() for a in answers)
    held.release()
    async with asyncio.timeout(30):
        results = await asyncio.gather(*answers)
    assert sorted(r["claimed"] for r in results) == [False] * (ANSWERS - 1) + [True]
    winner = next(r for r in results if r["claimed"])
    assert all(r["response"] == winner["response"] for r in results)
    assert len(queue) == 0  # the key left with its last caller


async def test_a_key_is_first_come_first_served_and_left_by_its_last_caller() -> None:
    locks = KeyedLocks()
    first = await locks.acquire("a")
    order: list[int] = []

    async def take(i: int) -> None:
        held = await locks.acquire("a")
        order.append(i)
        held.release()

    waiters = [asyncio.create_task(take(i)) for i in range(3)]
    other = await locks.acquire("b")  # another key is not held up by "a"
    other.release()
    assert len(locks) == 1 and not order
    first.release()
    first.release()  # a second release does nothing
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2]
    assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_nothing_behind() -> None:
    locks = _Arrivals(expected=2)
    held = await locks.acquire("a")
    waiter = asyncio.create_task(locks.acquire("a"))
    await locks.all_arrived.wait()  # the waiter went on to wait for the lock meanwhile
    waiter.cancel()
    held.release()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(locks) == 0
    again = await locks.acquire("a")  # the key is free
    again.release()
    assert len(locks) == 0
