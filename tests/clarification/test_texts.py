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


def test_single_question_custom_text_keeps_the_options():
    text = answer_text([DEPLOY], [answer("deploy", "go", custom_text="Only on Friday")], False, "")
    assert text == 'User selected: "Go ahead" (go)\nUser answered: Only on Friday'


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
        'A1: "Go ahead" (go); answered: Ship it after lunch\nA2: (no answer)\nA3: "Europe" (eu)'
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


# --- resume_prompt: every selected option and the text, in every combination (issue 14) ------

NEXT_STEP = {
    "id": "next_step",
    "prompt": "What next?",
    "options": [
        {"option_id": "go_ahead", "label": "Go ahead", "description": "Continue"},
        {"option_id": "stop", "label": "Stop", "description": "Halt"},
    ],
}
LANGS = {
    "id": "langs",
    "prompt": "Which languages?",
    "options": [
        {"option_id": "py", "label": "Python", "description": ""},
        {"option_id": "js", "label": "JavaScript", "description": ""},
        {"option_id": "go", "label": "Go", "description": ""},
    ],
}
ASKED_ONE = 'You previously asked the user: "What next?"\n'
ASKED_TWO = "You previously asked the user:\nQ1: What next?\nQ2: Which languages?\n\n"
CONTINUE = "Please continue with this information."
WITHOUT = "Please continue without this information."


@pytest.mark.parametrize(
    ("questions", "answers", "rejected", "reason", "body"),
    [
        pytest.param(
            [NEXT_STEP],
            [answer("next_step", "go_ahead")],
            False,
            "",
            f'{ASKED_ONE}User selected: "Go ahead" (go_ahead)\n{CONTINUE}',
            id="options-only",
        ),
        pytest.param(
            [NEXT_STEP],
            [answer("next_step", custom_text="both given")],
            False,
            "",
            f"{ASKED_ONE}User answered: both given\n{CONTINUE}",
            id="text-only",
        ),
        pytest.param(
            [NEXT_STEP],
            [answer("next_step", "go_ahead", custom_text="both given")],
            False,
            "",
            f'{ASKED_ONE}User selected: "Go ahead" (go_ahead)\nUser answered: both given\n'
            f"{CONTINUE}",
            id="option-and-text",
        ),
        pytest.param(
            [LANGS],
            [answer("langs", "py", "go", custom_text="and some Rust")],
            False,
            "",
            'You previously asked the user: "Which languages?"\n'
            'User selected: "Python" (py), "Go" (go)\nUser answered: and some Rust\n'
            f"{CONTINUE}",
            id="multi-select-and-text",
        ),
        pytest.param(
            [NEXT_STEP, LANGS],
            [
                answer("next_step", "go_ahead", custom_text="carefully"),
                answer("langs", "py", "js", custom_text="no Go"),
            ],
            False,
            "",
            f'{ASKED_TWO}A1: "Go ahead" (go_ahead); answered: carefully\n'
            f'A2: "Python" (py), "JavaScript" (js); answered: no Go\n{CONTINUE}',
            id="several-questions-both",
        ),
        pytest.param(
            [NEXT_STEP, LANGS],
            [answer("next_step", custom_text="later"), answer("langs", "js")],
            False,
            "",
            f'{ASKED_TWO}A1: later\nA2: "JavaScript" (js)\n{CONTINUE}',
            id="several-questions-text-and-options",
        ),
        pytest.param(
            [NEXT_STEP],
            [],
            True,
            "not now",
            f'The user declined to answer your question: "What next?"\nReason: not now\n{WITHOUT}',
            id="rejected-with-reason",
        ),
        pytest.param(
            [NEXT_STEP, LANGS],
            [],
            True,
            "",
            "The user declined to answer your questions:\nQ1: What next?\nQ2: Which languages?\n"
            f"Reason: No reason provided\n{WITHOUT}",
            id="rejected-without-reason",
        ),
    ],
)
def test_resume_prompt_names_every_option_and_the_text(
    questions: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    rejected: bool,
    reason: str,
    body: str,
) -> None:
    assert resume_prompt(questions, answers, rejected, reason) == f"{RESUME_MARKER}\n{body}"
