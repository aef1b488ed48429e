"""The result the blocked agent's ask_user_question_kandev call returns (CONTRACT §5).

Unlike the baseline (first selected option only, keys omitted when empty), every selected
option reaches the agent, with its label, and every key is always present.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _get(obj: Any, name: str, default: Any = None) -> Any:
    value = obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)
    return default if value is None else value


def _unanswered() -> dict[str, Any]:
    return {
        "answered": False,
        "selected_options": [],
        "selected_labels": [],
        "selected_option": None,
        "custom_text": "",
    }


def _question_result(question: Any, answer: Any) -> dict[str, Any]:
    if answer is None:
        return _unanswered()
    labels: dict[str, str] = {}
    for option in _get(question, "options", ()):
        option_id = _get(option, "option_id", "")
        labels.setdefault(option_id, str(_get(option, "label", "")))
    selected = [str(option_id) for option_id in _get(answer, "selected_options", ())]
    custom_text = str(_get(answer, "custom_text", ""))
    return {
        "answered": bool(selected or custom_text),
        "selected_options": selected,
        # An id the bundle does not know (validation upstream rejects those) stands for itself.
        "selected_labels": [labels.get(option_id, option_id) for option_id in selected],
        "selected_option": selected[0] if selected else None,
        "custom_text": custom_text,
    }


def agent_result(pending_id: str, questions: Sequence[Any], response: Any) -> dict[str, Any]:
    """`{pending_id, rejected, reject_reason, answers: {<question_id>: {...}}}`.

    `response` is a ClarificationResponse (or a dict with the same fields). Every question of
    the bundle is keyed, in bundle order; answers to unknown question ids are ignored.
    """
    rejected = bool(_get(response, "rejected", False))
    answers_by_id: dict[str, Any] = {}
    if not rejected:
        for answer in _get(response, "answers", ()):
            answers_by_id.setdefault(_get(answer, "question_id", ""), answer)
    answers: dict[str, dict[str, Any]] = {}
    for question in questions:
        question_id = _get(question, "id", "")
        answers[question_id] = _question_result(question, answers_by_id.get(question_id))
    return {
        "pending_id": pending_id,
        "rejected": rejected,
        "reject_reason": str(_get(response, "reject_reason", "")) if rejected else "",
        "answers": answers,
    }
