"""Issue 14.3: the ask tool call keeps a readable title, not the tool name or raw JSON."""

from __future__ import annotations

from acp.schema import ToolCallProgress, ToolCallStart

from kandev.agents.acp_updates import reduce_update
from kandev.clarification.texts import human_answer_text

ASK_INPUT = {"questions": [{"id": "q", "prompt": "Deploy now?\nmore", "options": []}]}


def test_ask_tool_call_gets_a_human_title() -> None:
    for title in ("mcp__kandev__ask_user_question_kandev", '{"questions": []}'):
        start = ToolCallStart(
            session_update="tool_call", tool_call_id="t1", title=title, raw_input=ASK_INPUT
        )
        update = reduce_update(start)
        assert update is not None and update.metadata["title"] == "Ask: Deploy now?"
    progress = ToolCallProgress(
        session_update="tool_call_update", tool_call_id="t1", raw_input=ASK_INPUT
    )
    update = reduce_update(progress)
    assert update is not None and update.metadata["title"] == "Ask: Deploy now?"


def test_other_tool_titles_are_kept() -> None:
    start = ToolCallStart(
        session_update="tool_call", tool_call_id="t2", title="Read file", raw_input=ASK_INPUT
    )
    update = reduce_update(start)
    assert update is not None and update.metadata["title"] == "Read file"


def test_human_answer_text() -> None:
    questions = [{"id": "q", "options": [{"option_id": "go", "label": "Go ahead"}]}]
    answer = {"question_id": "q", "selected_options": ["go"], "custom_text": "both given"}
    assert human_answer_text(questions, [answer], False) == (
        'You answered: "Go ahead" (go) — both given'
    )
    assert human_answer_text(questions, [], True, "later") == "You skipped the questions: later"
    assert human_answer_text(questions, [], True) == "You skipped the questions."
