"""Password hashing: argon2id with the original's parameters (PHC strings stay compatible).

Hashing costs ~64 MiB and tens of milliseconds, so the async wrappers run it in a worker
thread instead of stalling the event loop.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher(time_cost=1, memory_cost=65536, parallelism=4, hash_len=32, salt_len=16)


def hash_password(password: str) -> str:
    """A PHC string: $argon2id$v=19$m=65536,t=1,p=4$<salt>$<key>."""
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True when the password matches; a malformed stored hash counts as a mismatch."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return _hasher.hash("kandev-timing-equalization")


def dummy_verify(password: str) -> None:
    """Spend the same work as a real check, so unknown emails can't be told apart by timing."""
    verify_password(_dummy_hash(), password)


async def hash_password_async(password: str) -> str:
    return await asyncio.to_thread(hash_password, password)


async def verify_password_async(password_hash: str, password: str) -> bool:
    return await asyncio.to_thread(verify_password, password_hash, password)


async def dummy_verify_async(password: str) -> None:
    await asyncio.to_thread(dummy_verify, password)
