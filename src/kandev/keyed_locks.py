"""One asyncio lock per key, kept only while someone holds or waits for it.

Used in front of a database lock that callers of the same key would queue on anyway: they
queue here instead, without holding a connection slot while they wait. (A burst of callers
of one key would otherwise fill every slot with transactions blocked on that key's database
lock, and callers of every other key would wait for a slot.)
"""

from __future__ import annotations

import asyncio


class Held:
    """A held key: `release()` lets the next caller in (once; later calls do nothing)."""

    __slots__ = ("_key", "_lock", "_locks", "_released")

    def __init__(self, locks: KeyedLocks, key: str, lock: asyncio.Lock) -> None:
        self._locks = locks
        self._key = key
        self._lock = lock
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._lock.release()
        self._locks._leave(self._key)


class KeyedLocks:
    def __init__(self) -> None:
        # key -> (lock, callers holding or waiting for it); an entry leaves with its last caller
        self._entries: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    async def acquire(self, key: str) -> Held:
        """Wait for the key (first come, first served); the caller must `release()` it."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            await lock.acquire()
        except BaseException:
            self._leave(key)
            raise
        return Held(self, key, lock)

    def _leave(self, key: str) -> None:
        _, users = self._entries[key]
        users[0] -= 1
        if not users[0]:
            del self._entries[key]

    def __len__(self) -> int:
        """Keys held or waited for now."""
        return len(self._entries)
