"""Validation and normalization of an ask: the questions an agent puts to a human.

Rules: reference clarification-baseline §2.2 plus the stricter agent-facing checks (1..4
questions, a prompt each, 2..6 options each with a label and a description), and bounded
lengths that are rejected rather than truncated. Every error is a ValidationFailed whose field
is the JSON path (0-based, `questions[1].options[0].label`) and whose message names the
question (1-based), so an agent can correct its call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kandev.clarification.texts import go_quote
from kandev.errors import ValidationFailed

MIN_QUESTIONS = 1
MAX_QUESTIONS = 4
MIN_OPTIONS = 2
MAX_OPTIONS = 6
MAX_ID_CHARS = 64
MAX_TITLE_CHARS = 200
MAX_PROMPT_CHARS = 2000
MAX_LABEL_CHARS = 200
MAX_DESCRIPTION_CHARS = 1000
MAX_CONTEXT_CHARS = 20000

_ARRAY_HINT = (
    "questions must be an array of 1 to 4 question objects, each "
    "{id?, title?, prompt, options: [{option_id?, label, description}]}"
)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _optional_id(value: Any, field: str, what: str, default: str) -> str:
    """An id the caller may leave out (absent, null or blank → the positional default)."""
    if _blank(value):
        return default
    if not isinstance(value, str):
        raise ValidationFailed(field, f"{what} must be a string")
    if len(value) > MAX_ID_CHARS:
        raise ValidationFailed(field, f"{what} must be at most {MAX_ID_CHARS} characters")
    return value


def _required_text(value: Any, field: str, missing: str, what: str, limit: int) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValidationFailed(field, missing)
    if not isinstance(value, str):
        raise ValidationFailed(field, f"{what} must be a string")
    if len(value) > limit:
        raise ValidationFailed(field, f"{what} must be at most {limit} characters")
    return value


def _normalize_option(raw: Any, qi: int, oi: int, seen: set[str]) -> dict[str, str]:
    base = f"questions[{qi}].options[{oi}]"
    where = f"question {qi + 1} option {oi + 1}"
    if not isinstance(raw, Mapping):
        raise ValidationFailed(
            base, f"{where} must be an object {{option_id?, label, description}}"
        )
    option_id = _optional_id(
        raw.get("option_id"), f"{base}.option_id", f"{where} 'option_id'", f"q{qi + 1}_opt{oi + 1}"
    )
    if option_id in seen:
        raise ValidationFailed(
            f"{base}.option_id", f"question {qi + 1} has duplicate option id {go_quote(option_id)}"
        )
    seen.add(option_id)
    label = _required_text(
        raw.get("label"),
        f"{base}.label",
        f"{where} is missing required 'label' (1-5 words describing the choice)",
        f"{where} 'label'",
        MAX_LABEL_CHARS,
    )
    description = _required_text(
        raw.get("description"),
        f"{base}.description",
        f"{where} is missing required 'description' (an explanation of what this option means)",
        f"{where} 'description'",
        MAX_DESCRIPTION_CHARS,
    )
    return {"option_id": option_id, "label": label, "description": description}


def _normalize_question(raw: Any, qi: int, seen_ids: set[str]) -> dict[str, Any]:
    base = f"questions[{qi}]"
    n = qi + 1
    if not isinstance(raw, Mapping):
        raise ValidationFailed(
            base,
            f"question {n} must be an object {{id?, title?, prompt, options}}",
        )
    question_id = _optional_id(raw.get("id"), f"{base}.id", f"question {n} 'id'", f"q{n}")
    if question_id in seen_ids:
        # Auto ids can collide with explicit ones (explicit "q2" on question 1, none on 2).
        raise ValidationFailed(f"{base}.id", f"duplicate question id {go_quote(question_id)}")
    seen_ids.add(question_id)

    title = raw.get("title")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise ValidationFailed(f"{base}.title", f"question {n} 'title' must be a string")
    if len(title) > MAX_TITLE_CHARS:
        raise ValidationFailed(
            f"{base}.title", f"question {n} 'title' must be at most {MAX_TITLE_CHARS} characters"
        )

    prompt = _required_text(
        raw.get("prompt"),
        f"{base}.prompt",
        f"question {n} is missing required 'prompt'",
        f"question {n} 'prompt'",
        MAX_PROMPT_CHARS,
    )

    raw_options = raw.get("options")
    field = f"{base}.options"
    if raw_options is None:
        raise ValidationFailed(
            field, f"question {n} is missing required 'options' (2 to 6 choices)"
        )
    if not isinstance(raw_options, list):
        raise ValidationFailed(field, f"question {n} 'options' must be an array of 2 to 6 options")
    if len(raw_options) < MIN_OPTIONS:
        raise ValidationFailed(field, f"question {n} must have at least {MIN_OPTIONS} options")
    if len(raw_options) > MAX_OPTIONS:
        raise ValidationFailed(field, f"question {n} must have at most {MAX_OPTIONS} options")
    seen_options: set[str] = set()
    options = [_normalize_option(o, qi, oi, seen_options) for oi, o in enumerate(raw_options)]
    return {"id": question_id, "title": title, "prompt": prompt, "options": options}


def _normalize_context(context: Any, context_paragraphs: Any) -> str:
    if context_paragraphs is not None:
        if not isinstance(context_paragraphs, list):
            raise ValidationFailed("context_paragraphs", "must be an array of strings")
        for i, paragraph in enumerate(context_paragraphs):
            if not isinstance(paragraph, str):
                raise ValidationFailed(f"context_paragraphs[{i}]", "must be a string")
        if context_paragraphs:
            # Paragraphs, when given, override `context`; kept verbatim (no unescaping).
            text = "\n\n".join(context_paragraphs)
            if len(text) > MAX_CONTEXT_CHARS:
                raise ValidationFailed(
                    "context_paragraphs",
                    f"context must be at most {MAX_CONTEXT_CHARS} characters in total",
                )
            return text
    if context is None:
        return ""
    if not isinstance(context, str):
        raise ValidationFailed("context", "must be a string")
    if len(context) > MAX_CONTEXT_CHARS:
        raise ValidationFailed("context", f"must be at most {MAX_CONTEXT_CHARS} characters")
    return context


def normalize_questions(
    raw_questions: Any, context: Any = None, context_paragraphs: Any = None
) -> tuple[list[dict[str, Any]], str]:
    """Validate an ask; return fresh plain dicts and the context text.

    Each question: {id, title, prompt, options: [{option_id, label, description}]}; missing
    ids become `q{i}` / `q{i}_opt{j}` (1-based positions). Unknown keys are dropped; the
    input is not mutated.
    """
    if raw_questions is None:
        raise ValidationFailed(
            "questions",
            "questions is required (flat prompt/options payloads are not supported: "
            "put them inside a 'questions' array)",
        )
    if isinstance(raw_questions, Mapping):
        if "prompt" in raw_questions or "options" in raw_questions:
            raise ValidationFailed(
                "questions",
                "a single question object is not accepted (legacy flat prompt/options "
                "payloads are not supported): wrap it in an array",
            )
        raise ValidationFailed("questions", _ARRAY_HINT)
    if not isinstance(raw_questions, list):
        raise ValidationFailed("questions", _ARRAY_HINT)
    if len(raw_questions) < MIN_QUESTIONS:
        raise ValidationFailed("questions", "questions must contain at least 1 question")
    if len(raw_questions) > MAX_QUESTIONS:
        raise ValidationFailed(
            "questions", f"questions must contain at most {MAX_QUESTIONS} questions"
        )
    seen_ids: set[str] = set()
    questions = [_normalize_question(q, i, seen_ids) for i, q in enumerate(raw_questions)]
    return questions, _normalize_context(context, context_paragraphs)


def _text(value: Any) -> Any:
    return "" if value is None else value


def questions_equal(a: Any, b: Any) -> bool:
    """Same ask for dedup: same count; per question the same prompt and the same options
    (option_id, label, description, in order). Titles, ids and context are ignored."""
    a = list(a or ())
    b = list(b or ())
    if len(a) != len(b):
        return False
    for qa, qb in zip(a, b, strict=True):
        if _text(qa.get("prompt")) != _text(qb.get("prompt")):
            return False
        oa = list(qa.get("options") or ())
        ob = list(qb.get("options") or ())
        if len(oa) != len(ob):
            return False
        for x, y in zip(oa, ob, strict=True):
            for key in ("option_id", "label", "description"):
                if _text(x.get(key)) != _text(y.get(key)):
                    return False
    return True
