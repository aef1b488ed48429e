"""Session and task states (CONTRACT §3, §4)."""

from __future__ import annotations

# Session states. The last three are terminal.
CREATED = "CREATED"
STARTING = "STARTING"
RUNNING = "RUNNING"
WAITING_FOR_INPUT = "WAITING_FOR_INPUT"
IDLE = "IDLE"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
TERMINAL_STATES = frozenset({COMPLETED, FAILED, CANCELLED})
SESSION_STATES = (CREATED, STARTING, RUNNING, WAITING_FOR_INPUT, IDLE, COMPLETED, FAILED, CANCELLED)
# States in which a session can take a human's input (a pending action is actionable).
INPUT_CAPABLE_STATES = frozenset({RUNNING, WAITING_FOR_INPUT})

# Task states: what the task's agent work amounts to (the column is the workflow step).
TASK_TODO = "TODO"
TASK_IN_PROGRESS = "IN_PROGRESS"
TASK_REVIEW = "REVIEW"
TASK_COMPLETED = "COMPLETED"
FINAL_TASK_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
