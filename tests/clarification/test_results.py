"""The blocked agent's ask result (CONTRACT §5): every selection, labels, never-omitted keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kandev.clarification.results import agent_result
from kandev.clarification.store import ClarificationResponse

QUESTIONS = [
    {
        "id": "deploy",
        "title": "Deploy",
        "prompt": "Deploy now?",
        "options": [
            {"option_id": "go", "label": "Go ahead", "description": "Deploy now"},
            {"option_id": "wait", "label": "Wait", "description": "Hold"},
        ],
    },
    {
        "id": "checks",
        "title": "Checks",
        "prompt": "Which checks?",
        "options": [
            {"option_id": "lint", "label": "Lint", "description": "ruff"},
            {"option_id": "unit", "label": "Unit tests", "description": "pytest"},
            {"option_id": "e2e", "label": "End to end", "description": "browser"},
        ],
    },
    {
        "id": "notes",
        "title": "Notes",
        "prompt": "Anything else?",
        "options": [
            {"option_id": "no", "label": "No", "description": "Nothing"},
            {"option_id": "yes", "label": "Yes", "description": "Something"},
        ],
    },
]

UNANSWERED = {
    "answered": False,
    "selected_options": [],
    "selected_labels": [],
    "selected_option": None,
    "custom_text": "",
}
ENTRY_KEYS = {"answered", "selected_options", "selected_labels", "selected_option", "custom_text"}


def response(*answers: dict[str, Any], rejected: bool = False, reason: str = "") -> Any:
    return ClarificationResponse(
        pending_id="p1",
        answers=list(answers),
        rejected=rejected,
        reject_reason=reason,
        responded_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_every_selected_option_reaches_the_agent_with_its_label():
    result = agent_result(
        "p1",
        QUESTIONS,
        response(
            {"question_id": "deploy", "selected_options": ["go"], "custom_text": ""},
            {"question_id": "checks", "selected_options": ["lint", "e2e"], "custom_text": ""},
            {"question_id": "notes", "selected_options": [], "custom_text": "Ping me after"},
        ),
    )
    assert result == {
        "pending_id": "p1",
        "rejected": False,
        "reject_reason": "",
        "answers": {
            "deploy": {
                "answered": True,
                "selected_options": ["go"],
                "selected_labels": ["Go ahead"],
                "selected_option": "go",
                "custom_text": "",
            },
            "checks": {
                "answered": True,
                "selected_options": ["lint", "e2e"],
                "selected_labels": ["Lint", "End to end"],
                "selected_option": "lint",
                "custom_text": "",
            },
            "notes": {
                "answered": True,
                "selected_options": [],
                "selected_labels": [],
                "selected_option": None,
                "custom_text": "Ping me after",
            },
        },
    }


def test_options_and_custom_text_together():
    result = agent_result(
        "p1",
        QUESTIONS[:1],
        response({"question_id": "deploy", "selected_options": ["wait"], "custom_text": "2pm"}),
    )
    assert result["answers"]["deploy"] == {
        "answered": True,
        "selected_options": ["wait"],
        "selected_labels": ["Wait"],
        "selected_option": "wait",
        "custom_text": "2pm",
    }


def test_unanswered_questions_are_present_and_false():
    result = agent_result(
        "p1",
        QUESTIONS,
        response({"question_id": "checks", "selected_options": ["unit"], "custom_text": ""}),
    )
    assert list(result["answers"]) == ["deploy", "checks", "notes"]
    assert result["answers"]["deploy"] == UNANSWERED
    assert result["answers"]["notes"] == UNANSWERED
    assert result["answers"]["checks"]["selected_labels"] == ["Unit tests"]


def test_an_empty_answer_entry_is_not_answered():
    result = agent_result(
        "p1", QUESTIONS[:1], response({"question_id": "deploy", "selected_options": []})
    )
    assert result["answers"]["deploy"] == UNANSWERED


def test_no_answers_at_all():
    result = agent_result("p1", QUESTIONS, response())
    assert result == {
        "pending_id": "p1",
        "rejected": False,
        "reject_reason": "",
        "answers": {q["id"]: UNANSWERED for q in QUESTIONS},
    }


def test_rejected_bundle_answers_nothing():
    result = agent_result("p1", QUESTIONS, response(rejected=True, reason="Out of scope"))
    assert result == {
        "pending_id": "p1",
        "rejected": True,
        "reject_reason": "Out of scope",
        "answers": {q["id"]: UNANSWERED for q in QUESTIONS},
    }


def test_rejected_ignores_stray_answers_and_keeps_empty_reason():
    stray = {"question_id": "deploy", "selected_options": ["go"], "custom_text": "x"}
    result = agent_result("p1", QUESTIONS, response(stray, rejected=True))
    assert result["rejected"] is True
    assert result["reject_reason"] == ""
    assert all(entry == UNANSWERED for entry in result["answers"].values())


def test_answers_to_unknown_questions_are_ignored():
    result = agent_result(
        "p1",
        QUESTIONS[:1],
        response({"question_id": "ghost", "selected_options": ["go"], "custom_text": ""}),
    )
    assert result["answers"] == {"deploy": UNANSWERED}


def test_unknown_option_id_stands_for_its_own_label():
    result = agent_result(
        "p1",
        QUESTIONS[:1],
        response({"question_id": "deploy", "selected_options": ["go", "later"]}),
    )
    assert result["answers"]["deploy"]["selected_labels"] == ["Go ahead", "later"]


def test_missing_answer_fields_default():
    result = agent_result("p1", QUESTIONS[:1], response({"question_id": "deploy"}))
    assert result["answers"]["deploy"] == UNANSWERED


def test_response_may_be_a_dict():
    result = agent_result(
        "p9",
        QUESTIONS[:1],
        {"answers": [{"question_id": "deploy", "selected_options": ["go"]}], "rejected": False},
    )
    assert result["pending_id"] == "p9"
    assert result["answers"]["deploy"]["selected_option"] == "go"


def test_keys_are_never_omitted_in_json():
    for result in (
        agent_result("p1", QUESTIONS, response()),
        agent_result("p1", QUESTIONS, response(rejected=True)),
        agent_result(
            "p1", QUESTIONS, response({"question_id": "deploy", "selected_options": ["go"]})
        ),
    ):
        decoded = json.loads(json.dumps(result))
        assert set(decoded) == {"pending_id", "rejected", "reject_reason", "answers"}
        assert set(decoded["answers"]) == {"deploy", "checks", "notes"}
        for entry in decoded["answers"].values():
            assert set(entry) == ENTRY_KEYS


def test_result_does_not_share_lists_with_the_response():
    answer = {"question_id": "deploy", "selected_options": ["go"], "custom_text": ""}
    result = agent_result("p1", QUESTIONS[:1], response(answer))
    result["answers"]["deploy"]["selected_options"].append("wait")
    assert answer["selected_options"] == ["go"]
