"""Page contexts of `/inbox` and its fragments (frozen dataclasses, as in web/pages.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KIND_QUESTION = "question"
KIND_PERMISSION = "permission"  # an agent asking to run a tool (CONTRACT §11)


@dataclass(frozen=True)
class InboxItem:
    """One thing a human can answer: an open question bundle or a permission request.

    For a question, `rows` are the bundle's questions in the message-JSON shape the
    clarification overlay (static/js/clarification.js) reads, so the inbox answers through the
    same component as the task page. For a permission request, `tool_call` and `options` are
    the request's (the card partial _permission.html shows them).
    """

    kind: str
    pending_id: str
    task_id: str
    task_title: str
    workspace_name: str
    session_id: str
    created_at: str
    age: str  # "3 min", "2 h" …
    context: str
    questions: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    tool_call: dict[str, Any] = field(default_factory=dict)
    options: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class InboxPage:
    """`/inbox` and `/inbox/list`: every open item the caller may answer, oldest first."""

    items: list[InboxItem]
    more: bool  # a further page exists (the list shows the first MAX_LIMIT)
    error: str = ""  # a refused no-JavaScript answer, shown above the list


@dataclass(frozen=True)
class InboxCount:
    """`/inbox/count`: the top bar's badge alone."""

    count: int
