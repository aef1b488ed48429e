"""`StderrTail`: the last lines of an agent's stderr (or stray stdout), for failure messages."""

from __future__ import annotations

from collections import deque

STDERR_TAIL_LINES = 20  # lines quoted in failure messages
STDERR_KEEP_LINES = 200  # lines kept in the ring buffer
STDERR_MAX_LINE = 2000  # characters kept per stderr line


class StderrTail:
    """A bounded ring buffer of the last lines of a text stream (stderr, stray stdout)."""

    def __init__(self, keep: int = STDERR_KEEP_LINES) -> None:
        self._lines: deque[str] = deque(maxlen=keep)
        self._partial = ""

    def feed(self, data: bytes) -> None:
        text = self._partial + data.decode("utf-8", errors="replace")
        *complete, self._partial = text.split("\n")
        for line in complete:
            self._append(line)
        if len(self._partial) > STDERR_MAX_LINE:
            self._append(self._partial)
            self._partial = ""

    def finish(self) -> None:
        if self._partial:
            self._append(self._partial)
            self._partial = ""

    def _append(self, line: str) -> None:
        line = line.rstrip("\r")
        if line.strip():
            self._lines.append(line[:STDERR_MAX_LINE])

    def tail(self, count: int = STDERR_TAIL_LINES) -> str:
        lines = list(self._lines)[-count:]
        if self._partial.strip():
            lines.append(self._partial[:STDERR_MAX_LINE])
        return "\n".join(lines)
