"""Validated inputs for session operations (shared by REST and MCP)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints

from kandev.board.inputs import Input, RowId

PromptText = Annotated[str, StringConstraints(min_length=1, max_length=100_000)]


class SessionCreate(Input):
    agent_profile_id: RowId | None = None
    prompt: PromptText | None = None


class PromptInput(Input):
    text: PromptText


class StopInput(Input):
    state: Literal["COMPLETED", "CANCELLED", "FAILED"] = "CANCELLED"


class MessagePageQuery(Input):
    # Query strings are text: numbers are parsed from them, so not strict here.
    model_config = ConfigDict(strict=False, extra="forbid")

    limit: int = Field(default=100, ge=1, le=500)
    before: RowId | None = None
    after: RowId | None = None
    sort: Literal["asc", "desc"] = "asc"
