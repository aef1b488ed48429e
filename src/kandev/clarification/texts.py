"""Texts the agent reads about a clarification: summaries, answers and the resume prompt.

Formats follow reference clarification-baseline §3.11.1, with one change: where the baseline
printed bare option ids (`[go wait]`), these texts print each option's label with its id
(`"Go ahead" (go), "Wait" (wait)`), so the agent learns what the human chose in words.
Every resume prompt starts with RESUME_MARKER on its own line (the demo agent looks for it).
An answer with both options and text carries both (`User selected: …` then `User answered:
…`; `A1: "Go ahead" (go); answered: …`), as the same-turn tool result does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

RESUME_MARKER = "[kandev:resume]"

NO_SPECIFIC_ANSWER = "User provided no specific answer."
NO_ANSWER_BODY = "(no answer)"
DEFAULT_REJECT_REASON = "No reason provided"

_GO_SHORT_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(s: str) -> str:
    """Go's strconv.Quote: a double-quoted literal; printable Unicode is kept as is.

    Python's str.isprintable matches Go's unicode.IsPrint (letters, marks, numbers,
    punctuation, symbols and the ASCII space) closely enough for ordinary text.
    """
    out = ['"']
    for ch in s:
        short = _GO_SHORT_ESCAPES.get(ch)
        if short is not None:
            out.append(short)
            continue
        if ch.isprintable():
            out.append(ch)
            continue
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Read a field from a dict or from an object with attributes."""
    value = obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)
    return default if value is None else value


def question_summary(questions: Sequence[Any]) -> str:
    """'' for none, the prompt for one, `Q1: …` lines for several."""
    if not questions:
        return ""
    if len(questions) == 1:
        return str(_get(questions[0], "prompt", ""))
    return "\n".join(f"Q{i}: {_get(q, 'prompt', '')}" for i, q in enumerate(questions, 1))


def _labels_by_option_id(options: Iterable[Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for option in options or ():
        option_id = _get(option, "option_id", "")
        if option_id and option_id not in labels:
            labels[option_id] = str(_get(option, "label", ""))
    return labels


def _all_labels(questions: Sequence[Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for question in questions:
        for option_id, label in _labels_by_option_id(_get(question, "options", ())).items():
            labels.setdefault(option_id, label)
    return labels


def format_selected(selected: Sequence[str], labels: Mapping[str, str]) -> str:
    """`"Go ahead" (go), "Wait" (wait)`; an id without a known label prints as `(id)`."""
    parts = []
    for option_id in selected:
        label = labels.get(option_id)
        parts.append(f"{go_quote(label)} ({option_id})" if label else f"({option_id})")
    return ", ".join(parts)


def _answer_body(answer: Any, labels: Mapping[str, str]) -> str:
    """One answer of several: the selected options, the text, or both (nothing is dropped)."""
    custom_text = str(_get(answer, "custom_text", ""))
    selected = list(_get(answer, "selected_options", ()))
    if selected and custom_text:
        return f"{format_selected(selected, labels)}; answered: {custom_text}"
    if selected:
        return format_selected(selected, labels)
    if custom_text:
        return custom_text
    return NO_ANSWER_BODY


def answer_text(
    questions: Sequence[Any], answers: Sequence[Any] | None, rejected: bool, reason: str = ""
) -> str:
    """What the human answered, in the baseline's words (labels added to option ids)."""
    if rejected:
        if reason:
            return f"User declined to answer. Reason: {reason}"
        return "User declined to answer."
    answers = list(answers or ())
    if not answers:
        return NO_SPECIFIC_ANSWER
    questions = list(questions or ())
    fallback_labels = _all_labels(questions)

    def labels_for(question_id: Any, position_question: Any = None) -> dict[str, str]:
        for question in questions:
            if _get(question, "id", "") == question_id:
                return {**fallback_labels, **_labels_by_option_id(_get(question, "options", ()))}
        if position_question is not None:
            own = _labels_by_option_id(_get(position_question, "options", ()))
            return {**fallback_labels, **own}
        return fallback_labels

    if len(questions) <= 1 and len(answers) == 1:
        answer = answers[0]
        only = questions[0] if questions else None
        labels = labels_for(_get(answer, "question_id", ""), only)
        custom_text = _get(answer, "custom_text", "")
        selected = list(_get(answer, "selected_options", ()))
        lines = []
        if selected:  # every selected option, with its label, even when text came too
            lines.append(f"User selected: {format_selected(selected, labels)}")
        if custom_text:
            lines.append(f"User answered: {custom_text}")
        return "\n".join(lines) or NO_SPECIFIC_ANSWER

    by_question_id: dict[Any, Any] = {}
    for answer in answers:
        by_question_id.setdefault(_get(answer, "question_id", ""), answer)
    lines = []
    for i, question in enumerate(questions, 1):
        question_id = _get(question, "id", "")
        if question_id in by_question_id:
            answer = by_question_id[question_id]
            lines.append(f"A{i}: {_answer_body(answer, labels_for(question_id))}")
    if not lines:
        # No answer matched a question id: number the answers by position instead.
        for i, answer in enumerate(answers, 1):
            position_question = questions[i - 1] if i <= len(questions) else None
            labels = labels_for(_get(answer, "question_id", ""), position_question)
            lines.append(f"A{i}: {_answer_body(answer, labels)}")
    return "\n".join(lines)


def human_answer_text(
    questions: Sequence[Any], answers: Sequence[Any] | None, rejected: bool, reason: str = ""
) -> str:
    """The human's answer as a message of the conversation, in the second person:
    `You answered: "Go ahead" (go) — both given`, `You skipped the questions: <reason>`."""
    if rejected:
        return f"You skipped the questions: {reason}" if reason else "You skipped the questions."
    questions = list(questions or ())
    labels = _all_labels(questions)
    by_id = {_get(q, "id", ""): q for q in questions}

    def body(answer: Any) -> str:
        own = by_id.get(_get(answer, "question_id", ""))
        own_labels = {**labels, **_labels_by_option_id(_get(own, "options", ()))} if own else labels
        selected = list(_get(answer, "selected_options", ()))
        custom_text = str(_get(answer, "custom_text", ""))
        if selected and custom_text:
            return f"{format_selected(selected, own_labels)} — {custom_text}"
        if selected:
            return format_selected(selected, own_labels)
        return go_quote(custom_text) if custom_text else NO_ANSWER_BODY

    answers = list(answers or ())
    if not answers:
        return "You answered."
    if len(answers) == 1:
        return f"You answered: {body(answers[0])}"
    return "You answered:\n" + "\n".join(f"A{i}: {body(a)}" for i, a in enumerate(answers, 1))


def resume_prompt(
    questions: Sequence[Any], answers: Sequence[Any] | None, rejected: bool, reason: str = ""
) -> str:
    """The prompt that resumes an agent whose ask was answered after its call ended."""
    summary = question_summary(questions)
    multi = "\n" in summary
    if rejected:
        why = reason or DEFAULT_REJECT_REASON
        if multi:
            body = (
                f"The user declined to answer your questions:\n{summary}\nReason: {why}\n"
                "Please continue without this information."
            )
        else:
            body = (
                f"The user declined to answer your question: {go_quote(summary)}\n"
                f"Reason: {why}\nPlease continue without this information."
            )
    else:
        answered = answer_text(questions, answers, rejected=False, reason=reason)
        if multi:
            body = (
                f"You previously asked the user:\n{summary}\n\n{answered}\n"
                "Please continue with this information."
            )
        else:
            body = (
                f"You previously asked the user: {go_quote(summary)}\n{answered}\n"
                "Please continue with this information."
            )
    return f"{RESUME_MARKER}\n{body}"
