"""Validated inputs for board operations, shared by REST and MCP (no HTTP types here).

Strict types: a number where a string belongs is an error, not silently converted. Oversized
strings are rejected, never truncated.
"""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
Description = Annotated[str, StringConstraints(max_length=20_000)]
Prompt = Annotated[str, StringConstraints(max_length=100_000)]
RowId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Path = Annotated[str, StringConstraints(max_length=4096)]


def _absolute_or_empty(value: str) -> str:
    if value and not os.path.isabs(value):
        raise ValueError("must be an absolute path")
    return value


# A task's working directory for its agents: absolute; it must exist when an agent starts
# (checked then, since directories come and go). Kandev never creates it.
LocalPath = Annotated[Path, AfterValidator(_absolute_or_empty)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]

STEP_ACTION_TYPES = (
    "auto_start_agent",
    "enable_plan_mode",
    "disable_plan_mode",
    "move_to_next",
    "move_to_previous",
    "move_to_step",
)


class Input(BaseModel):
    model_config = ConfigDict(strict=True, str_max_length=100_000)


class StepAction(Input):
    type: Literal[
        "auto_start_agent",
        "enable_plan_mode",
        "disable_plan_mode",
        "move_to_next",
        "move_to_previous",
        "move_to_step",
    ]
    config: dict[str, object] = Field(default_factory=dict)


class StepEvents(Input):
    model_config = ConfigDict(strict=True, extra="forbid")

    on_enter: list[StepAction] = Field(default_factory=list, max_length=20)
    on_turn_start: list[StepAction] = Field(default_factory=list, max_length=20)
    on_turn_complete: list[StepAction] = Field(default_factory=list, max_length=20)
    on_exit: list[StepAction] = Field(default_factory=list, max_length=20)


class WorkspaceCreate(Input):
    name: Name
    description: Description = ""


class StepCreate(Input):
    name: Name
    position: int | None = Field(default=None, ge=0, le=10_000)
    prompt: Prompt = ""
    events: StepEvents | None = None
    wip_limit: int = Field(default=0, ge=0, le=10_000)
    is_start_step: bool = False


class WorkflowCreate(Input):
    workspace_id: RowId
    name: Name
    description: Description = ""
    prompt: Prompt = ""
    steps: list[StepCreate] | None = Field(default=None, max_length=50)


class TaskCreate(Input):
    workspace_id: RowId
    workflow_id: RowId
    workflow_step_id: RowId | None = None
    title: Title
    description: Description = ""
    local_path: LocalPath = ""
    # A task on a registered repository (CONTRACT §10); base_branch defaults to its default.
    repository_id: RowId | None = None
    base_branch: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None


class WorkspaceUpdate(Input):
    """A PATCH: fields left out (or null) stay as they are."""

    name: Name | None = None
    description: Description | None = None


class WorkflowUpdate(Input):
    name: Name | None = None
    description: Description | None = None
    prompt: Prompt | None = None


class StepUpdate(Input):
    """A PATCH of one step. `is_start_step: true` makes it the workflow's start step (the
    old one stops being it); `false` on the start step is refused: mark another one."""

    name: Name | None = None
    position: int | None = Field(default=None, ge=0, le=10_000)
    prompt: Prompt | None = None
    events: StepEvents | None = None
    wip_limit: int | None = Field(default=None, ge=0, le=10_000)
    is_start_step: bool | None = None


class TaskUpdate(Input):
    title: Title | None = None
    description: Description | None = None
    local_path: LocalPath | None = None


class TaskMove(Input):
    workflow_id: RowId
    workflow_step_id: RowId
    position: int | None = Field(default=None, ge=0, le=1_000_000)


# How an agent's permission requests are decided (kandev.permissions); an allow-list entry is
# a tool kind ("read", "execute", …) or a tool title, matched exactly.
PermissionPolicyName = Literal["ask", "allow", "deny"]
AllowEntry = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class AgentProfileCreate(Input):
    name: Name
    command: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = Field(
        min_length=1, max_length=64
    )
    env: dict[EnvName, Annotated[str, StringConstraints(max_length=32_768)]] = Field(
        default_factory=dict, max_length=100
    )
    permission_policy: PermissionPolicyName = "ask"
    permission_allow: list[AllowEntry] = Field(default_factory=list, max_length=100)


class AgentProfileUpdate(Input):
    """A PATCH: fields left out stay as they are. `env`, when sent, is the whole new map: keys
    left out are removed, and a key sent as "********" (the mask responses show) keeps its
    stored value."""

    name: Name | None = None
    command: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] | None = Field(
        default=None, min_length=1, max_length=64
    )
    env: dict[EnvName, Annotated[str, StringConstraints(max_length=32_768)]] | None = Field(
        default=None, max_length=100
    )
    permission_policy: PermissionPolicyName | None = None
    permission_allow: list[AllowEntry] | None = Field(default=None, max_length=100)
