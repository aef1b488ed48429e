"""What a workflow step does when a task enters it or a turn in it completes.

Step events (`WorkflowStep.events`, each a list of `{type, config}`):

- `on_enter`: `auto_start_agent` sends the agent the step's prompt (below). Plan-mode actions
  are accepted and ignored (Kandev has no plan mode).
- `on_turn_complete`: the first of `move_to_next`, `move_to_previous`, `move_to_step
  {step_id}` moves the task at the end of a completed agent turn (the caller applies the
  clarification guard). No neighbouring step, or a `step_id` not in the task's workflow:
  the task stays where it is.
- `on_turn_start`, `on_exit`: accepted, nothing to do today.

Ordering is by `position` (ties: creation order, as the board lists them): the next step is
the first one after the current one, the previous step the last one before it.

Terminal step: the last step of its workflow (no step comes after it) whose name, trimmed and
lowercased, is one of `TERMINAL_STEP_NAMES`. Entering it sets the task COMPLETED; leaving it
while COMPLETED sets TODO. A "Done" column that is not last, or a last column called
"Shipping", is an ordinary step.
"""

from __future__ import annotations

from typing import Any

from kandev.board.models import Task, Workflow, WorkflowStep

TERMINAL_STEP_NAMES = frozenset({"done", "complete", "completed", "approved"})
AUTO_START_AGENT = "auto_start_agent"
MOVE_TO_NEXT = "move_to_next"
MOVE_TO_PREVIOUS = "move_to_previous"
MOVE_TO_STEP = "move_to_step"
TASK_PROMPT_PLACEHOLDER = "{{task_prompt}}"
WORKFLOW_HEADING = "## Workflow instructions"
INSTRUCTIONS_PREFIX = "You were moved to this step with the following message: "


def actions(step: WorkflowStep, event: str) -> list[dict[str, Any]]:
    raw = (step.events or {}).get(event) or []
    return [a for a in raw if isinstance(a, dict) and isinstance(a.get("type"), str)]


def has_action(step: WorkflowStep, event: str, action_type: str) -> bool:
    return any(a["type"] == action_type for a in actions(step, event))


def _index(workflow: Workflow, step: WorkflowStep) -> int | None:
    return next((i for i, s in enumerate(workflow.steps) if s.id == step.id), None)


def next_step(workflow: Workflow, step: WorkflowStep) -> WorkflowStep | None:
    index = _index(workflow, step)
    if index is None or index + 1 >= len(workflow.steps):
        return None
    return workflow.steps[index + 1]


def previous_step(workflow: Workflow, step: WorkflowStep) -> WorkflowStep | None:
    index = _index(workflow, step)
    if index is None or index == 0:
        return None
    return workflow.steps[index - 1]


def is_terminal(workflow: Workflow | None, step: WorkflowStep | None) -> bool:
    if workflow is None or step is None:
        return False
    return _index(workflow, step) == len(workflow.steps) - 1 and (
        step.name.strip().lower() in TERMINAL_STEP_NAMES
    )


def turn_complete_target(workflow: Workflow, step: WorkflowStep) -> WorkflowStep | None:
    """Where `on_turn_complete` sends the task, or None to stay put."""
    for action in actions(step, "on_turn_complete"):
        kind = action["type"]
        if kind == MOVE_TO_NEXT:
            return next_step(workflow, step)
        if kind == MOVE_TO_PREVIOUS:
            return previous_step(workflow, step)
        if kind == MOVE_TO_STEP:
            config = action.get("config") or {}
            target_id = config.get("step_id") if isinstance(config, dict) else None
            return workflow.step(target_id) if isinstance(target_id, str) else None
    return None


def step_prompt(workflow: Workflow, step: WorkflowStep, task: Task) -> str:
    """The auto-start prompt: the workflow's instructions, then the step prompt (with
    `{{task_prompt}}` replaced by the task description; no step prompt = the description)."""
    parts = []
    if workflow.prompt.strip():
        parts.append(f"{WORKFLOW_HEADING}\n\n{workflow.prompt.strip()}")
    if step.prompt.strip():
        parts.append(step.prompt.replace(TASK_PROMPT_PLACEHOLDER, task.description).strip())
    elif task.description.strip():
        parts.append(task.description.strip())
    return "\n\n".join(parts)


def entry_prompt(
    workflow: Workflow, step: WorkflowStep, task: Task, *, instructions: str, skip: bool
) -> str:
    """What the agent receives on entering `step`: the auto-start prompt (unless the step has
    no auto_start_agent or the entry skips automation), then the entry instructions.
    '' when there is nothing to send."""
    parts = []
    if not skip and has_action(step, "on_enter", AUTO_START_AGENT):
        prompt = step_prompt(workflow, step, task)
        if prompt:
            parts.append(prompt)
    if instructions:
        parts.append(INSTRUCTIONS_PREFIX + instructions)
    return "\n\n".join(parts)
