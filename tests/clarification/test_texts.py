"""Summary, answer and resume prompt texts (reference §3.11.1, labels printed with ids)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kandev.clarification.texts import (
    RESUME_MARKER,
    answer_text,
    go_quote,
    question_summary,
    resume_prompt,
)

DEPLOY = {
    "id": "deploy",
    "title": "Deploy",
    "prompt": "Deploy now?",
    "options": [
        {"option_id": "go", "label": "Go ahead", "description": "Deploy now"},
        {"option_id": "wait", "label": "Wait", "description": "Hold"},
    ],
}
DB = {
    "id": "db",
    "title": "DB",
    "prompt": "Which database?",
    "options": [
        {"option_id": "pg", "label": "PostgreSQL", "description": "Server"},
        {"option_id": "sqlite", "label": "SQLite", "description": "File"},
    ],
}
REGION = {
    "id": "region",
    "title": "Region",
    "prompt": "Which region?",
    "options": [
        {"option_id": "eu", "label": "Europe", "description": "eu-west"},
        {"option_id": "us", "label": "United States", "description": "us-east"},
    ],
}


def answer(question_id: str, *selected: str, custom_text: str = "") -> dict[str, Any]:
    return {
        "question_id": question_id,
        "selected_options": list(selected),
        "custom_text": custom_text,
    }


# --- go_quote --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("Deploy now?", '"Deploy now?"'),
        ("", '""'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("two\nlines\ttab\r", '"two\\nlines\\ttab\\r"'),
        ("\a\b\f\v", '"\\a\\b\\f\\v"'),
        ("nul\x00esc\x1b del\x7f", '"nul\\x00esc\\x1b del\\x7f"'),
        ("héllo wörld ✓ 日本", '"héllo wörld ✓ 日本"'),
        ("emoji 🚀", '"emoji 🚀"'),
        ("nbsp\u00a0zw\u200b", '"nbsp\\u00a0zw\\u200b"'),
        ("line\u2028sep", '"line\\u2028sep"'),
        ("private\U000f0000", '"private\\U000f0000"'),
        ("\x85", '"\\u0085"'),
    ],
)
def test_go_quote(text: str, quoted: str):
    assert go_quote(text) == quoted


# --- question_summary ------------------------------------------------------------------------


def test_summary_of_none_one_and_several():
    assert question_summary([]) == ""
    assert question_summary([DEPLOY]) == "Deploy now?"
    assert question_summary([DEPLOY, DB, REGION]) == (
        "Q1: Deploy now?\nQ2: Which database?\nQ3: Which region?"
    )


# --- answer_text -----------------------------------------------------------------------------


def test_rejected_with_and_without_reason():
    assert answer_text([DEPLOY], [], True, "not now") == "User declined to answer. Reason: not now"
    assert answer_text([DEPLOY], [], True, "") == "User declined to answer."


def test_no_answers():
    assert answer_text([DEPLOY], [], False, "") == "User provided no specific answer."
    assert answer_text([DEPLOY], None, False, "") == "User provided no specific answer."


def test_single_question_selected_options_print_labels_with_ids():
    assert answer_text([DEPLOY], [answer("deploy", "go")], False, "") == (
        'User selected: "Go ahead" (go)'
    )
    assert answer_text([DEPLOY], [answer("deploy", "go", "wait")], False, "") == (
        'User selected: "Go ahead" (go), "Wait" (wait)'
    )


def test_single_question_custom_text_hides_options():
    text = answer_text([DEPLOY], [answer("deploy", "go", custom_text="Only on Friday")], False, "")
    assert text == "User answered: Only on Friday"


def test_single_question_empty_answer():
    assert answer_text([DEPLOY], [answer("deploy")], False, "") == (
        "User provided no specific answer."
    )


def test_single_format_ignores_the_question_id():
    # ≤1 question and exactly one answer: the answer is shown even if its id doesn't match.
    assert answer_text([DEPLOY], [answer("other", "wait")], False, "") == (
        'User selected: "Wait" (wait)'
    )


def test_unknown_option_id_prints_the_id_alone():
    assert answer_text([DEPLOY], [answer("deploy", "go", "later")], False, "") == (
        'User selected: "Go ahead" (go), (later)'
    )


def test_label_is_go_quoted():
    question = {
        "id": "q1",
        "prompt": "Name?",
        "options": [
            {"option_id": "a", "label": 'The "big" one', "description": "x"},
            {"option_id": "b", "label": "Small", "description": "y"},
        ],
    }
    assert answer_text([question], [answer("q1", "a")], False, "") == (
        'User selected: "The \\"big\\" one" (a)'
    )


def test_multi_question_answers_in_question_order():
    answers = [answer("region", "us"), answer("deploy", "go", "wait")]
    assert answer_text([DEPLOY, DB, REGION], answers, False, "") == (
        'A1: "Go ahead" (go), "Wait" (wait)\nA3: "United States" (us)'
    )


def test_multi_question_custom_text_and_no_answer():
    answers = [
        answer("deploy", "go", custom_text="Ship it after lunch"),
        answer("db"),
        answer("region", "eu"),
    ]
    assert answer_text([DEPLOY, DB, REGION], answers, False, "") == (
        'A1: Ship it after lunch\nA2: (no answer)\nA3: "Europe" (eu)'
    )


def test_one_question_several_answers_uses_the_multi_format():
    answers = [answer("deploy", "wait"), answer("stray", "go")]
    assert answer_text([DEPLOY], answers, False, "") == 'A1: "Wait" (wait)'


def test_positional_fallback_when_no_question_id_matches():
    answers = [answer("x1", "wait"), answer("x2", custom_text="MySQL"), answer("x3")]
    assert answer_text([DEPLOY, DB], answers, False, "") == (
        'A1: "Wait" (wait)\nA2: MySQL\nA3: (no answer)'
    )


def test_answers_may_be_objects_with_attributes():
    item = SimpleNamespace(question_id="deploy", selected_options=["go"], custom_text=None)
    assert answer_text([DEPLOY], [item], False, "") == 'User selected: "Go ahead" (go)'


# --- resume_prompt ---------------------------------------------------------------------------


def test_marker_constant():
    assert RESUME_MARKER == "[kandev:resume]"


def test_resume_single_answered():
    assert resume_prompt([DEPLOY], [answer("deploy", "go")], False, "") == (
        "[kandev:resume]\n"
        'You previously asked the user: "Deploy now?"\n'
        'User selected: "Go ahead" (go)\n'
        "Please continue with this information."
    )


def test_resume_single_custom_text():
    assert resume_prompt([DEPLOY], [answer("deploy", custom_text="Tomorrow")], False, "") == (
        "[kandev:resume]\n"
        'You previously asked the user: "Deploy now?"\n'
        "User answered: Tomorrow\n"
        "Please continue with this information."
    )


def test_resume_single_no_answer():
    assert resume_prompt([DEPLOY], [], False, "") == (
        "[kandev:resume]\n"
        'You previously asked the user: "Deploy now?"\n'
        "User provided no specific answer.\n"
        "Please continue with this information."
    )


def test_resume_single_rejected():
    assert resume_prompt([DEPLOY], [], True, "out of scope") == (
        "[kandev:resume]\n"
        'The user declined to answer your question: "Deploy now?"\n'
        "Reason: out of scope\n"
        "Please continue without this information."
    )


def test_resume_rejected_default_reason():
    assert resume_prompt([DEPLOY], [], True, "") == (
        "[kandev:resume]\n"
        'The user declined to answer your question: "Deploy now?"\n'
        "Reason: No reason provided\n"
        "Please continue without this information."
    )


def test_resume_multi_answered():
    answers = [answer("deploy", "wait"), answer("db", custom_text="Whatever is cheapest")]
    assert resume_prompt([DEPLOY, DB], answers, False, "") == (
        "[kandev:resume]\n"
        "You previously asked the user:\n"
        "Q1: Deploy now?\n"
        "Q2: Which database?\n"
        "\n"
        'A1: "Wait" (wait)\n'
        "A2: Whatever is cheapest\n"
        "Please continue with this information."
    )


def test_resume_multi_rejected():
    assert resume_prompt([DEPLOY, DB], [], True, "busy") == (
        "[kandev:resume]\n"
        "The user declined to answer your questions:\n"
        "Q1: Deploy now?\n"
        "Q2: Which database?\n"
        "Reason: busy\n"
        "Please continue without this information."
    )


def test_single_prompt_with_a_newline_uses_the_multi_layout():
    question = {**DEPLOY, "prompt": "Deploy now?\nIt is Friday."}
    assert resume_prompt([question], [answer("deploy", "go")], False, "") == (
        "[kandev:resume]\n"
        "You previously asked the user:\n"
        "Deploy now?\nIt is Friday.\n"
        "\n"
        'User selected: "Go ahead" (go)\n'
        "Please continue with this information."
    )


def test_single_prompt_is_go_quoted():
    question = {**DEPLOY, "prompt": 'Use "main"?\tok'}
    assert resume_prompt([question], [answer("deploy", "go")], False, "").splitlines()[1] == (
        'You previously asked the user: "Use \\"main\\"?\\tok"'
    )
