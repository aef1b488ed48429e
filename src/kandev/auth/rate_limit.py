"""Login throttling: an in-memory fixed window per `client|email` key.

In memory on purpose (as the original): a restart forgets counts, which is acceptable for
a brute-force brake on a self-hosted server. Time comes from the injected clock so tests
move windows without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kandev.clock import Clock
from kandev.errors import RateLimited


@dataclass
class _Window:
    started_at: datetime
    attempts: int


class LoginRateLimiter:
    def __init__(self, clock: Clock, limit: int, window_seconds: int) -> None:
        self._clock = clock
        self._limit = max(1, limit)
        self._window = timedelta(seconds=max(1, window_seconds))
        self._windows: dict[str, _Window] = {}
        # Stale windows are dropped once per window length, so sprayed keys can't pile up.
        self._next_sweep = clock.now() + self._window

    @staticmethod
    def key(client: str, email: str) -> str:
        return f"{client}|{email}"

    def hit(self, key: str) -> None:
        """Count one attempt; raise RateLimited when the window's budget is already spent."""
        now = self._clock.now()
        if now >= self._next_sweep:
            self._sweep(now)
        window = self._windows.get(key)
        if window is None or now - window.started_at >= self._window:
            self._windows[key] = _Window(started_at=now, attempts=1)
            return
        if window.attempts >= self._limit:
            raise RateLimited("too many login attempts; try again later")
        window.attempts += 1

    def reset(self, key: str) -> None:
        self._windows.pop(key, None)

    def _sweep(self, now: datetime) -> None:
        self._next_sweep = now + self._window
        stale = [k for k, w in self._windows.items() if now - w.started_at >= self._window]
        for k in stale:
            del self._windows[k]
