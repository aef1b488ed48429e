"""The pending-action rules over described sessions (reference §1.7); the one statement that
reads what they need is pending.view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kandev.catalog.messages import (
    ACTION_CLARIFICATION,
    ACTION_PERMISSION,
)
from kandev.catalog.states import INPUT_CAPABLE_STATES


def task_pending_action(
    sessions_with_states: list[tuple[str, str]], actions: Mapping[str, str]
) -> str | None:
    """A task's pending action over its input-capable sessions: permission anywhere wins."""
    return strongest_action(
        actions.get(session_id)
        for session_id, state in sessions_with_states
        if state in INPUT_CAPABLE_STATES
    )


def strongest_action(actions: Iterable[str | None]) -> str | None:
    """Permission anywhere wins over a question; nothing owed is None."""
    found = set(actions)
    if ACTION_PERMISSION in found:
        return ACTION_PERMISSION
    if ACTION_CLARIFICATION in found:
        return ACTION_CLARIFICATION
    return None


def session_pending_action(session_id: str | None, actions: Mapping[str, str]) -> str | None:
    return actions.get(session_id) if session_id is not None else None
