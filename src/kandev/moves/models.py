"""The vocabulary of a move: what a caller asks (`MoveRequest`), what it gets back
(`MoveResult`), who asked (the actors), and a move once validated (`MoveTarget`)."""

from __future__ import annotations

from dataclasses import dataclass

from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.sessions.models import Session

# Dispositions (`MoveResult.disposition`).
APPLIED = "applied"
DEFERRED = "deferred"

# Who asked for a move (stored on pending moves, sent with task.moved).
ACTOR_USER = "user"  # a person on the REST API
ACTOR_AGENT = "agent"  # an agent on /agent/mcp (its session is the sender)
ACTOR_EXTERNAL = "mcp"  # a caller of the external /mcp endpoint
ACTOR_WORKFLOW = "workflow"  # on_turn_complete automation


@dataclass(frozen=True)
class EntryOptions:
    """Options of one entry into a step; they apply once, to the entry they came with."""

    instructions: str = ""
    reset: bool = False
    skip: bool = False

    @property
    def empty(self) -> bool:
        return not (self.instructions or self.reset or self.skip)

    def first_given(self) -> str:
        if self.instructions:
            return "instructions"
        return "reset" if self.reset else "skip"


@dataclass(frozen=True)
class MoveRequest:
    task_id: str
    workflow_id: str
    workflow_step_id: str
    position: int | None = None
    instructions: str | None = None
    prompt: str | None = None  # legacy alias of instructions
    reset: bool | None = None
    skip: bool | None = None
    actor: str = ACTOR_USER
    sender_session_id: str = ""


@dataclass(frozen=True)
class MoveResult:
    disposition: str
    task: Task
    step: WorkflowStep
    move_id: str | None = None


@dataclass(frozen=True)
class MoveTarget:
    """A validated move: the task as stored, where it goes, and the entry options."""

    task: Task
    workflow: Workflow
    step: WorkflowStep
    options: EntryOptions
    primary: Session | None = None

    @property
    def same_step(self) -> bool:
        return (
            self.task.workflow_id == self.workflow.id and self.task.workflow_step_id == self.step.id
        )
