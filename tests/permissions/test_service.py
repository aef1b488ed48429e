"""PermissionService on both databases: the one claim under concurrency, validation before
the claim, visibility through the task, policies without an agent process."""

from __future__ import annotations

import asyncio

import pytest

from kandev.auth.identity import Identity, acting_as
from kandev.clock import ManualClock
from kandev.errors import Conflict, NotFound, ValidationFailed
from kandev.services import Services
from tests.permissions.waiting import OPTIONS, TOOL_CALL, waiting_session
from tests.prompted import prompted_session


async def test_many_concurrent_deciders_one_winner(services: Services) -> None:
    sid, pending_id, blocked = await waiting_session(services)
    choices = ["yes", "no"] * 4
    results = await asyncio.gather(
        *(services.permissions.respond(pending_id, c, via="rest") for c in choices)
    )
    winners = [r for r in results if r["claimed"]]
    assert len(winners) == 1
    [winner] = winners
    assert all(
        (r["status"], r["option_id"]) == (winner["status"], winner["option_id"]) for r in results
    )
    assert await asyncio.wait_for(blocked, 30) == winner["option_id"]
    session = await services.sessions.get_session(sid)
    assert (session["state"], session["pending_action"]) == ("RUNNING", None)


async def test_an_option_not_offered_writes_nothing(services: Services) -> None:
    _, pending_id, blocked = await waiting_session(services)
    for bad in ("maybe", "", None):
        with pytest.raises(ValidationFailed) as raised:
            await services.permissions.respond(pending_id, bad)
        assert raised.value.field == "option_id"
    listed = await services.permissions.list_pending()
    assert [p["pending_id"] for p in listed["permissions"]] == [pending_id]
    assert not blocked.done()
    won = await services.permissions.respond(pending_id, "no")
    assert (won["claimed"], won["status"]) == (True, "rejected")
    assert await asyncio.wait_for(blocked, 30) == "no"


async def test_foreign_is_the_unknown_404_and_invisible_in_the_list(services: Services) -> None:
    alice, bob = Identity("alice"), Identity("bob")
    _, pending_id, blocked = await waiting_session(services, alice)
    with acting_as(bob):
        with pytest.raises(NotFound) as foreign:
            await services.permissions.respond(pending_id, "yes")
        with pytest.raises(NotFound) as unknown:
            await services.permissions.respond("fabricated", "yes")
        assert str(foreign.value) == str(unknown.value)
        assert (await services.permissions.list_pending())["count"] == 0
    with acting_as(alice):
        assert (await services.permissions.list_pending())["count"] == 1
        assert (await services.permissions.respond(pending_id, "yes"))["claimed"] is True
    assert await asyncio.wait_for(blocked, 30) == "yes"


async def test_ending_the_session_expires_and_cancels(services: Services) -> None:
    sid, pending_id, blocked = await waiting_session(services)
    await services.sessions.stop(sid, "CANCELLED")
    assert await asyncio.wait_for(blocked, 30) is None  # the agent's call: cancelled
    with pytest.raises(Conflict):
        await services.permissions.respond(pending_id, "yes")


async def test_list_pages_oldest_first(services: Services, clock: ManualClock) -> None:
    first = await waiting_session(services)
    clock.advance(seconds=5)
    second = await waiting_session(services)
    page = await services.permissions.list_pending(limit=1)
    assert [p["pending_id"] for p in page["permissions"]] == [first[1]]
    assert page["next_cursor"]
    rest = await services.permissions.list_pending(cursor=page["next_cursor"], limit=1)
    assert [p["pending_id"] for p in rest["permissions"]] == [second[1]]
    assert rest["next_cursor"] == ""
    for _, _, blocked in (first, second):
        blocked.cancel()


async def _queued_writers(services: Services, count: int) -> None:
    """Until `count` tasks wait on SQLite's write lock (each runs to its first wait when
    the loop gets control; bounded)."""
    lock = services.db._write_lock
    assert lock is not None
    for _ in range(1000):
        if len(lock._waiters or ()) >= count:  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0)  # noqa: sleep-ok (a yield: the queued task runs to its wait)
    raise AssertionError(f"{count} writers did not queue")


async def test_a_request_is_announced_before_its_turn_end_committed_behind_it(
    services: Services, database_kind: str
) -> None:
    """The turn's end, queued right behind the request's insert, commits next and expires
    it. The request's "added" must still reach clients first, or they keep an open request
    that is gone — even when every read slot is busy (a loaded server) when it commits."""
    if database_kind != "sqlite":
        pytest.skip("SQLite queues writers on one lock: the order is the test's to choose")
    session = {"id": (await prompted_session(services))[1]}
    turn_id = (await services.sessions.get_session(session["id"]))["current_turn_id"]
    assert turn_id
    orchestrator = services.orchestrator
    stream = services.bus.subscribe()
    release_reads = asyncio.Event()
    reading = asyncio.Event()
    held, held_slots = 0, services.db.max_transactions

    async def busy_reader() -> None:
        nonlocal held
        async with services.db.read():
            held += 1
            if held == held_slots:
                reading.set()
            await release_reads.wait()

    readers: list[asyncio.Task[None]] = []
    try:
        async with services.db.write():  # holds the lock while both queue, in this order
            asked = asyncio.create_task(
                services.permissions.decide(session["id"], TOOL_CALL, OPTIONS)
            )
            await _queued_writers(services, 1)
            ended = asyncio.create_task(
                orchestrator.recorder.finish_turn(
                    session["id"], turn_id, "end_turn", orchestrator.hooks
                )
            )
            await _queued_writers(services, 2)
            readers += [asyncio.create_task(busy_reader()) for _ in range(held_slots)]
            await asyncio.wait_for(reading.wait(), 30)
        await asyncio.wait_for(ended, 30)
        release_reads.set()
        assert await asyncio.wait_for(asked, 30) is None  # expired with its turn
        seen = []
        while not stream.queue.empty():  # published by now: both transitions returned
            event = stream.queue.get_nowait()
            if (event.data.get("message") or {}).get("type") == "permission_request":
                seen.append((event.type, event.data["message"]["metadata"]["status"]))
    finally:
        release_reads.set()
        await asyncio.gather(*readers)
        stream.close()
    assert seen == [("session.message.added", "pending"), ("session.message.updated", "expired")]


async def test_a_request_recorded_after_its_turn_ended_is_born_expired(
    services: Services,
) -> None:
    """The agent asked and at once ended its turn, and the turn's end was written first:
    the request expires with that turn (the agent's call is cancelled), never left open in
    an idle session."""
    _, session_id = await prompted_session(services)
    turn_id = (await services.sessions.get_session(session_id))["current_turn_id"]
    orchestrator = services.orchestrator
    await orchestrator.recorder.finish_turn(session_id, turn_id, "end_turn", orchestrator.hooks)
    stream = services.bus.subscribe()
    try:
        asked = asyncio.create_task(services.permissions.decide(session_id, TOOL_CALL, OPTIONS))
        while True:
            event = await stream.next(timeout=30)
            assert event is not None, "no permission request was announced"
            message = event.data.get("message") or {}
            if message.get("type") == "permission_request":
                break
    finally:
        stream.close()
    assert (event.type, message["metadata"]["status"]) == ("session.message.added", "expired")
    assert await asyncio.wait_for(asked, 30) is None
    assert (await services.permissions.list_pending())["count"] == 0
    session = await services.sessions.get_session(session_id)
    assert (session["state"], session["pending_action"]) == ("IDLE", None)
