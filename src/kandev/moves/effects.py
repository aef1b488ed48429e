"""What a move transaction leaves to do once it has committed: its events, agents to restart
with a fresh context, and entry prompts to deliver."""

from __future__ import annotations

from dataclasses import dataclass, field

from kandev.events.bus import EventBus
from kandev.events.publisher import PendingEvents
from kandev.sessions.models import Session


@dataclass
class MoveEffects:
    events: PendingEvents
    fresh_context: set[str] = field(default_factory=set)  # sessions to restart fresh
    dispatch: set[str] = field(default_factory=set)  # sessions with an entry prompt queued
    direct_prompts: list[tuple[Session, str]] = field(default_factory=list)  # no managed agent

    @classmethod
    def on(cls, bus: EventBus) -> MoveEffects:
        return cls(PendingEvents(bus))
