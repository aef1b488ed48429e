"""Validation and normalization of an ask (reference §2.2 plus the agent-facing rules)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kandev.clarification.questions import normalize_questions, questions_equal
from kandev.errors import ValidationFailed


def option(label: str = "Yes", description: str = "Do it", **extra: Any) -> dict[str, Any]:
    return {"label": label, "description": description, **extra}


def question(prompt: str = "Proceed?", n_options: int = 2, **extra: Any) -> dict[str, Any]:
    options = [option(f"Choice {j}", f"Means {j}") for j in range(1, n_options + 1)]
    return {"prompt": prompt, "options": options, **extra}


def fails(raw: Any, field: str, message: str, **kwargs: Any) -> None:
    with pytest.raises(ValidationFailed) as info:
        normalize_questions(raw, **kwargs)
    assert info.value.field == field
    assert info.value.message == f"{field}: {message}"


# --- normalization ---------------------------------------------------------------------------


def test_assigns_positional_ids_and_returns_plain_dicts():
    questions, context = normalize_questions([question("First?"), question("Second?", 3)])
    assert context == ""
    assert questions == [
        {
            "id": "q1",
            "title": "",
            "prompt": "First?",
            "options": [
                {"option_id": "q1_opt1", "label": "Choice 1", "description": "Means 1"},
                {"option_id": "q1_opt2", "label": "Choice 2", "description": "Means 2"},
            ],
        },
        {
            "id": "q2",
            "title": "",
            "prompt": "Second?",
            "options": [
                {"option_id": "q2_opt1", "label": "Choice 1", "description": "Means 1"},
                {"option_id": "q2_opt2", "label": "Choice 2", "description": "Means 2"},
                {"option_id": "q2_opt3", "label": "Choice 3", "description": "Means 3"},
            ],
        },
    ]


def test_keeps_given_ids_and_title_and_ignores_unknown_keys():
    raw = [
        {
            "id": "deploy",
            "title": "Deploy",
            "prompt": "Deploy now?",
            "colour": "red",
            "options": [
                option("Go ahead", "Deploy now", option_id="go", weight=3),
                option("Wait", "Hold until tomorrow", option_id="wait"),
            ],
        }
    ]
    questions, _ = normalize_questions(raw)
    assert questions == [
        {
            "id": "deploy",
            "title": "Deploy",
            "prompt": "Deploy now?",
            "options": [
                {"option_id": "go", "label": "Go ahead", "description": "Deploy now"},
                {"option_id": "wait", "label": "Wait", "description": "Hold until tomorrow"},
            ],
        }
    ]


def test_ids_are_positional_not_id_based():
    raw = [question(id="alpha"), question()]
    questions, _ = normalize_questions(raw)
    assert [q["id"] for q in questions] == ["alpha", "q2"]
    assert questions[1]["options"][0]["option_id"] == "q2_opt1"


def test_mixed_option_ids_default_by_position():
    raw = [
        {
            "prompt": "Pick",
            "options": [option("A", "a", option_id="a"), option("B", "b"), option("C", "c")],
        }
    ]
    questions, _ = normalize_questions(raw)
    assert [o["option_id"] for o in questions[0]["options"]] == ["a", "q1_opt2", "q1_opt3"]


def test_null_and_empty_ids_get_defaults():
    raw = [question(id=None), question(id="")]
    raw[0]["options"][0]["option_id"] = None
    raw[1]["options"][1]["option_id"] = ""
    questions, _ = normalize_questions(raw)
    assert [q["id"] for q in questions] == ["q1", "q2"]
    assert questions[0]["options"][0]["option_id"] == "q1_opt1"
    assert questions[1]["options"][1]["option_id"] == "q2_opt2"


def test_input_is_not_mutated():
    raw = [question(), question(id="x")]
    before = copy.deepcopy(raw)
    normalize_questions(raw)
    assert raw == before


def test_normalizing_normalized_questions_is_identity():
    questions, _ = normalize_questions([question("A?"), question("B?", 4, id="b")])
    again, _ = normalize_questions(questions)
    assert again == questions


def test_bounds_are_accepted_at_the_limit():
    raw = [
        {
            "id": "i" * 64,
            "title": "t" * 200,
            "prompt": "p" * 2000,
            "options": [
                {"option_id": "o" * 64, "label": "l" * 200, "description": "d" * 1000},
                option(),
            ],
        },
        question(),
        question(),
        question(n_options=6),
    ]
    questions, context = normalize_questions(raw, context="c" * 20000)
    assert len(questions) == 4
    assert len(context) == 20000


# --- context -----------------------------------------------------------------------------


def test_context_is_preserved_verbatim():
    text = "Line one\\nstill line one\n\n  indented\ttab "
    _, context = normalize_questions([question()], context=text)
    assert context == text


def test_context_paragraphs_override_context_and_join_with_blank_line():
    _, context = normalize_questions(
        [question()], context="ignored", context_paragraphs=["First.", "Second\\n.", "Third."]
    )
    assert context == "First.\n\nSecond\\n.\n\nThird."


def test_empty_context_paragraphs_fall_back_to_context():
    _, context = normalize_questions([question()], context="kept", context_paragraphs=[])
    assert context == "kept"


def test_missing_context_is_empty():
    _, context = normalize_questions([question()], context=None, context_paragraphs=None)
    assert context == ""


def test_context_errors():
    fails([question()], "context", "must be a string", context=5)
    fails([question()], "context", "must be at most 20000 characters", context="c" * 20001)
    fails([question()], "context_paragraphs", "must be an array of strings", context_paragraphs="x")
    fails([question()], "context_paragraphs[1]", "must be a string", context_paragraphs=["a", 2])
    fails(
        [question()],
        "context_paragraphs",
        "context must be at most 20000 characters in total",
        context_paragraphs=["a" * 10000, "b" * 9999],
    )


# --- the questions array -------------------------------------------------------------------


def test_question_count_bounds():
    fails([], "questions", "questions must contain at least 1 question")
    fails([question()] * 5, "questions", "questions must contain at most 4 questions")


def test_questions_must_be_an_array():
    with pytest.raises(ValidationFailed) as info:
        normalize_questions("Proceed?")
    assert info.value.field == "questions"
    assert "array of 1 to 4 question objects" in info.value.message


def test_legacy_flat_payloads_are_rejected():
    # The whole ask with top-level prompt/options: no `questions` at all.
    with pytest.raises(ValidationFailed) as info:
        normalize_questions(None)
    assert info.value.field == "questions"
    assert "flat prompt/options payloads are not supported" in info.value.message
    # A single question object where the array belongs.
    with pytest.raises(ValidationFailed) as info:
        normalize_questions({"prompt": "Proceed?", "options": [option(), option()]})
    assert info.value.field == "questions"
    assert "legacy flat prompt/options payloads are not supported" in info.value.message


def test_each_question_must_be_an_object():
    fails(
        [question(), "Proceed?"],
        "questions[1]",
        "question 2 must be an object {id?, title?, prompt, options}",
    )


# --- per question ----------------------------------------------------------------------------


def test_missing_prompt_names_the_question():
    fails(
        [{"options": [option(), option()]}],
        "questions[0].prompt",
        "question 1 is missing required 'prompt'",
    )
    fails(
        [question(), question(prompt="")],
        "questions[1].prompt",
        "question 2 is missing required 'prompt'",
    )
    fails(
        [question(prompt="   ")], "questions[0].prompt", "question 1 is missing required 'prompt'"
    )


def test_prompt_type_and_length():
    fails([question(prompt=7)], "questions[0].prompt", "question 1 'prompt' must be a string")
    fails(
        [question(), question(prompt="p" * 2001)],
        "questions[1].prompt",
        "question 2 'prompt' must be at most 2000 characters",
    )


def test_duplicate_question_ids():
    fails(
        [question(id="q1"), question(), question(id="q1")],
        "questions[2].id",
        'duplicate question id "q1"',
    )


def test_auto_id_can_collide_with_explicit_id():
    fails([question(id="q2"), question()], "questions[1].id", 'duplicate question id "q2"')


def test_duplicate_id_is_go_quoted():
    fails(
        [question(id='a"b'), question(id='a"b')],
        "questions[1].id",
        'duplicate question id "a\\"b"',
    )


def test_question_id_type_and_length():
    fails([question(id=3)], "questions[0].id", "question 1 'id' must be a string")
    fails(
        [question(id="i" * 65)], "questions[0].id", "question 1 'id' must be at most 64 characters"
    )


def test_title_type_and_length():
    fails([question(title=["x"])], "questions[0].title", "question 1 'title' must be a string")
    fails(
        [question(title="t" * 201)],
        "questions[0].title",
        "question 1 'title' must be at most 200 characters",
    )


def test_option_count_bounds():
    fails(
        [question(), question(n_options=1)],
        "questions[1].options",
        "question 2 must have at least 2 options",
    )
    fails(
        [question(n_options=0)], "questions[0].options", "question 1 must have at least 2 options"
    )
    fails([question(n_options=7)], "questions[0].options", "question 1 must have at most 6 options")


def test_options_required_and_must_be_an_array():
    fails(
        [{"prompt": "Proceed?"}],
        "questions[0].options",
        "question 1 is missing required 'options' (2 to 6 choices)",
    )
    fails(
        [{"prompt": "Proceed?", "options": "yes/no"}],
        "questions[0].options",
        "question 1 'options' must be an array of 2 to 6 options",
    )


# --- per option ------------------------------------------------------------------------------


def test_option_must_be_an_object():
    fails(
        [{"prompt": "P", "options": [option(), "No"]}],
        "questions[0].options[1]",
        "question 1 option 2 must be an object {option_id?, label, description}",
    )


def test_option_needs_label_and_description():
    fails(
        [question(), {"prompt": "P", "options": [option(), {"description": "d"}]}],
        "questions[1].options[1].label",
        "question 2 option 2 is missing required 'label' (1-5 words describing the choice)",
    )
    fails(
        [{"prompt": "P", "options": [{"label": "Yes", "description": ""}, option()]}],
        "questions[0].options[0].description",
        "question 1 option 1 is missing required 'description' "
        "(an explanation of what this option means)",
    )


def test_option_field_types_and_lengths():
    fails(
        [{"prompt": "P", "options": [option(label=1), option()]}],
        "questions[0].options[0].label",
        "question 1 option 1 'label' must be a string",
    )
    fails(
        [{"prompt": "P", "options": [option(label="l" * 201), option()]}],
        "questions[0].options[0].label",
        "question 1 option 1 'label' must be at most 200 characters",
    )
    fails(
        [{"prompt": "P", "options": [option(), option(description="d" * 1001)]}],
        "questions[0].options[1].description",
        "question 1 option 2 'description' must be at most 1000 characters",
    )
    fails(
        [{"prompt": "P", "options": [option(option_id=1), option()]}],
        "questions[0].options[0].option_id",
        "question 1 option 1 'option_id' must be a string",
    )
    fails(
        [{"prompt": "P", "options": [option(option_id="o" * 65), option()]}],
        "questions[0].options[0].option_id",
        "question 1 option 1 'option_id' must be at most 64 characters",
    )


def test_duplicate_option_ids_within_a_question():
    fails(
        [{"prompt": "P", "options": [option(option_id="x"), option(option_id="x")]}],
        "questions[0].options[1].option_id",
        'question 1 has duplicate option id "x"',
    )
    # An explicit id equal to a later default collides too.
    fails(
        [{"prompt": "P", "options": [option(option_id="q1_opt2"), option()]}],
        "questions[0].options[1].option_id",
        'question 1 has duplicate option id "q1_opt2"',
    )


def test_same_option_ids_in_different_questions_are_fine():
    raw = [
        {"prompt": "A", "options": [option(option_id="yes"), option(option_id="no")]},
        {"prompt": "B", "options": [option(option_id="yes"), option(option_id="no")]},
    ]
    questions, _ = normalize_questions(raw)
    assert [o["option_id"] for o in questions[1]["options"]] == ["yes", "no"]


def test_first_error_wins_in_question_order():
    fails(
        [question(prompt=""), question(n_options=1)],
        "questions[0].prompt",
        "question 1 is missing required 'prompt'",
    )


def test_validation_failed_message_joins_field_and_message():
    with pytest.raises(ValidationFailed) as info:
        normalize_questions([question(), question(n_options=1)])
    assert str(info.value) == "questions[1].options: question 2 must have at least 2 options"


# --- questions_equal -------------------------------------------------------------------------


def normalized(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return normalize_questions(raw)[0]


def test_equal_ignores_title_and_question_id():
    a = normalized([question("Deploy?", id="a", title="One")])
    b = normalized([question("Deploy?", id="b", title="Two")])
    assert questions_equal(a, b)


def test_unequal_on_prompt_count_and_options():
    base = normalized([question("Deploy?"), question("Now?")])
    assert not questions_equal(base, normalized([question("Deploy?")]))
    assert not questions_equal(base, normalized([question("Deploy?"), question("Later?")]))
    assert not questions_equal(base, normalized([question("Deploy?"), question("Now?", 3)]))
    changed = copy.deepcopy(base)
    changed[1]["options"][0]["label"] = "Other"
    assert not questions_equal(base, changed)
    changed = copy.deepcopy(base)
    changed[0]["options"][1]["description"] = "Other"
    assert not questions_equal(base, changed)
    changed = copy.deepcopy(base)
    changed[0]["options"][0]["option_id"] = "other"
    assert not questions_equal(base, changed)


def test_equal_for_identical_asks():
    assert questions_equal(
        normalized([question("A?"), question("B?", 3)]),
        normalized([question("A?"), question("B?", 3)]),
    )
    assert questions_equal([], [])
