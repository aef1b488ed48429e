"""The event bus: ordering, replay after an id, resets when events were lost."""

from __future__ import annotations

import asyncio
import json

from kandev.events import bus as bus_module
from kandev.events.bus import RESET_EVENT, EventBus


async def test_live_events_arrive_in_order() -> None:
    bus = EventBus(first_id=100)
    stream = bus.subscribe()
    for i in range(5):
        bus.publish("t", {"i": i})
    got = [await stream.next(timeout=1) for _ in range(5)]
    assert [e.id for e in got] == [100, 101, 102, 103, 104]
    assert [e.data["i"] for e in got] == [0, 1, 2, 3, 4]
    assert await stream.next(timeout=0.01) is None
    stream.close()
    assert bus.subscriber_count == 0


async def test_replay_gives_exactly_the_missed_events_then_live_ones() -> None:
    bus = EventBus(first_id=1)
    for i in range(10):
        bus.publish("t", {"i": i})
    stream = bus.subscribe(after_id=7)
    bus.publish("t", {"i": 10})
    ids = [(await stream.next(timeout=1)).id for _ in range(4)]
    assert ids == [8, 9, 10, 11]  # three replayed, then the live one, nothing twice
    assert await stream.next(timeout=0.01) is None


async def test_replay_from_the_last_id_sends_nothing_old() -> None:
    bus = EventBus(first_id=1)
    bus.publish("t", {})
    stream = bus.subscribe(after_id=bus.last_id)
    assert await stream.next(timeout=0.01) is None


async def test_rolled_out_events_produce_a_reset_first() -> None:
    bus = EventBus(capacity=3, first_id=1)
    for i in range(10):
        bus.publish("t", {"i": i})  # ids 1..10, only 8..10 kept
    stream = bus.subscribe(after_id=2)
    first = await stream.next(timeout=1)
    assert first.type == RESET_EVENT
    assert [(await stream.next(timeout=1)).id for _ in range(3)] == [8, 9, 10]


async def test_an_id_from_before_this_process_started_resets() -> None:
    bus = EventBus(first_id=1_000)
    bus.publish("t", {})
    stream = bus.subscribe(after_id=5)  # e.g. the previous server's ids
    assert (await stream.next(timeout=1)).type == RESET_EVENT
    assert (await stream.next(timeout=1)).id == 1_000


async def test_a_stuck_subscriber_is_reset_not_grown() -> None:
    bus = EventBus(first_id=1)
    stream = bus.subscribe()
    stream.queue = type(stream.queue)(maxsize=2)
    for i in range(5):
        bus.publish("t", {"i": i})
    assert (await stream.next(timeout=1)).type == RESET_EVENT
    bus.publish("t", {"i": 99})
    assert (await stream.next(timeout=1)).data == {"i": 99}


async def test_the_buffer_keeps_only_text_yet_replays_the_same_payloads() -> None:
    bus = EventBus(first_id=1)
    live = bus.subscribe()
    payload = {"task": {"id": "t1", "title": "Café", "position": 2, "tags": [None, True]}}
    bus.publish("task.updated", payload, task_id="t1", session_id="s1", owner_id="alice")
    sent = await live.next(timeout=1)
    replayed = await bus.subscribe(after_id=0).next(timeout=1)
    buffered = bus._buffer[0]
    assert buffered._data is None and buffered._json is not None  # no dicts kept
    assert replayed.data == sent.data == payload  # decoded on demand, same payload
    assert (replayed.task_id, replayed.session_id, replayed.owner_id) == ("t1", "s1", "alice")
    assert json.loads(replayed.json()) == {"id": 1, "type": "task.updated", **payload}


async def test_an_event_is_serialized_once_for_every_stream(monkeypatch) -> None:
    calls = []
    real = bus_module.to_json
    monkeypatch.setattr(bus_module, "to_json", lambda value: calls.append(1) or real(value))
    bus = EventBus(first_id=1)
    streams = [bus.subscribe() for _ in range(3)]
    bus.publish("t", {"i": 1})
    texts = {(await s.next(timeout=1)).json() for s in streams}
    texts.add(bus.subscribe(after_id=0)._backlog[0].json())
    assert len(texts) == 1 and len(calls) == 1


async def test_a_batch_is_everything_there_now_in_order_and_bounded() -> None:
    bus = EventBus(first_id=1)
    stream = bus.subscribe()
    for i in range(5):  # one transaction's publish: no await in between
        bus.publish("t", {"i": i})
    assert [e.id for e in await stream.next_batch(timeout=1)] == [1, 2, 3, 4, 5]
    assert await stream.next_batch(timeout=0.01) == []  # nothing there: [] after the timeout
    for i in range(5):
        bus.publish("t", {"i": i})
    assert [e.id for e in await stream.next_batch(timeout=1, limit=2)] == [6, 7]
    assert [e.id for e in await stream.next_batch(timeout=1)] == [8, 9, 10]


async def test_a_batch_waits_for_the_first_event_then_takes_what_came_with_it() -> None:
    bus = EventBus(first_id=1)
    stream = bus.subscribe()
    waiting = asyncio.ensure_future(stream.next_batch(timeout=10))
    await asyncio.sleep(0)  # noqa: sleep-ok (lets the batch start waiting on an empty queue)
    assert not waiting.done()
    bus.publish("t", {"i": 0})
    bus.publish("t", {"i": 1})
    assert [e.data["i"] for e in await waiting] == [0, 1]


async def test_a_batch_replays_first_and_never_repeats_a_replayed_event() -> None:
    bus = EventBus(first_id=1)
    for i in range(3):
        bus.publish("t", {"i": i})
    stream = bus.subscribe(after_id=1)  # 2 and 3 replayed
    bus.publish("t", {"i": 3})
    assert [e.id for e in await stream.next_batch(timeout=1)] == [2, 3]  # the backlog alone
    assert [e.id for e in await stream.next_batch(timeout=1)] == [4]
