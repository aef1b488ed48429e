"""Hot statements run on the driver itself, compiled once per dialect.

SQLAlchemy's `conn.execute` costs ~100 to 300 µs of CPU per statement on this stack (compiled
cache lookup, execution context, bind/result processing set-up, a greenlet switch into the
sync layer, aiosqlite's cursor wrappers), where the SQL of the turn and answer paths runs in
10 to 50 µs: most of a turn's server CPU. A `DirectStatement` keeps the statement SQLAlchemy
built (same SQL text, same type processing, same transaction and connection) but does the
per-execution work once, at its first execution on a dialect: the SQL string, the order of
its positional parameters, each parameter's bind processor, each result column's key and
result processor. An execution then binds, calls the driver (sqlite3 inline, asyncpg) and
processes the rows in a loop.

What it keeps from SQLAlchemy's execution: the transaction it runs in (SQLAlchemy's BEGIN
on SQLite; the asyncpg adapter's transaction, started here if this is its first
statement); error translation (a driver error is raised as the same
`sqlalchemy.exc.DBAPIError` subclass `conn.execute` raises, so callers that catch
IntegrityError keep working); the engine's `before_cursor_execute` event (statement
counters and tracers see these statements). What it drops: `echo` logging of them.

Compiled once per shape: an insert per set of columns given, an expanding (`IN` list)
parameter per list length. Refused at first compilation (so a test that runs the statement
fails at once): Python-side column defaults and values rendered into the SQL
(`literal_execute`), which would make the SQL depend on the values, and result columns
sharing a name (a row is a dict).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert

Row = dict[str, Any]
_STATUS_COUNT = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    # Where each positional parameter's value comes from: (name, index in its list for an
    # expanded IN parameter, else None); its bind processor; the statement's own value.
    sources: tuple[tuple[str, int | None], ...]
    binds: tuple[Callable[[Any], Any] | None, ...]
    defaults: tuple[Any, ...]
    keys: tuple[str, ...]  # result column keys, as `.mappings()` names them
    processed: tuple[tuple[str, Callable[[Any], Any]], ...]  # (key, its result processor)
    returns_rows: bool


_NO_DEFAULT = object()
# Compiled shapes kept per statement (one per dialect, insert column set and IN-list length).
MAX_SHAPES = 64


S = TypeVar("S", bound=Executable)


class DirectStatement(Generic[S]):
    """A statement built once, executed on the connection's driver (see module docstring)."""

    __slots__ = ("_compiled", "_expanding", "_statement")

    def __init__(self, statement: S) -> None:
        self._statement = statement
        self._compiled: dict[tuple[Any, ...], _Compiled] = {}
        self._expanding: tuple[tuple[str, int | None], ...] | None = None

    @property
    def statement(self) -> S:
        """The SQLAlchemy statement it runs (for EXPLAIN, or `.params()` in a benchmark)."""
        return self._statement

    async def rows(
        self, conn: AsyncConnection, params: Mapping[str, Any] | None = None
    ) -> list[Row]:
        """Every result row, as a dict keyed like `result.mappings()`."""
        return (await self._execute(conn, params or {}))[0]

    async def first(
        self, conn: AsyncConnection, params: Mapping[str, Any] | None = None
    ) -> Row | None:
        rows = (await self._execute(conn, params or {}))[0]
        return rows[0] if rows else None

    async def scalar(self, conn: AsyncConnection, params: Mapping[str, Any] | None = None) -> Any:
        rows = (await self._execute(conn, params or {}))[0]
        return next(iter(rows[0].values())) if rows else None

    async def run(self, conn: AsyncConnection, params: Mapping[str, Any] | None = None) -> int:
        """Execute; the number of rows it matched (the driver's rowcount)."""
        return (await self._execute(conn, params or {}))[1]

    def _compiled_for(self, dialect: Dialect, params: Mapping[str, Any]) -> _Compiled:
        # An insert's SQL depends on which columns are given, an IN list's on its length;
        # anything else compiles once per dialect.
        columns = tuple(params) if isinstance(self._statement, Insert) else ()
        if self._expanding is None:
            self._expanding = _expanding_binds(self._statement, dialect)
        lengths = tuple(
            len(params[name]) if name in params else _required(name, length)
            for name, length in self._expanding
        )
        key = (dialect.name, columns, lengths)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = _compile(
                self._statement,
                dialect,
                columns,
                dict(zip((name for name, _ in self._expanding), lengths, strict=True)),
            )
            if len(self._compiled) >= MAX_SHAPES:  # IN lists of many lengths: forget the oldest
                del self._compiled[next(iter(self._compiled))]
            self._compiled[key] = compiled
        return compiled

    async def _execute(
        self, conn: AsyncConnection, params: Mapping[str, Any]
    ) -> tuple[list[Row], int]:
        sync = conn.sync_connection
        assert sync is not None, "the connection is not started"
        dialect = sync.dialect
        compiled = self._compiled_for(dialect, params)
        values = []
        for (name, index), bind, default in zip(
            compiled.sources, compiled.binds, compiled.defaults, strict=True
        ):
            if name in params:
                value = params[name] if index is None else params[name][index]
            elif default is _NO_DEFAULT:
                raise KeyError(f"a value is required for bind parameter {name!r}")
            else:
                value = default
            values.append(bind(value) if bind is not None else value)
        if sync._has_events or sync.engine._has_events:
            sync.dispatch.before_cursor_execute(sync, None, compiled.sql, values, None, False)
        fairy = sync.connection
        try:
            if dialect.name == "sqlite":
                raw, count = await _sqlite(fairy.driver_connection, compiled.sql, values)
            else:
                raw, count = await _asyncpg(fairy.dbapi_connection, compiled, values)
        except DBAPIError:
            raise
        except Exception as exc:
            base = dialect.loaded_dbapi.Error
            if not isinstance(exc, base):
                raise
            raise DBAPIError.instance(compiled.sql, values, exc, base) from exc
        keys, processed = compiled.keys, compiled.processed
        rows = [dict(zip(keys, record, strict=True)) for record in raw]
        if processed:  # only the columns that have a result processor, after a C-speed zip
            for row in rows:
                for key, process in processed:
                    row[key] = process(row[key])
        return rows, count


async def _sqlite(inline: Any, sql: str, values: list[Any]) -> tuple[list[Any], int]:
    """On the InlineConnection's sqlite3 connection, with its busy retry (no thread hop)."""
    cursor = await inline.execute_now(sql, values)
    try:
        return cursor.fetchall(), cursor.rowcount
    finally:
        cursor.close()


async def _asyncpg(adapter: Any, compiled: _Compiled, values: list[Any]) -> tuple[list[Any], int]:
    """On the asyncpg connection under SQLAlchemy's adapter, inside its transaction."""
    try:
        if adapter._transaction is None and adapter.isolation_level != "autocommit":
            await adapter._start_transaction()  # as the adapter's cursor does on first use
        connection = adapter._connection
        if compiled.returns_rows:
            records = await connection.fetch(compiled.sql, *values)
            return records, len(records)
        status = await connection.execute(compiled.sql, *values)
    except Exception as exc:
        adapter._handle_exception(exc)  # raises the adapter's DB-API error for it
        raise
    match = _STATUS_COUNT.match(status or "")
    return [], int(match.group(1)) if match else -1


def _required(name: str, length: int | None) -> int:
    if length is None:
        raise KeyError(f"a value is required for bind parameter {name!r}")
    return length


def _expanding_binds(statement: Any, dialect: Dialect) -> tuple[tuple[str, int | None], ...]:
    """The statement's expanding (IN list) parameters, with the length of the list each
    carries itself (None: the caller must give it)."""
    compiled = statement.compile(dialect=dialect)
    return tuple(
        (name, None if bind.required else len(bind.effective_value or ()))
        for name, bind in compiled.binds.items()
        if bind.expanding
    )


def _compile(
    statement: Any, dialect: Dialect, columns: tuple[str, ...], lengths: dict[str, int]
) -> _Compiled:
    compiled = statement.compile(dialect=dialect, column_keys=list(columns) or None)
    assert isinstance(compiled, SQLCompiler)
    what = str(compiled)[:80]
    if compiled.insert_prefetch or compiled.update_prefetch:
        raise TypeError(f"a direct statement must be given every column with a default: {what}")
    if compiled.literal_execute_params or any(
        not bind.expanding for bind in compiled.post_compile_params
    ):
        raise TypeError(f"a direct statement cannot render a value into its SQL: {what}")
    # The SQL and parameter order SQLAlchemy would execute for lists of these lengths.
    shape = {name: [None] * lengths[name] if name in lengths else None for name in compiled.binds}
    state = compiled.construct_expanded_state(shape)
    expanded_from = {
        item: (name, i)
        for name, items in state.parameter_expansion.items()
        for i, item in enumerate(items)
    }
    names = tuple(state.positiontup or ())
    if dialect.paramstyle == "numeric_dollar":  # $n may repeat: one value per distinct name
        names = tuple(dict.fromkeys(names))
    sources = tuple(expanded_from.get(name, (name, None)) for name in names)
    defaults = []
    for name, index in sources:
        bind = compiled.binds[name]
        if bind.required:
            defaults.append(_NO_DEFAULT)
        else:
            value: Any = bind.effective_value
            defaults.append(value if index is None else value[index])
    processors: dict[str, Any] = {
        **compiled._bind_processors,
        **state.processors,
    }  # + each expanded item's
    columns_out = compiled._result_columns
    keys = [column[0] for column in columns_out]
    if len(set(keys)) != len(keys):  # a row is a dict: two columns of one name would clash
        raise TypeError(f"a direct statement needs distinct result column names: {what}")
    return _Compiled(
        sql=state.statement,
        sources=sources,
        binds=tuple(processors.get(name) for name in names),
        defaults=tuple(defaults),
        keys=tuple(keys),
        processed=tuple(
            (column[0], process)
            for column in columns_out
            if (process := column[3]._cached_result_processor(dialect, None)) is not None
        ),
        returns_rows=bool(columns_out),
    )
