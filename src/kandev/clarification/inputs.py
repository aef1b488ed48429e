"""Validated inputs for clarification REST and MCP calls."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, Field, StringConstraints

from kandev.board.inputs import Input, RowId

OptionId = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class AnswerInput(Input):
    # Emptiness, membership and the 2000-character caps are checked against the bundle by
    # clarification.outcome (N6-N8b), which names the offending entry; these bounds only keep
    # absurd payloads out.
    question_id: Annotated[str, StringConstraints(max_length=256)] = ""
    selected_options: list[OptionId] = Field(default_factory=list, max_length=64)
    custom_text: Annotated[str, StringConstraints(max_length=100_000)] = ""


class RespondInput(Input):
    answers: list[AnswerInput] | None = Field(default=None, max_length=64)
    rejected: bool = False
    reject_reason: Annotated[str, StringConstraints(max_length=100_000)] = Field(
        default="", validation_alias=AliasChoices("reject_reason", "reason")
    )


class RequestInput(Input):
    """POST /clarification/request: create a bundle without blocking (baseline path)."""

    session_id: RowId
    task_id: RowId | None = None
    questions: list[Any]
    context: Any = None
    context_paragraphs: Any = None
