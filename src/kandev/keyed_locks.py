"""One asyncio lock per key, kept only while someone holds or waits for it.

Used in front of a database lock that callers of the same key would queue on anyway: they
queue here instead, without holding a connection slot while they wait. (A burst of callers
of one key would otherwise fill every slot with transactions blocked on that key's database
lock, and callers of every other key would wait for a slot.)
"""

from __future__ import annotations

import asyncio


class _Key:
    """A key's lock and how many callers hold or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class Held:
    """A held key: `release()` lets the next caller in (once; later calls do nothing)."""

    __slots__ = ("_key", "_locks", "_name")

    def __init__(self, locks: KeyedLocks, name: str, key: _Key) -> None:
        self._locks = locks
        self._name = name
        self._key: _Key | None = key

    def release(self) -> None:
        key, self._key = self._key, None
        if key is not None:
            key.lock.release()
            self._locks._leave(self._name, key)


class KeyedLocks:
    def __init__(self) -> None:
        self._keys: dict[str, _Key] = {}  # a key leaves with its last caller

    async def acquire(self, name: str) -> Held:
        """Wait for the key (first come, first served); the caller must `release()` it."""
        key = self._keys.get(name)
        if key is None:
            key = self._keys[name] = _Key()
        key.users += 1
        try:
            await key.lock.acquire()
        except BaseException:
            self._leave(name, key)
            raise
        return Held(self, name, key)

    def _leave(self, name: str, key: _Key) -> None:
        key.users -= 1
        if not key.users:
            del self._keys[name]

    def __len__(self) -> int:
        """Keys held or waited for now."""
        return len(self._keys)
