"""Validation (N6-N8b, L16) and normalization (N3a) of an answer to a bundle.

Runs before the claim, so a malformed request never resolves anything and a malformed request
against an already-resolved bundle gets the same error it would get against an active one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kandev.errors import ValidationFailed

MAX_TEXT_RUNES = 2000  # N8b: counted in code points (Python str length), not bytes


@dataclass(frozen=True)
class Outcome:
    """A normalized outcome, ready for the claim."""

    rejected: bool
    reject_reason: str
    answers: list[dict[str, Any]]  # bundle order, options in question order, trimmed text

    @property
    def status(self) -> str:
        return "rejected" if self.rejected else "answered"

    def responses(self) -> dict[str, dict[str, Any]] | None:
        """P1a: keyed by question_id for an answer, None for a rejection."""
        return None if self.rejected else {a["question_id"]: a for a in self.answers}


def validate_outcome(
    questions: list[dict[str, Any]],
    answers: list[dict[str, Any]] | None,
    rejected: bool,
    reject_reason: str,
) -> Outcome:
    """`questions` = one entry per clarification row, in bundle order (D2): {id, options}."""
    # L16: a row without a question_id can never be claimed; say so instead of a 500.
    if not questions or any(not q.get("id") for q in questions):
        raise ValidationFailed(
            "pending_id",
            "this clarification has a question without a question_id and cannot be resolved",
        )
    if len(reject_reason) > MAX_TEXT_RUNES:
        raise ValidationFailed("reject_reason", f"must be at most {MAX_TEXT_RUNES} characters")
    answers = answers or []
    if rejected:
        if answers:
            raise ValidationFailed("answers", "must be empty when rejected is true")
        return Outcome(True, reject_reason.strip(), [])
    if len(answers) != len(questions):
        raise ValidationFailed(
            "answers", f"must contain exactly one entry per question ({len(questions)})"
        )
    by_id = {q["id"]: q for q in questions}
    seen: dict[str, dict[str, Any]] = {}
    for i, answer in enumerate(answers):
        qid = answer.get("question_id") or ""
        if not qid:
            raise ValidationFailed(f"answers[{i}].question_id", "must not be empty")
        if qid not in by_id:
            raise ValidationFailed(f"answers[{i}].question_id", f"unknown question id {qid!r}")
        if qid in seen:
            raise ValidationFailed(f"answers[{i}].question_id", f"duplicate answer for {qid!r}")
        option_ids = [o.get("option_id") for o in by_id[qid].get("options") or []]
        selected = answer.get("selected_options") or []
        for option in selected:
            if option not in option_ids:
                raise ValidationFailed(
                    f"answers[{i}].selected_options", f"unknown option id {option!r} for {qid!r}"
                )
        custom = answer.get("custom_text") or ""
        if len(custom) > MAX_TEXT_RUNES:
            raise ValidationFailed(
                f"answers[{i}].custom_text", f"must be at most {MAX_TEXT_RUNES} characters"
            )
        chosen = set(selected)
        seen[qid] = {
            "question_id": qid,
            "selected_options": [o for o in option_ids if o in chosen],  # N3a rule 2
            "custom_text": custom.strip(),  # N3a rule 3, after the length check
        }
    return Outcome(False, "", [seen[q["id"]] for q in questions])  # N3a rule 1
