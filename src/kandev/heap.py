"""The server's garbage-collector settings, applied once it has started."""

from __future__ import annotations

import gc

# Allocations between two collections of the youngest generation (CPython's default: 700).
YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """What is alive once the server has started (modules, the app, its caches) lives as
    long as the process: collect once, then freeze it out of the collector's generations,
    so a later full collection walks only what requests created, not the whole heap (such
    a walk took ~120 ms here). The youngest generation is collected every 10,000
    allocations instead of 700: a request's objects (a page of questions is thousands) are
    mostly freed by then instead of surviving into older generations to be walked again —
    ~0.5 ms less per listing page over MCP."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
