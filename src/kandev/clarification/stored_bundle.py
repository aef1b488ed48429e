"""A bundle as the service sees it: its stored rows in question order, and what they share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kandev.catalog import messages as kinds
from kandev.sessions.models import Message


@dataclass(frozen=True)
class Bundle:
    """A bundle as stored: its rows (question order) and what they share."""

    pending_id: str
    session_id: str
    task_id: str
    turn_id: str | None
    questions: list[dict[str, Any]]
    context: str
    messages: list[Message]

    @classmethod
    def from_messages(cls, pending_id: str, messages: list[Message]) -> Bundle:
        ordered = sorted(messages, key=question_order)
        first = ordered[0]
        task_id = next((m.task_id for m in ordered if m.task_id), "")
        turn_ids = {m.turn_id for m in ordered if m.turn_id}
        return cls(
            pending_id=pending_id,
            session_id=first.session_id,
            task_id=task_id,
            turn_id=turn_ids.pop() if len(turn_ids) == 1 else None,
            # The flat question_id is what the claim reads; the nested question may be missing.
            questions=[
                {**_as_dict(m.metadata.get("question")), "id": m.metadata.get("question_id") or ""}
                for m in ordered
            ],
            context=first.metadata.get("context", ""),
            messages=ordered,
        )

    def status(self) -> str:
        statuses = {m.metadata.get("status") or kinds.PENDING for m in self.messages}
        if kinds.PENDING in statuses:
            return kinds.PENDING
        return sorted(statuses)[0]


def group_bundles(messages: list[Message]) -> list[Bundle]:
    """Rows of several bundles, one Bundle per pending_id (rows without one are skipped)."""
    by_id: dict[str, list[Message]] = {}
    for message in messages:
        by_id.setdefault(message.metadata.get("pending_id", ""), []).append(message)
    return [Bundle.from_messages(pid, rows) for pid, rows in by_id.items() if pid]


def question_order(message: Message) -> tuple[int, Any, str]:
    """D2: question_index (0 when missing or unparseable), then created_at, then id."""
    index = message.metadata.get("question_index", 0)
    try:
        index = int(index)
    except (TypeError, ValueError):
        index = 0
    return index, message.created_at, message.id


def carries_intent(message: Message) -> bool:
    """The row was claimed and its answer not yet handed over (the delivery intent)."""
    return str(message.metadata.get(kinds.DELIVERY_PENDING_KEY)).lower() in ("true", "1")


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
