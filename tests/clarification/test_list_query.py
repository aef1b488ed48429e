"""The external pending-question list (seed spec L1-L16, D1-D7, M5/M5a) on SQLite and PostgreSQL.

Every test seeds rows directly (SQL inserts or repository.insert_bundle) and reads them back
through `list_pending_questions`, the operation the MCP tool forwards to.
"""

from __future__ import annotations

import base64
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, text, update

from kandev.auth.identity import SYNTHETIC_IDENTITY, Identity, acting_as
from kandev.catalog import messages as kinds
from kandev.clarification import bundles
from kandev.clarification.list_query import PENDING_INDEX, build_list_query
from kandev.clarification.listing import MAX_LIMIT, encode_cursor, list_pending_questions
from kandev.clock import ManualClock
from kandev.db.engine import Database
from kandev.db.tables import (
    task_session_messages,
    task_session_turns,
    task_sessions,
    tasks,
    workspaces,
)
from kandev.errors import ValidationFailed

PENDING_INDEXES = (PENDING_INDEX, "ix_task_session_messages_task_pending_clarification")

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PENDING_ID_INDEX = "ix_task_session_messages_pending_id"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def question(qid: str, n_options: int = 2) -> dict[str, Any]:
    return {
        "id": qid,
        "title": f"Title {qid}",
        "prompt": f"Prompt {qid}?",
        "options": [
            {"option_id": f"{qid}-o{i}", "label": f"L{i}", "description": f"D{i}"}
            for i in range(1, n_options + 1)
        ],
    }


class World:
    """Seeds workspaces, tasks, sessions, turns and clarification rows."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"m{next(self._ids):07d}"

    async def workspace(self, workspace_id: str, owner: str = "") -> None:
        async with self.db.write() as conn:
            await conn.execute(
                insert(workspaces).values(
                    id=workspace_id, name=workspace_id, owner_id=owner, created_at=T0, updated_at=T0
                )
            )

    async def task(self, task_id: str, workspace_id: str = "") -> None:
        async with self.db.write() as conn:
            await conn.execute(
                insert(tasks).values(
                    id=task_id,
                    workspace_id=workspace_id,
                    title=task_id,
                    created_at=T0,
                    updated_at=T0,
                )
            )

    async def session(
        self, session_id: str, task_id: str, *, state: str = "RUNNING", turn: str | None = None
    ) -> str:
        """A session with one turn (id `turn` or `<session>-turn1`); returns the turn id."""
        turn_id = turn or f"{session_id}-turn1"
        async with self.db.write() as conn:
            await conn.execute(
                insert(task_sessions).values(
                    id=session_id, task_id=task_id, state=state, started_at=T0, updated_at=T0
                )
            )
        await self.turn(turn_id, session_id, task_id, started=0)
        return turn_id

    async def turn(
        self,
        turn_id: str,
        session_id: str,
        task_id: str = "",
        *,
        started: float,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                insert(task_session_turns).values(
                    id=turn_id,
                    session_id=session_id,
                    task_id=task_id,
                    started_at=at(started),
                    created_at=at(started),
                    updated_at=at(started),
                    metadata=metadata or {},
                )
            )

    async def place(self, name: str, workspace_id: str = "") -> tuple[str, str, str]:
        """A task `t-<name>` in the workspace with a live session `s-<name>`."""
        task_id, session_id = f"t-{name}", f"s-{name}"
        await self.task(task_id, workspace_id)
        turn_id = await self.session(session_id, task_id)
        return task_id, session_id, turn_id

    async def bundle(
        self,
        pending_id: str,
        where: tuple[str, str, str],
        *,
        when: float = 1,
        n: int = 1,
        context: str = "ctx",
    ) -> None:
        task_id, session_id, turn_id = where
        async with self.db.write() as conn:
            await bundles.insert_bundle(
                conn,
                pending_id=pending_id,
                session_id=session_id,
                task_id=task_id,
                turn_id=turn_id,
                questions=[question(f"{pending_id}-q{i}") for i in range(1, n + 1)],
                context=context,
                now=at(when),
                new_id=self.new_id,
            )

    async def row(
        self,
        pending_id: str,
        where: tuple[str, str, str],
        metadata: dict[str, Any],
        *,
        when: float = 1,
        row_id: str | None = None,
        type: str = kinds.CLARIFICATION_TYPE,
        task_id: str | None = None,
        with_pending_id: bool = True,
    ) -> str:
        """One raw message row; metadata is taken as given (plus pending_id)."""
        default_task, session_id, turn_id = where
        row_id = row_id or self.new_id()
        meta = {"pending_id": pending_id, **metadata} if with_pending_id else dict(metadata)
        async with self.db.write() as conn:
            await conn.execute(
                insert(task_session_messages).values(
                    id=row_id,
                    session_id=session_id,
                    task_id=default_task if task_id is None else task_id,
                    turn_id=turn_id,
                    author_type="agent",
                    type=type,
                    content="",
                    metadata=meta,
                    created_at=at(when),
                    updated_at=at(when),
                )
            )
        return row_id

    async def set_status(self, pending_id: str, status: str | None) -> None:
        """Every row of the bundle gets `status` (None removes the key)."""
        async with self.db.write() as conn:
            for message in await bundles.find_bundle_messages(conn, pending_id):
                meta = {k: v for k, v in message.metadata.items() if k != "status"}
                if status is not None:
                    meta["status"] = status
                await conn.execute(
                    update(task_session_messages)
                    .where(task_session_messages.c.id == message.id)
                    .values(metadata=meta)
                )

    async def set_session_state(self, session_id: str, state: str) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                update(task_sessions).where(task_sessions.c.id == session_id).values(state=state)
            )


@pytest.fixture
def world(db: Database) -> World:
    return World(db)


async def listing(
    db: Database, clock: ManualClock, who: Identity | None = None, **args: Any
) -> dict[str, Any]:
    with acting_as(who):
        return await list_pending_questions(db, clock, **args)


async def ids(db: Database, clock: ManualClock, who: Identity | None = None, **args: Any) -> list:
    return [b["pending_id"] for b in (await listing(db, clock, who, **args))["bundles"]]


async def walk(
    db: Database, clock: ManualClock, who: Identity | None = None, **args: Any
) -> list[list[str]]:
    """Every page, following next_cursor until it is empty."""
    pages, cursor = [], ""
    for _ in range(100):
        result = await listing(db, clock, who, cursor=cursor, **args)
        assert result["count"] == len(result["bundles"])
        pages.append([b["pending_id"] for b in result["bundles"]])
        cursor = result["next_cursor"]
        if not cursor:
            return pages
    raise AssertionError("pagination did not end")


def no_nulls(value: Any) -> None:
    assert value is not None
    if isinstance(value, dict):
        for item in value.values():
            no_nulls(item)
    elif isinstance(value, list):
        for item in value:
            no_nulls(item)


U1 = Identity(user_id="u1")
U2 = Identity(user_id="u2")
U3 = Identity(user_id="u3")


# --- L1 / L2 / D3 / D4: which bundles are active ----------------------------------------------


async def test_pending_bundle_is_listed_with_every_field(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    await world.bundle("p1", where, when=5, n=2, context="why we ask")
    clock.advance(seconds=95.9)  # clock starts at T0: 90.9 s after the bundle

    result = await listing(db, clock)

    assert result == {
        "bundles": [
            {
                "pending_id": "p1",
                "task_id": "t-a",
                "session_id": "s-a",
                "created_at": "2026-01-01T00:00:05Z",
                "age_seconds": 90,
                "context": "why we ask",
                "questions": [
                    {
                        "question_id": "p1-q1",
                        "title": "Title p1-q1",
                        "prompt": "Prompt p1-q1?",
                        "status": "pending",
                        "options": [
                            {"option_id": "p1-q1-o1", "label": "L1", "description": "D1"},
                            {"option_id": "p1-q1-o2", "label": "L2", "description": "D2"},
                        ],
                    },
                    {
                        "question_id": "p1-q2",
                        "title": "Title p1-q2",
                        "prompt": "Prompt p1-q2?",
                        "status": "pending",
                        "options": [
                            {"option_id": "p1-q2-o1", "label": "L1", "description": "D1"},
                            {"option_id": "p1-q2-o2", "label": "L2", "description": "D2"},
                        ],
                    },
                ],
            }
        ],
        "count": 1,
        "next_cursor": "",
    }


async def test_empty_result_is_a_success(db: Database, clock: ManualClock) -> None:
    assert await listing(db, clock) == {"bundles": [], "count": 0, "next_cursor": ""}


async def test_absent_and_empty_status_count_as_pending_an_unrecognized_one_does_not(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    await world.bundle("absent", where, when=1)
    await world.set_status("absent", None)
    await world.bundle("empty", where, when=2)
    await world.set_status("empty", "")
    await world.bundle("weird", where, when=3)
    await world.set_status("weird", "weird")
    await world.bundle("responding", where, when=4)
    await world.set_status("responding", "responding")

    result = await listing(db, clock)

    assert [b["pending_id"] for b in result["bundles"]] == ["absent", "empty"]
    assert [b["questions"][0]["status"] for b in result["bundles"]] == ["pending", "pending"]


@pytest.mark.parametrize("terminal", ["answered", "rejected", "expired", "cancelled"])
async def test_all_terminal_bundle_is_excluded(
    db: Database, clock: ManualClock, world: World, terminal: str
) -> None:
    where = await world.place("a")
    await world.bundle("done", where, when=1, n=2)
    await world.set_status("done", terminal)
    await world.bundle("open", where, when=2)

    assert await ids(db, clock) == ["open"]


async def test_mixed_bundle_is_listed_with_per_question_status(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    await world.row(
        "mixed", where, {"question_id": "q1", "question_index": 0, "status": "answered"}
    )
    await world.row("mixed", where, {"question_id": "q2", "question_index": 1, "status": "pending"})
    await world.row("mixed", where, {"question_id": "q3", "question_index": 2, "status": "expired"})
    await world.row("mixed", where, {"question_id": "q4", "question_index": 3})

    [bundle] = (await listing(db, clock))["bundles"]

    assert [(q["question_id"], q["status"]) for q in bundle["questions"]] == [
        ("q1", "answered"),
        ("q2", "pending"),
        ("q3", "expired"),
        ("q4", "pending"),
    ]


async def test_list_follows_the_repository_activeness_rule_not_status_alone(
    db: Database, clock: ManualClock, world: World
) -> None:
    """L2a: a superseded bundle and a terminal-session bundle are pending-status but absent."""
    task_id, session_id, turn1 = await world.place("a")
    await world.bundle("superseded", (task_id, session_id, turn1), when=1)
    await world.turn("turn2", session_id, task_id, started=10)
    await world.bundle("current", (task_id, session_id, "turn2"), when=11)
    ended = await world.place("ended")
    await world.bundle("ended", ended, when=2)
    await world.set_session_state("s-ended", "COMPLETED")
    failed = await world.place("failed")
    await world.bundle("failed", failed, when=3)
    await world.set_session_state("s-failed", "FAILED")
    idle = await world.place("idle")
    await world.bundle("idle", idle, when=4)
    await world.set_session_state("s-idle", "IDLE")

    assert await ids(db, clock) == ["idle", "current"]


async def test_an_empty_unattempted_reservation_does_not_supersede_until_attempted(
    db: Database, clock: ManualClock, world: World
) -> None:
    """The current turn comes from sessions.turns: reservations count only once attempted."""
    task_id, session_id, turn1 = await world.place("a")
    await world.bundle("p1", (task_id, session_id, turn1), when=1)
    await world.turn(
        "reservation", session_id, task_id, started=5, metadata={"prompt_dispatch_pending": True}
    )
    assert await ids(db, clock) == ["p1"]

    async with db.write() as conn:
        await conn.execute(
            update(task_session_turns)
            .where(task_session_turns.c.id == "reservation")
            .values(metadata={"prompt_dispatch_pending": True, "prompt_dispatch_attempted": True})
        )
    assert await ids(db, clock) == []


async def test_parent_question_bundles_are_excluded(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    await world.row("parent", where, {"question_id": "q1", "parent_question": True}, when=1)
    await world.row("parent-str", where, {"question_id": "q1", "parent_question": "true"}, when=2)
    await world.row("half", where, {"question_id": "q1", "question_index": 0}, when=3)
    await world.row(
        "half", where, {"question_id": "q2", "question_index": 1, "parent_question": True}, when=4
    )
    await world.row("plain", where, {"question_id": "q1", "parent_question": False}, when=5)

    assert await ids(db, clock) == ["plain"]


async def test_a_bundle_the_claim_would_refuse_as_malformed_is_not_listed(
    db: Database, clock: ManualClock, world: World
) -> None:
    """Rows sharing a pending_id across sessions or types: the claim never accepts it."""
    a = await world.place("a")
    b = await world.place("b")
    await world.bundle("split", a, when=1)
    await world.row("split", b, {"question_id": "q9"}, when=2)
    await world.bundle("typed", a, when=3)
    await world.row("typed", a, {"question_id": "q9"}, when=4, type="message")
    await world.bundle("fine", b, when=5)
    await world.row("", a, {"question_id": "q1"}, when=6)  # no bundle at all
    await world.row("x", a, {"question_id": "q1"}, when=7, with_pending_id=False)

    assert await ids(db, clock) == ["fine"]


async def test_a_bundle_whose_rows_name_different_tasks_is_not_listed(
    db: Database, clock: ManualClock, world: World
) -> None:
    """Only hand-edited data: the rows resolve (M5) to two tasks, so there is no one task
    to authorize against; agreeing rows (empty or the session's task) are fine."""
    await world.task("t-other")
    a = await world.place("a")
    await world.row("mixed", a, {"question_id": "q1", "question_index": 0}, when=1)
    await world.row(
        "mixed", a, {"question_id": "q2", "question_index": 1}, task_id="t-other", when=2
    )
    await world.row("agree", a, {"question_id": "q1", "question_index": 0}, task_id="", when=3)
    await world.row("agree", a, {"question_id": "q2", "question_index": 1}, when=4)

    assert await ids(db, clock) == ["agree"]
    assert (await listing(db, clock))["bundles"][0]["task_id"] == "t-a"


# --- M5 / M5a: the task a bundle belongs to ----------------------------------------------------


async def test_empty_message_task_id_resolves_through_the_session(
    db: Database, clock: ManualClock, world: World
) -> None:
    await world.workspace("wa", owner="u1")
    await world.workspace("wb", owner="u2")
    where = await world.place("a", "wa")
    await world.row("legacy", where, {"question_id": "q1"}, task_id="")

    [bundle] = (await listing(db, clock))["bundles"]
    assert bundle["task_id"] == "t-a"
    # ...and visibility is decided on that task, for scoped callers too.
    assert await ids(db, clock, U1) == ["legacy"]
    assert await ids(db, clock, U2) == []
    assert await ids(db, clock, U1, workspace_id="wa") == ["legacy"]


async def test_unresolvable_bundle_is_omitted_for_every_caller(
    db: Database, clock: ManualClock, world: World
) -> None:
    """M5a: the message names a task that does not exist (deleted); nothing to resolve to."""
    where = await world.place("a")
    await world.row("ghost", where, {"question_id": "q1"}, task_id="t-deleted", when=1)
    await world.row("fine", where, {"question_id": "q1"}, when=2)

    assert await ids(db, clock) == ["fine"]
    assert await ids(db, clock, SYNTHETIC_IDENTITY) == ["fine"]
    assert await ids(db, clock, U1) == ["fine"]


# --- L1a-L1d: visibility ------------------------------------------------------------------------


async def _visibility_world(world: World) -> None:
    await world.workspace("w-u1", owner="u1")
    await world.workspace("w-open", owner="")
    await world.workspace("w-u2", owner="u2")
    await world.bundle("p-empty", await world.place("empty", ""), when=1)
    await world.bundle("p-dangling", await world.place("dangling", "w-gone"), when=2)
    await world.bundle("p-u1", await world.place("u1", "w-u1"), when=3)
    await world.bundle("p-open", await world.place("open", "w-open"), when=4)
    await world.bundle("p-u2", await world.place("u2", "w-u2"), when=5)


async def test_visibility_is_the_three_way_disjunction(
    db: Database, clock: ManualClock, world: World
) -> None:
    await _visibility_world(world)
    everything = ["p-empty", "p-dangling", "p-u1", "p-open", "p-u2"]

    assert await ids(db, clock) == everything  # internal caller: unscoped
    assert await ids(db, clock, SYNTHETIC_IDENTITY) == everything  # auth off: unscoped
    assert await ids(db, clock, U1) == ["p-empty", "p-dangling", "p-u1", "p-open"]
    assert await ids(db, clock, U2) == ["p-empty", "p-dangling", "p-open", "p-u2"]
    assert await ids(db, clock, U3) == ["p-empty", "p-dangling", "p-open"]


async def test_scoped_caller_with_no_visible_workspace_still_sees_empty_and_dangling(
    db: Database, clock: ManualClock, world: World
) -> None:
    """L1b: no IN () and no whole-query short-circuit."""
    await world.workspace("w-u1", owner="u1")
    await world.workspace("w-u2", owner="u2")
    await world.bundle("p-empty", await world.place("empty", ""), when=1)
    await world.bundle("p-dangling", await world.place("dangling", "w-gone"), when=2)
    await world.bundle("p-u1", await world.place("u1", "w-u1"), when=3)
    await world.bundle("p-u2", await world.place("u2", "w-u2"), when=4)

    assert await ids(db, clock, U3) == ["p-empty", "p-dangling"]


async def test_empty_task_workspace_is_visible_even_if_a_workspace_row_has_id_empty(
    db: Database, clock: ManualClock, world: World
) -> None:
    """L1c disjunct 1 is its own test on the task, as in authorize_task (D5)."""
    await world.workspace("", owner="u2")
    await world.bundle("p-empty", await world.place("empty", ""), when=1)

    assert await ids(db, clock, U1) == ["p-empty"]


async def test_workspace_filter_narrows_and_hides_inaccessible_workspaces(
    db: Database, clock: ManualClock, world: World
) -> None:
    await _visibility_world(world)

    assert await ids(db, clock, U1, workspace_id="w-u1") == ["p-u1"]
    assert await ids(db, clock, U1, workspace_id="w-open") == ["p-open"]
    # L7: an existing workspace the caller cannot see looks exactly like an empty one.
    assert await listing(db, clock, U1, workspace_id="w-u2") == {
        "bundles": [],
        "count": 0,
        "next_cursor": "",
    }
    assert await ids(db, clock, U1, workspace_id="w-nobody-made") == []
    # L7a.3: a dangling id returns the bundles the dangling fallback already shows.
    assert await ids(db, clock, U1, workspace_id="w-gone") == ["p-dangling"]
    # L7a.4: '' means not supplied, not "the empty workspace".
    assert await ids(db, clock, U1, workspace_id="") == [
        "p-empty",
        "p-dangling",
        "p-u1",
        "p-open",
    ]
    assert await ids(db, clock, None, workspace_id="w-u2") == ["p-u2"]


async def test_scoped_page_is_full_across_workspaces_while_invisible_ones_interleave(
    db: Database, clock: ManualClock, world: World
) -> None:
    """L1a: visibility is a predicate of the query, so `limit` counts returned bundles."""
    await world.workspace("w-a", owner="u1")
    await world.workspace("w-b", owner="u1")
    for k in range(6):
        await world.workspace(f"w-x{k}", owner=f"other{k}")
    a = await world.place("a", "w-a")
    b = await world.place("b", "w-b")
    hidden = [await world.place(f"x{k}", f"w-x{k}") for k in range(6)]
    visible = []
    for i in range(8):
        for k, where in enumerate(hidden):  # six invisible bundles before each visible one
            await world.bundle(f"h{i:02d}{k}", where, when=i * 10 + k)
        pending_id = f"v{i:02d}"
        await world.bundle(pending_id, a if i % 2 else b, when=i * 10 + 7)
        visible.append(pending_id)

    first = await listing(db, clock, U1, limit=5)

    assert [b["pending_id"] for b in first["bundles"]] == visible[:5]
    assert first["count"] == 5
    assert first["next_cursor"] != ""
    second = await listing(db, clock, U1, limit=5, cursor=first["next_cursor"])
    assert [b["pending_id"] for b in second["bundles"]] == visible[5:]
    assert second["next_cursor"] == ""


# --- L6 / L8 / L9 / L14 / D1 / D6: order, filters, cursor ---------------------------------------


async def test_order_and_cursor_pagination_have_no_skips_or_duplicates(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    # Equal created_at for three bundles: pending_id breaks the tie (L6).
    plan = [("p07", 1), ("p02", 5), ("p05", 5), ("p03", 5), ("p01", 9), ("p06", 2), ("p04", 30)]
    for pending_id, when in plan:
        await world.bundle(pending_id, where, when=when)
    expected = ["p07", "p06", "p02", "p03", "p05", "p01", "p04"]

    assert await ids(db, clock) == expected
    for size in (1, 2, 3, 6, 7):
        pages = await walk(db, clock, limit=size)
        assert [i for page in pages for i in page] == expected, size
        assert all(len(page) == size for page in pages[:-1])
    assert await walk(db, clock, limit=7) == [expected]


async def test_pagination_is_not_a_snapshot(db: Database, clock: ManualClock, world: World) -> None:
    """D6: a bundle resolved between pages just disappears; nothing shifts; an earlier
    created_at than the cursor is not returned to its holder but is to a fresh call."""
    where = await world.place("a")
    for i in range(1, 7):
        await world.bundle(f"p{i}", where, when=i * 10)
    first = await listing(db, clock, limit=2)
    assert [b["pending_id"] for b in first["bundles"]] == ["p1", "p2"]

    await world.set_status("p3", "answered")
    await world.bundle("p0", where, when=5)  # before the cursor (clock adjustment)
    second = await listing(db, clock, limit=2, cursor=first["next_cursor"])

    assert [b["pending_id"] for b in second["bundles"]] == ["p4", "p5"]
    assert await ids(db, clock) == ["p0", "p1", "p2", "p4", "p5", "p6"]


async def test_created_since_filters_on_the_bundle_creation_time(
    db: Database, clock: ManualClock, world: World
) -> None:
    """L8 with D1: a bundle's created_at is the minimum over its rows, whatever their order."""
    where = await world.place("a")
    await world.bundle("early", where, when=1)
    # question 0 written after question 1: the bundle's created_at is still 10 s.
    await world.row("split", where, {"question_id": "q0", "question_index": 0}, when=20)
    await world.row("split", where, {"question_id": "q1", "question_index": 1}, when=10)
    await world.bundle("late", where, when=30)

    assert await ids(db, clock, created_since="2026-01-01T00:00:10Z") == ["split", "late"]
    assert await ids(db, clock, created_since="2026-01-01T00:00:10.000001Z") == ["late"]
    assert await ids(db, clock, created_since="2026-01-01T01:00:09+01:00") == [
        "split",
        "late",
    ]
    [split] = (await listing(db, clock, created_since="2026-01-01T00:00:10Z"))["bundles"][:1]
    assert split["created_at"] == "2026-01-01T00:00:10Z"
    assert [q["question_id"] for q in split["questions"]] == ["q0", "q1"]
    assert await ids(db, clock, created_since="") == ["early", "split", "late"]


async def test_cursor_and_created_since_intersect(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    for i in range(1, 7):
        await world.bundle(f"p{i}", where, when=i * 10)
    since = "2026-01-01T00:00:30Z"
    first = await listing(db, clock, limit=2, created_since=since)
    assert [b["pending_id"] for b in first["bundles"]] == ["p3", "p4"]

    second = await listing(db, clock, limit=2, created_since=since, cursor=first["next_cursor"])
    assert [b["pending_id"] for b in second["bundles"]] == ["p5", "p6"]
    # A cursor from before the filter's start: the filter still applies.
    early = encode_cursor("2026-01-01T00:00:10Z", "p1")
    assert await ids(db, clock, cursor=early, created_since=since) == ["p3", "p4", "p5", "p6"]
    # A filter before the cursor: the cursor still applies.
    late = encode_cursor("2026-01-01T00:00:50Z", "p5")
    assert await ids(db, clock, cursor=late, created_since="2026-01-01T00:00:00Z") == ["p6"]


async def test_cursor_encodes_the_full_precision_position(
    db: Database, clock: ManualClock, world: World
) -> None:
    """Two bundles within the same second: the cursor is exact (no skip, no repeat)."""
    where = await world.place("a")
    await world.bundle("pb", where, when=1.000001)
    await world.bundle("pa", where, when=1.000002)
    await world.bundle("pc", where, when=1.000002)

    assert await walk(db, clock, limit=1) == [["pb"], ["pa"], ["pc"]]
    first = await listing(db, clock, limit=1)
    assert first["bundles"][0]["created_at"] == "2026-01-01T00:00:01.000001Z"


# --- L10 / L13: arguments ------------------------------------------------------------------------


async def test_limit_defaults_and_clamps(db: Database, clock: ManualClock, world: World) -> None:
    task_id, session_id, turn_id = await world.place("a")
    rows = [
        {
            "id": f"r{i:04d}",
            "session_id": session_id,
            "task_id": task_id,
            "turn_id": turn_id,
            "author_type": "agent",
            "type": kinds.CLARIFICATION_TYPE,
            "content": "",
            "metadata": {"pending_id": f"p{i:04d}", "question_id": "q", "status": "pending"},
            "created_at": at(i),
            "updated_at": at(i),
        }
        for i in range(MAX_LIMIT + 1)
    ]
    async with db.write() as conn:
        await conn.execute(insert(task_session_messages), rows)

    for limit in (None, 0, -3):
        result = await listing(db, clock, limit=limit)
        assert result["count"] == 50 and result["next_cursor"], limit
    result = await listing(db, clock, limit=1000)
    assert result["count"] == MAX_LIMIT and result["next_cursor"]
    assert (await listing(db, clock, limit=1))["count"] == 1
    result = await listing(db, clock, limit=MAX_LIMIT, cursor=result["next_cursor"])
    assert [b["pending_id"] for b in result["bundles"]] == [f"p{MAX_LIMIT:04d}"]
    assert result["next_cursor"] == ""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "created_since",
    [
        "yesterday",
        "2026-01-01",
        "2026-01-01T00:00:00",  # no zone
        "2026-13-01T00:00:00Z",
        "2026-01-01T25:00:00Z",
        "1767225600",
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
    ],
)
async def test_unparseable_created_since_is_a_validation_error(
    db: Database, clock: ManualClock, created_since: str
) -> None:
    with pytest.raises(ValidationFailed) as raised:
        await listing(db, clock, created_since=created_since)
    assert raised.value.field == "created_since"
    assert "created_since" in raised.value.message


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        _b64(b"not json"),
        _b64(b"\xff\xfe"),
        _b64(json.dumps(["2026-01-01T00:00:00Z"]).encode()),
        _b64(json.dumps({"c": "2026-01-01T00:00:00Z", "p": "p1"}).encode()),
        _b64(json.dumps(["yesterday", "p1"]).encode()),
        _b64(json.dumps(["2026-01-01T00:00:00Z", ""]).encode()),
        _b64(json.dumps(["2026-01-01T00:00:00Z", 7]).encode()),
        "A",
    ],
)
async def test_corrupt_cursor_is_a_validation_error(
    db: Database, clock: ManualClock, cursor: str
) -> None:
    with pytest.raises(ValidationFailed) as raised:
        await listing(db, clock, cursor=cursor)
    assert raised.value.field == "cursor"
    assert "cursor" in raised.value.message


async def test_non_integer_limit_is_a_validation_error(db: Database, clock: ManualClock) -> None:
    with pytest.raises(ValidationFailed) as raised:
        await listing(db, clock, limit="many")
    assert raised.value.field == "limit"


# --- L16 / L15 / L4a / D2 / D7: shapes -----------------------------------------------------------


async def test_bundle_with_any_missing_question_id_is_excluded(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    await world.row("absent", where, {"question_index": 0}, when=1)
    await world.row("empty", where, {"question_id": "q0", "question_index": 0}, when=2)
    await world.row("empty", where, {"question_id": "", "question_index": 1}, when=3)
    # A terminal row without an id still makes the bundle unclaimable as a whole.
    await world.row("terminal-row", where, {"question_id": "q0"}, when=4)
    await world.row("terminal-row", where, {"status": "answered"}, when=5)
    # Only the nested id: the claim reads the flat key alone, so this is excluded too.
    await world.row("nested-only", where, {"question": question("q0")}, when=6)
    await world.row("fine", where, {"question_id": "q0"}, when=7)

    assert await ids(db, clock) == ["fine"]


async def test_degraded_questions_keep_their_shape_and_never_carry_null(
    db: Database, clock: ManualClock, world: World
) -> None:
    """L15 / L4a: no parseable `question` → empty title, prompt and options; junk is skipped."""
    where = await world.place("a")
    await world.row("deg", where, {"question_id": "q1", "question_index": 0}, when=1)
    await world.row(
        "deg", where, {"question_id": "q2", "question_index": 1, "question": "text"}, when=2
    )
    await world.row(
        "deg",
        where,
        {
            "question_id": "q3",
            "question_index": 2,
            "question": {
                "title": None,
                "prompt": 7,
                "options": [
                    "junk",
                    {"option_id": "o1", "label": None},
                    {"option_id": 5, "label": "L", "description": "D"},
                    None,
                ],
            },
        },
        when=3,
    )
    await world.row(
        "deg",
        where,
        {"question_id": "q4", "question_index": 3, "question": {"options": {"not": "a list"}}},
        when=4,
    )

    [bundle] = (await listing(db, clock))["bundles"]

    no_nulls(bundle)
    assert bundle["context"] == ""
    assert bundle["questions"] == [
        {"question_id": "q1", "title": "", "prompt": "", "status": "pending", "options": []},
        {"question_id": "q2", "title": "", "prompt": "", "status": "pending", "options": []},
        {
            "question_id": "q3",
            "title": "",
            "prompt": "",
            "status": "pending",
            "options": [
                {"option_id": "o1", "label": "", "description": ""},
                {"option_id": "", "label": "L", "description": "D"},
            ],
        },
        {"question_id": "q4", "title": "", "prompt": "", "status": "pending", "options": []},
    ]


async def test_questions_follow_the_total_d2_order(
    db: Database, clock: ManualClock, world: World
) -> None:
    """question_index, then created_at, then id; a missing or non-numeric index is 0."""
    where = await world.place("a")
    meta = {"context": "from the first question"}
    await world.row("p", where, {**meta, "question_id": "i2", "question_index": 2.0}, when=1)
    await world.row("p", where, {"question_id": "i1", "question_index": 1}, when=2)
    await world.row("p", where, {"question_id": "none-late"}, when=9, row_id="m-a")
    await world.row("p", where, {"question_id": "str-z", "question_index": "1"}, row_id="m-z")
    await world.row("p", where, {"question_id": "bool-y", "question_index": True}, row_id="m-y")
    await world.row("p", where, {"question_id": "frac", "question_index": 1.9}, when=3)
    await world.row(
        "p", where, {"question_id": "first", "question_index": 0, "context": "ctx0"}, when=5
    )

    [bundle] = (await listing(db, clock))["bundles"]

    assert [q["question_id"] for q in bundle["questions"]] == [
        "bool-y",  # index 0 (a boolean is not a number), created 1 s, id m-y
        "str-z",  # index 0 (a string is not a number), created 1 s, id m-z
        "first",  # index 0, created 5 s
        "none-late",  # index 0, created 9 s
        "i1",  # index 1, created 2 s
        "frac",  # index 1.9 → 1, created 3 s
        "i2",
    ]
    assert bundle["context"] == ""  # the first question in D2 order has no context


async def test_age_is_floored_at_zero_and_truncated(
    db: Database, clock: ManualClock, world: World
) -> None:
    where = await world.place("a")
    await world.bundle("past", where, when=0)
    await world.bundle("future", where, when=3600)
    clock.advance(seconds=59.999)

    ages = {b["pending_id"]: b["age_seconds"] for b in (await listing(db, clock))["bundles"]}

    assert ages == {"past": 59, "future": 0}
    assert all(type(age) is int for age in ages.values())


# --- plan: index use, no full scan of task_session_messages --------------------------------------


async def test_plan_uses_indexes_and_never_scans_all_messages(
    db: Database, clock: ManualClock, world: World
) -> None:
    """Seeded with a few thousand rows and ANALYZEd: the planners choose the indexes honestly
    (no enable_seqscan tricks). The pending rows come from the partial index, bundle rows
    from the pending_id index."""
    await world.workspace("w-u1", owner="u1")
    await world.workspace("w-u2", owner="u2")
    task_rows, session_rows, turn_rows, message_rows = [], [], [], []
    for s in range(40):
        task_id, session_id, turn_id = f"t{s:03d}", f"s{s:03d}", f"turn{s:03d}"
        workspace = ("w-u1", "w-u2", "", "w-gone")[s % 4]
        stamps = {"created_at": T0, "updated_at": T0}
        task_rows.append({"id": task_id, "workspace_id": workspace, "title": "t", **stamps})
        session_rows.append(
            {"id": session_id, "task_id": task_id, "state": "RUNNING", "started_at": T0}
            | {"updated_at": T0}
        )
        turn_rows.append(
            {"id": turn_id, "session_id": session_id, "task_id": task_id, "started_at": T0} | stamps
        )
        for b in range(40):
            status = "pending" if b == 0 else "answered"
            for q in range(2):
                message_rows.append(
                    {
                        "id": f"m{s:03d}-{b:03d}-{q}",
                        "session_id": session_id,
                        "task_id": task_id,
                        "turn_id": turn_id,
                        "author_type": "agent",
                        "type": kinds.CLARIFICATION_TYPE,
                        "content": "",
                        "metadata": {
                            "pending_id": f"p{s:03d}-{b:03d}",
                            "question_id": f"q{q}",
                            "question_index": q,
                            "status": status,
                        },
                        "created_at": at(b * 100 + s + q / 1000),
                        "updated_at": at(b * 100 + s),
                    }
                )
            message_rows.append(
                {
                    "id": f"m{s:03d}-{b:03d}-chat",
                    "session_id": session_id,
                    "task_id": task_id,
                    "turn_id": turn_id,
                    "author_type": "agent",
                    "type": "message",
                    "content": "hello",
                    "metadata": {},
                    "created_at": at(b * 100 + s),
                    "updated_at": at(b * 100 + s),
                }
            )
    async with db.write() as conn:
        await conn.execute(insert(tasks), task_rows)
        await conn.execute(insert(task_sessions), session_rows)
        await conn.execute(insert(task_session_turns), turn_rows)
        await conn.execute(insert(task_session_messages), message_rows)
    assert len(message_rows) == 4800
    async with db.write() as conn:
        await conn.exec_driver_sql("ANALYZE")

    with acting_as(U1):
        result = await list_pending_questions(db, clock, limit=50)
    assert result["count"] == 30  # 40 sessions, one pending bundle each, 10 in w-u2

    query = build_list_query(
        user_id="u1", workspace_id=None, created_since=None, after=None, limit=50
    )
    async with db.read() as conn:
        sql = str(query.compile(conn.sync_connection, compile_kwargs={"literal_binds": True}))
        if db.is_sqlite:
            found = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")
            plan = [str(row[-1]) for row in found]
        else:
            plan = [str(row[0]) for row in await conn.exec_driver_sql(f"EXPLAIN {sql}")]
    detail = "\n".join(plan)

    # Either partial pending-question index holds exactly the pending rows (the one by
    # session, migration 0003, or the one by task, migration 0011).
    assert any(index in detail for index in PENDING_INDEXES), detail
    assert PENDING_ID_INDEX in detail, detail
    if db.is_sqlite:
        aliases = (
            "pending_row",
            "bundle_row",
            "bundle_sibling",
            "page_row",
            "task_session_messages",
        )
        for line in plan:
            words = line.split()
            if len(words) >= 2 and words[0] in ("SCAN", "SEARCH") and words[1] in aliases:
                assert "INDEX" in line, detail  # never a bare table scan of messages
        scans = [line for line in plan if line.split()[:2] == ["SCAN", "pending_row"]]
        assert all(any(index in line for index in PENDING_INDEXES) for line in scans), detail
    else:
        assert "Seq Scan on task_session_messages" not in detail, detail


async def test_the_partial_index_holds_only_pending_clarification_rows(db: Database) -> None:
    """The migration's predicate is the repository's pending rule (absent, '', null, pending)."""
    async with db.read() as conn:
        if db.is_sqlite:
            sql = (
                await conn.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = :n"), {"n": PENDING_INDEX}
                )
            ).scalar_one()
        else:
            sql = (
                await conn.execute(
                    text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"),
                    {"n": PENDING_INDEX},
                )
            ).scalar_one()
    assert "clarification_request" in sql and "pending" in sql and "status" in sql
