"""Typed, documented page contexts: one frozen dataclass per page or fragment.

Templates see exactly these fields (as `page.<field>`) plus render.BASE_CONTEXT;
tests/web/test_page_contexts.py renders each page and compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kandev.board.models import AgentProfile, Workflow, WorkflowStep, Workspace
from kandev.repos.models import Repository
from kandev.sessions.models import Message
from kandev.web.diff_view import FileView


@dataclass(frozen=True)
class Column:
    """One workflow step on the board with its cards (task JSON, as REST returns it)."""

    step: WorkflowStep
    cards: list[dict[str, Any]]


@dataclass(frozen=True)
class BoardPage:
    """`/`: the chosen workspace and workflow, and one column per step."""

    workspaces: list[Workspace]
    workspace: Workspace | None
    workflows: list[Workflow]
    workflow: Workflow | None
    columns: list[Column]
    profiles: list[AgentProfile]
    total_tasks: int
    last_event_id: int  # the bus id before the page was read: the first SSE connect replays
    # The workspace's registered repositories: the New task form offers them (none: no field).
    repositories: list[Repository] = field(default_factory=list)


@dataclass(frozen=True)
class CardFragment:
    """`/tasks/{id}/card`: one card, as the board renders it."""

    card: dict[str, Any]


@dataclass(frozen=True)
class TaskPage:
    """`/tasks/{id}`: the task, its workflow stepper, its sessions and one conversation."""

    task: dict[str, Any]
    workflow: Workflow
    sessions: list[dict[str, Any]]
    session: dict[str, Any] | None
    messages: list[Message]
    has_more: bool
    profiles: list[AgentProfile]
    profile_names: dict[str, str]
    clarification_rows: list[dict[str, Any]]  # message JSON of the bundle rows shown
    last_event_id: int  # the bus id before the page was read: the first SSE connect replays
    # The task's workspace, for the breadcrumb; None when the task names no workspace that
    # exists (such a task is still visible).
    workspace: Workspace | None = None


@dataclass(frozen=True)
class MessagesFragment:
    """`/sessions/{id}/messages-fragment`: conversation items, in order."""

    messages: list[Message]


@dataclass(frozen=True)
class ChangesFragment:
    """`/tasks/{id}/changes-fragment`: the Changes panel (files, totals, diffs, marks)."""

    task_id: str
    branch: str | None
    base_branch: str | None
    additions: int
    deletions: int
    truncated: bool
    reviewed_files: int
    files: list[FileView]
    overlaps: list[dict[str, Any]] = field(default_factory=list)  # other open tasks, same files
    since: str = ""  # "" (all the changes) | "last_review" (since the caller's last review)
    last_review: dict[str, Any] | None = None  # {commit, reviewed_at} of that review; None: none
    notice: str = ""  # what a commit or a merge from the panel did
    error: str = ""  # why it did not (shown through `readable_error`)


@dataclass(frozen=True)
class ErrorPage:
    status: int
    title: str
    message: str
    links: list[tuple[str, str]] = field(default_factory=lambda: [("/", "Back to the board")])
