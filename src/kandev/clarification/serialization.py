"""The resolution envelope (R12), written out key by key: never an omitted key, never null.

`answers`, `rejected` and `reject_reason` are always present, and so are each answer's
`question_id`, `selected_options` and `custom_text` — REST and MCP share this one function.
"""

from __future__ import annotations

from typing import Any


def answer_entry(answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "question_id": str(answer.get("question_id") or ""),
        "selected_options": [str(o) for o in answer.get("selected_options") or []],
        "custom_text": str(answer.get("custom_text") or ""),
    }


def response_envelope(
    answers: list[dict[str, Any]], rejected: bool, reject_reason: str
) -> dict[str, Any]:
    return {
        "answers": [answer_entry(a) for a in answers],
        "rejected": bool(rejected),
        "reject_reason": str(reject_reason or ""),
    }


def resolution_body(
    pending_id: str, claimed: bool, status: str, response: dict[str, Any]
) -> dict[str, Any]:
    """What REST `/respond` and MCP `answer_question_kandev` return on success (R10)."""
    return {
        "success": True,
        "pending_id": pending_id,
        "claimed": claimed,
        "status": status,
        "response": response,
    }
