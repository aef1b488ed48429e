"""Board records as returned by repositories, and their public JSON shapes (CONTRACT §3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kandev.clock import isoformat


@dataclass(frozen=True)
class Workspace:
    id: str
    name: str
    description: str
    owner_id: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Workspace:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "owner_id": self.owner_id,
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }


@dataclass(frozen=True)
class WorkflowStep:
    id: str
    workflow_id: str
    name: str
    position: int
    prompt: str
    events: dict[str, Any]
    wip_limit: int
    is_start_step: bool
    allow_manual_move: bool
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> WorkflowStep:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workflow_id": self.workflow_id,
            "name": self.name,
            "position": self.position,
            "prompt": self.prompt,
            "events": self.events,
            "wip_limit": self.wip_limit,
            "is_start_step": self.is_start_step,
            "allow_manual_move": self.allow_manual_move,
        }


@dataclass(frozen=True)
class Workflow:
    id: str
    workspace_id: str
    name: str
    description: str
    prompt: str
    created_at: datetime
    updated_at: datetime
    steps: tuple[WorkflowStep, ...] = field(default=())

    @classmethod
    def from_row(cls, row: Mapping[Any, Any], steps: tuple[WorkflowStep, ...] = ()) -> Workflow:
        fields = {k: row[k] for k in cls.__dataclass_fields__ if k != "steps"}
        return cls(**fields, steps=steps)

    def start_step(self) -> WorkflowStep | None:
        for step in self.steps:
            if step.is_start_step:
                return step
        return self.steps[0] if self.steps else None

    def step(self, step_id: str) -> WorkflowStep | None:
        return next((s for s in self.steps if s.id == step_id), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "name": self.name,
            "description": self.description,
            "prompt": self.prompt,
            "steps": [s.to_json() for s in self.steps],
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }


@dataclass(frozen=True)
class Task:
    id: str
    workspace_id: str
    workflow_id: str
    workflow_step_id: str
    title: str
    description: str
    state: str
    position: int
    metadata: dict[str, Any]
    local_path: str
    archived_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # A task on a repository (CONTRACT §10; '' = none): see kandev.repos.
    repository_id: str = ""
    base_branch: str = ""
    branch: str = ""
    worktree_path: str = ""
    # The last computed totals of its changes (kandev.repos.changes stores them).
    additions: int = 0
    deletions: int = 0

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Task:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(
        self,
        task_pending_action: str | None = None,
        primary_session_pending_action: str | None = None,
        pending_clarification_id: str | None = None,
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "workflow_id": self.workflow_id,
            "workflow_step_id": self.workflow_step_id,
            "title": self.title,
            "description": self.description,
            "state": self.state,
            "position": self.position,
            "metadata": self.metadata,
            "local_path": self.local_path,
            "repository_id": self.repository_id or None,
            "base_branch": self.base_branch or None,
            "branch": self.branch or None,
            "worktree_path": self.worktree_path or None,
            # +A/-D as last computed (null for a task not on a repository).
            "additions": self.additions if self.repository_id else None,
            "deletions": self.deletions if self.repository_id else None,
            "archived_at": isoformat(self.archived_at),
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
            # Filled by the clarification work; the keys are always present (CONTRACT §3).
            "task_pending_action": task_pending_action,
            "primary_session_pending_action": primary_session_pending_action,
            # The active question bundle's pending_id, or null (CONTRACT §12).
            "pending_clarification_id": pending_clarification_id,
        }


# What every response shows in place of an agent profile's env value; sent back in a PATCH it
# means "keep the stored value".
ENV_VALUE_MASK = "********"


@dataclass(frozen=True)
class AgentProfile:
    id: str
    name: str
    command: list[str]
    env: dict[str, str]
    is_builtin: bool
    created_at: datetime
    updated_at: datetime
    # How the agent's permission requests are decided (kandev.permissions).
    permission_policy: str = "ask"
    permission_allow: list[str] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> AgentProfile:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "command": self.command,
            # Secrets are write-only (CONTRACT §8): callers see which keys are set, never values.
            "env": {key: ENV_VALUE_MASK for key in self.env},
            "is_builtin": self.is_builtin,
            "permission_policy": self.permission_policy,
            "permission_allow": list(self.permission_allow),
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }
