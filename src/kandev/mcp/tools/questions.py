"""Question tools. ask_user_question_kandev is for session agents only (never external)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Annotated, Any

from pydantic import AliasChoices, ConfigDict, Field, StringConstraints, WithJsonSchema

from kandev.clarification import questions as q
from kandev.clarification.inputs import AnswerInput
from kandev.mcp.tools.base import AGENT, EXTERNAL, ToolArgs, ToolContext, ToolSpec

OPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One choice the user can pick.",
    "properties": {
        "option_id": {
            "type": "string",
            "maxLength": q.MAX_ID_CHARS,
            "description": "Stable id of the option (default q<N>_opt<M>, 1-based).",
        },
        "label": {
            "type": "string",
            "maxLength": q.MAX_LABEL_CHARS,
            "description": "The choice in 1-5 words, shown on the button.",
        },
        "description": {
            "type": "string",
            "maxLength": q.MAX_DESCRIPTION_CHARS,
            "description": "What choosing this option means.",
        },
    },
    "required": ["label", "description"],
}
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One question with its options.",
    "properties": {
        "id": {
            "type": "string",
            "maxLength": q.MAX_ID_CHARS,
            "description": "Stable id of the question, the key of its answer (default q<N>).",
        },
        "title": {
            "type": "string",
            "maxLength": q.MAX_TITLE_CHARS,
            "description": "A short heading for the question (optional).",
        },
        "prompt": {
            "type": "string",
            "maxLength": q.MAX_PROMPT_CHARS,
            "description": "The question itself, as the user should read it.",
        },
        "options": {
            "type": "array",
            "minItems": q.MIN_OPTIONS,
            "maxItems": q.MAX_OPTIONS,
            "description": f"{q.MIN_OPTIONS} to {q.MAX_OPTIONS} choices.",
            "items": OPTION_SCHEMA,
        },
    },
    "required": ["prompt", "options"],
}


def _publish_required(schema: dict[str, Any]) -> None:
    """`questions` is required in the published schema; a missing one still gets
    clarification.questions' own message (so the field keeps its None default)."""
    for prop in schema["properties"].values():
        prop.pop("default", None)
    schema["required"] = ["questions"]


class AskArgs(ToolArgs):
    # The published schema is typed (WithJsonSchema); validation stays with
    # clarification.questions, whose errors name the question and the field.
    questions: Annotated[
        Any,
        WithJsonSchema(
            {
                "type": "array",
                "minItems": q.MIN_QUESTIONS,
                "maxItems": q.MAX_QUESTIONS,
                "description": f"{q.MIN_QUESTIONS} to {q.MAX_QUESTIONS} related questions, "
                "answered together.",
                "items": QUESTION_SCHEMA,
            }
        ),
    ] = None
    context: Annotated[
        Any,
        WithJsonSchema(
            {
                "type": "string",
                "maxLength": q.MAX_CONTEXT_CHARS,
                "description": "Why you ask: what you found and what depends on the answer.",
            }
        ),
    ] = None
    context_paragraphs: Annotated[
        Any,
        WithJsonSchema(
            {
                "type": "array",
                "items": {"type": "string"},
                "description": "The context as paragraphs (overrides `context` when given).",
            }
        ),
    ] = None

    model_config = ConfigDict(**ToolArgs.model_config, json_schema_extra=_publish_required)


def ask_user_question(ctx: ToolContext, args: AskArgs) -> Coroutine[Any, Any, dict[str, Any]]:
    # Hands back the service's coroutine (no frame of its own while the agent waits).
    agent = ctx.require_agent()
    receipt = ctx.response_receipt()
    return ctx.services.clarifications.ask(
        agent.session_id,
        args.questions,
        args.context,
        args.context_paragraphs,
        progress=ctx.report_progress,
        # The answer counts as delivered once this call's result was sent to the agent.
        after_sent=receipt.after_sent if receipt is not None else None,
    )


ASK_DESCRIPTION = (
    "Ask the user 1-4 related questions and wait for all answers. Each question needs a "
    "`prompt` and 2-6 `options`, each with a short `label` (1-5 words) and a `description`; "
    "`id`/`option_id` are optional (q1, q1_opt1, … by default). Optional `context` (or "
    "`context_paragraphs`) explains why you ask. The call blocks until the user answers "
    "(progress notifications keep it alive) and returns {pending_id, rejected, reject_reason, "
    "answers: {<question_id>: {answered, selected_options, selected_labels, selected_option, "
    "custom_text}}} — every selected option, with its label. If the user declines, rejected is "
    "true. If your call is cut off, the question stays open and a later answer reaches you as "
    "a new prompt."
)


class ListPendingArgs(ToolArgs):
    workspace_id: Annotated[str, StringConstraints(max_length=64)] | None = None
    created_since: Annotated[str, StringConstraints(max_length=64)] | None = None
    cursor: Annotated[str, StringConstraints(max_length=512)] | None = None
    limit: int | None = None  # clamped to 1..200 (default 50), never rejected


class AnswerArgs(ToolArgs):
    pending_id: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    answers: list[AnswerInput] | None = Field(default=None, max_length=64)
    rejected: bool = False
    reject_reason: Annotated[str, StringConstraints(max_length=100_000)] = Field(
        default="", validation_alias=AliasChoices("reject_reason", "reason")
    )


async def list_pending_questions(ctx: ToolContext, args: ListPendingArgs) -> dict[str, Any]:
    return await ctx.services.clarifications.list_pending(
        workspace_id=args.workspace_id,
        created_since=args.created_since,
        cursor=args.cursor,
        limit=args.limit,
    )


async def answer_question(ctx: ToolContext, args: AnswerArgs) -> dict[str, Any]:
    answers = [a.model_dump() for a in args.answers] if args.answers is not None else None
    return await ctx.services.clarifications.resolve_bundle(
        args.pending_id, answers, args.rejected, args.reject_reason, via=ctx.answer_surface()
    )


LIST_DESCRIPTION = (
    "List the questions agents are waiting on, in the workspaces you can see, oldest first: "
    '{"bundles": [{pending_id, task_id, session_id, created_at, age_seconds, context, '
    "questions: [{question_id, title, prompt, status, options: [{option_id, label, "
    'description}]}]}], "count", "next_cursor"}. Filter with workspace_id and created_since '
    "(RFC 3339); page with cursor (pass next_cursor back; empty means no more) and limit "
    "(default 50, at most 200). Answer with answer_question_kandev."
)
ANSWER_DESCRIPTION = (
    "Answer (or decline) a question an agent is waiting on. Give pending_id and either "
    "answers — exactly one entry per question: {question_id, selected_options: [option ids], "
    "custom_text} — or rejected: true with an optional reason (at most 2000 characters). "
    "Exactly one answer wins: the winner gets claimed: true; if someone answered first you get "
    "claimed: false with the winning answer (a success, nothing to redo). A question that is "
    "no longer open and was never answered is a CONFLICT error. Result: {success, pending_id, "
    "claimed, status, response: {answers, rejected, reject_reason}}."
)

TOOLS = (
    ToolSpec("ask_user_question_kandev", ASK_DESCRIPTION, AskArgs, ask_user_question, AGENT),
    ToolSpec(
        "list_pending_questions_kandev",
        LIST_DESCRIPTION,
        ListPendingArgs,
        list_pending_questions,
        EXTERNAL,
    ),
    ToolSpec("answer_question_kandev", ANSWER_DESCRIPTION, AnswerArgs, answer_question, EXTERNAL),
)
