"""SQL for the durable record of running agent processes (table `agent_processes`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.tables import agent_processes


@dataclass(frozen=True)
class ProcessRecord:
    """One recorded agent process group: its leader's pid and start time, on one boot."""

    session_id: str
    pid: int
    pgid: int
    start_ticks: int
    boot_id: str


def _record(row: object) -> ProcessRecord:
    return ProcessRecord(
        session_id=row.session_id,  # type: ignore[attr-defined]
        pid=row.pid,  # type: ignore[attr-defined]
        pgid=row.pgid,  # type: ignore[attr-defined]
        start_ticks=row.start_ticks,  # type: ignore[attr-defined]
        boot_id=row.boot_id,  # type: ignore[attr-defined]
    )


async def replace_record(conn: AsyncConnection, record: ProcessRecord, now: datetime) -> None:
    """The session's agent is this process now (one row per session)."""
    await conn.execute(
        delete(agent_processes).where(agent_processes.c.session_id == record.session_id)
    )
    await conn.execute(
        insert(agent_processes).values(
            session_id=record.session_id,
            pid=record.pid,
            pgid=record.pgid,
            start_ticks=record.start_ticks,
            boot_id=record.boot_id,
            started_at=now,
        )
    )


async def delete_record(conn: AsyncConnection, record: ProcessRecord) -> None:
    """Forget this exact process (a newer agent of the same session keeps its row)."""
    await conn.execute(
        delete(agent_processes).where(
            agent_processes.c.session_id == record.session_id,
            agent_processes.c.pid == record.pid,
            agent_processes.c.start_ticks == record.start_ticks,
        )
    )


async def delete_records(conn: AsyncConnection, records: list[ProcessRecord]) -> None:
    """Forget these exact processes: one statement run for all of them (executemany)."""
    if not records:
        return
    await conn.execute(
        delete(agent_processes).where(
            agent_processes.c.session_id == bindparam("record_session_id"),
            agent_processes.c.pid == bindparam("record_pid"),
            agent_processes.c.start_ticks == bindparam("record_start_ticks"),
        ),
        [
            {
                "record_session_id": r.session_id,
                "record_pid": r.pid,
                "record_start_ticks": r.start_ticks,
            }
            for r in records
        ],
    )


async def list_records(conn: AsyncConnection, session_id: str | None = None) -> list[ProcessRecord]:
    query = select(agent_processes).order_by(agent_processes.c.session_id)
    if session_id is not None:
        query = query.where(agent_processes.c.session_id == session_id)
    return [_record(row) for row in await conn.execute(query)]
