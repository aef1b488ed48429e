"""Session, turn and message records and their public JSON (CONTRACT §4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kandev.catalog.states import (
    TERMINAL_STATES,
)
from kandev.clock import isoformat

# What a session without an agent profile says about itself (bring your own agent): Kandev
# runs nothing for it, so it starts IDLE and waits for an external agent to connect.
EXTERNAL_AGENT_HINT = (
    "No managed agent: connect one with POST /api/v1/sessions/{id}/agent-token "
    "(it reads prompts with get_task_conversation_kandev)"
)


@dataclass(frozen=True)
class Session:
    id: str
    task_id: str
    agent_profile_id: str | None
    state: str
    is_primary: bool
    error_message: str
    acp_session_id: str
    workspace_path: str
    metadata: dict[str, Any]
    started_at: datetime
    completed_at: datetime | None
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Session:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def hint(self) -> str | None:
        """What to do next, for a session that would otherwise just sit there."""
        if self.agent_profile_id is None and not self.is_terminal:
            return EXTERNAL_AGENT_HINT.replace("{id}", self.id)
        return None

    def to_json(
        self,
        current_turn_id: str | None = None,
        pending_action: str | None = None,
        pending_clarification_id: str | None = None,
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "state": self.state,
            "is_primary": self.is_primary,
            "agent_profile_id": self.agent_profile_id,
            "current_turn_id": current_turn_id,
            "pending_action": pending_action,
            # The active question bundle's pending_id, or null (CONTRACT §12).
            "pending_clarification_id": pending_clarification_id,
            "error_message": self.error_message,
            "hint": self.hint,
            "started_at": isoformat(self.started_at),
            "completed_at": isoformat(self.completed_at),
            "updated_at": isoformat(self.updated_at),
        }


@dataclass(frozen=True)
class Turn:
    id: str
    session_id: str
    task_id: str
    started_at: datetime
    completed_at: datetime | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Turn:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Message:
    id: str
    session_id: str
    task_id: str
    turn_id: str | None
    author_type: str
    author_id: str
    type: str
    content: str
    requests_input: bool
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Message:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "task_id": self.task_id,
            "turn_id": self.turn_id,
            "author_type": self.author_type,
            "type": self.type,
            "content": self.content,
            "requests_input": self.requests_input,
            "metadata": self.metadata,
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }
