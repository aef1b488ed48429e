"""Every event type the server publishes on the event bus (and so on `GET /api/v1/events`).

Publishers and readers import these constants; nobody spells an event type as a string.
`EVENT_TYPES` (name → when it is published and what its payload carries) is the one list:
docs/events.md renders it, and tests/docs/test_docs_complete.py keeps the two equal.
Every event also carries `id` and `type`; the values are part of the contract (CONTRACT §3,
§4) and never change.
"""

from __future__ import annotations

# Board (kandev.board, kandev.moves, kandev.repos): scoped to the workspace's owner.
TASK_CREATED = "task.created"
TASK_UPDATED = "task.updated"
TASK_DELETED = "task.deleted"
TASK_MOVED = "task.moved"
TASK_MOVE_DEFERRED = "task.move_deferred"
TASK_MOVE_DROPPED = "task.move_dropped"
TASK_CHANGES_UPDATED = "task.changes_updated"
WORKFLOW_UPDATED = "workflow.updated"
WORKFLOW_DELETED = "workflow.deleted"
WORKSPACE_UPDATED = "workspace.updated"
WORKSPACE_DELETED = "workspace.deleted"

# Sessions (kandev.sessions): turns, messages (questions and answers included), the queue.
SESSION_CREATED = "session.created"
SESSION_STATE_CHANGED = "session.state_changed"
SESSION_TURN_STARTED = "session.turn.started"
SESSION_TURN_COMPLETED = "session.turn.completed"
SESSION_MESSAGE_ADDED = "session.message.added"
SESSION_MESSAGE_UPDATED = "session.message.updated"
SESSION_PROMPT_QUEUED = "session.prompt.queued"

# The stream itself (kandev.events.bus): sent to one subscriber, never published.
STREAM_RESET = "stream.reset"

EVENT_TYPES: dict[str, str] = {
    TASK_CREATED: "a task was created (REST, MCP, CLI, a page); "
    '`{"task"}`: the task JSON as `GET /api/v1/tasks/{id}` returns it',
    TASK_UPDATED: "a task was edited, archived, unarchived or moved, its state, branch or "
    'worktree changed; `{"task"}`',
    TASK_DELETED: 'a task was deleted; `{"task_id", "workspace_id", "workflow_id"}`',
    TASK_MOVED: "a task was moved to another step or place (after its `task.updated`); "
    '`{"task", "from_step_id", "to_step_id", "from_workflow_id", "to_workflow_id", "actor", '
    '"move_id"?}`',
    TASK_MOVE_DEFERRED: "a move (not a person's board move) came while the task's agent turn "
    "runs: it waits for the turn to end; "
    '`{"task_id", "move_id", "session_id", "workflow_id", "workflow_step_id"}`',
    TASK_MOVE_DROPPED: "a deferred move will never apply (replaced, superseded, its session "
    'ended, the task or workflow gone); `{"task_id", "move_id", "session_id", "workflow_id", '
    '"workflow_step_id", "reason"}`',
    TASK_CHANGES_UPDATED: "an agent turn of a task on a repository ended and its changes differ "
    "from the last look, or a commit or merge of the task went through the API; "
    '`{"task_id", "changes"}`: the changes summary without diffs',
    WORKFLOW_UPDATED: "a workflow was created or edited, or one of its steps created, edited or "
    'deleted; `{"workflow"}`: with its steps',
    WORKFLOW_DELETED: 'a workflow was deleted; `{"workflow_id", "workspace_id"}`',
    WORKSPACE_UPDATED: 'a workspace was renamed or re-described; `{"workspace"}`',
    WORKSPACE_DELETED: 'a workspace was deleted; `{"workspace_id"}`',
    SESSION_CREATED: 'a session was created on a task; `{"session"}`',
    SESSION_STATE_CHANGED: "a session changed state (started, running, waiting for input, "
    'idle, ended); `{"session_id", "task_id", "state", "previous_state", "error_message", '
    '"session"}`',
    SESSION_TURN_STARTED: "a prompt started a turn of the session's agent; "
    '`{"session_id", "task_id", "turn_id"}`',
    SESSION_TURN_COMPLETED: "the agent's turn ended; "
    '`{"session_id", "task_id", "turn_id", "stop_reason"}`',
    SESSION_MESSAGE_ADDED: "a message joined the conversation (a prompt, agent text, a tool "
    'call, a question, an answer, an error); `{"message"}`, plus `"pending_action"` (the '
    "session's recomputed one) for questions and answers",
    SESSION_MESSAGE_UPDATED: "a message changed (streamed text, a tool call's result, a "
    'question answered, rejected, expired or cancelled); `{"message"}`, plus '
    '`"pending_action"` for questions',
    SESSION_PROMPT_QUEUED: "a prompt was queued while a turn runs; "
    '`{"session_id", "task_id", "queued_prompt_id", "queued"}`: `queued` is how many wait',
    STREAM_RESET: "sent to one client whose events were lost (too old, the server restarted, "
    'the client too slow): refetch what you show; `{"reason"}`',
}
