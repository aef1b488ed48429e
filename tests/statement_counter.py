"""Counting what a piece of code sends to the database: statements and transactions.

Hooks SQLAlchemy's engine events, so it counts on SQLite and PostgreSQL alike, whatever the
driver. Transaction control (BEGIN, COMMIT, ROLLBACK) is counted as transactions, never as
statements; everything else the driver executes — savepoints and lock statements included —
is a statement.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from kandev.db.engine import Database

_CONTROL = re.compile(r"\s*(BEGIN|COMMIT|ROLLBACK)\b", re.IGNORECASE)

# A bound value where a planner compares the query with a partial index's WHERE
# (task_session_messages has them): `type = ?`, a JSON path `?`, a COALESCE default `?`, a
# status `IN (?, …)`. SQLite re-plans such a statement on every execution, so the
# code's constants must be SQL literals there (kandev.db.sql_literals). Caller values compared
# with plain columns (`id = ?`, `id IN (?)`) are fine.
_BOUND_CONSTANT = re.compile(
    r"\btype\s*(=|!=|<>)\s*(\?|\$\d)"
    r"|json_extract\([^()]*,\s*(\?|\$\d)\s*\)"
    r"|->>?\s*(\?|\$\d)"
    r"|coalesce\((?:[^()]|\([^()]*\))*,\s*(\?|\$\d)\s*\)"
    r"|'\$?\.?status'\)*\s*,\s*'[^']*'\)\s+(NOT\s+)?IN\s*\(\s*(\?|\$\d)",
    re.IGNORECASE,
)


def bound_constants(statements: list[str], table: str = "task_session_messages") -> list[str]:
    """The statements on `table` that send one of the code's constants as a bind parameter
    where a partial index's WHERE is proved (see _BOUND_CONSTANT)."""
    return [s for s in statements if table in s and _BOUND_CONSTANT.search(s)]


class StatementCounter:
    def __init__(self, db: Database) -> None:
        self.statements: list[str] = []
        self.full_statements: list[str] = []  # untruncated, for checks of the SQL itself
        self.transactions = 0
        self._on = False
        self._engine = db.engine.sync_engine
        event.listen(self._engine, "before_cursor_execute", self._statement)
        event.listen(self._engine, "begin", self._begin)

    def close(self) -> None:
        event.remove(self._engine, "before_cursor_execute", self._statement)
        event.remove(self._engine, "begin", self._begin)

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self._on and not _CONTROL.match(statement):
            self.full_statements.append(" ".join(statement.split()))
            self.statements.append(self.full_statements[-1][:160])

    def _begin(self, _conn: Any) -> None:
        if self._on:
            self.transactions += 1

    def start(self) -> None:
        self.statements.clear()
        self.full_statements.clear()
        self.transactions = 0
        self._on = True

    def stop(self) -> None:
        self._on = False

    @contextmanager
    def counting(self) -> Iterator[StatementCounter]:
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def report(self) -> str:
        lines = [f"{len(self.statements)} statements, {self.transactions} transactions:"]
        return "\n  ".join(lines + self.statements)


@contextmanager
def selects_from(db: Database, table: str) -> Iterator[list[str]]:
    """The SELECT statements naming `table` (a word of the SQL), as they run (any thread)."""
    seen: list[str] = []
    word = re.compile(rf"\b{re.escape(table)}\b")

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and word.search(statement):
            seen.append(statement)

    engine = db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)
