"""Question tools. ask_user_question_kandev is for session agents only (never external)."""

from __future__ import annotations

from typing import Any

from kandev.mcp.tools.base import AGENT, ToolArgs, ToolContext, ToolSpec


class AskArgs(ToolArgs):
    # Shapes are checked by clarification.questions, which names the question and field.
    questions: Any = None
    context: Any = None
    context_paragraphs: Any = None


async def ask_user_question(ctx: ToolContext, args: AskArgs) -> dict[str, Any]:
    agent = ctx.require_agent()
    return await ctx.services.clarifications.ask(
        agent.session_id,
        args.questions,
        args.context,
        args.context_paragraphs,
        progress=ctx.report_progress,
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

TOOLS = (ToolSpec("ask_user_question_kandev", ASK_DESCRIPTION, AskArgs, ask_user_question, AGENT),)
