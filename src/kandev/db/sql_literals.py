"""The code's own constants written into the SQL text instead of sent as bind parameters.

Two reasons, both about `task_session_messages`, which has partial indexes:
- a planner can use a partial index only when it can prove the index's WHERE from the
  query's, and neither SQLite nor a generic PostgreSQL plan sees through a `?` / `$1`;
- SQLite re-plans a statement on *every* execution once a bound value took part in that
  proof (it marks the statement to re-prepare when the binding changes, and every execute
  binds again): a statement that compares `type = ?` or a JSON path `?` against that table
  was compiled anew each time, costing several times what running it costs.

Only for constants of the code — message types, statuses, JSON paths, flags — never caller
input, which always stays a bind parameter.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, literal_column


def constant(value: str | int) -> ColumnElement[Any]:
    """A string or integer constant as SQL literal text ('it''s' quoting, both dialects)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"constant() takes str or int, not {type(value).__name__}")
    if isinstance(value, int):
        return literal_column(str(value))
    return literal_column("'" + value.replace("'", "''") + "'")
