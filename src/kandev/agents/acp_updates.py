"""`reduce_update`: an ACP `session/update` payload reduced to the `AgentUpdate` Kandev stores."""

from __future__ import annotations

from typing import Any, TypeAlias

from acp.schema import (
    AgentMessageChunk,
    AgentPlanContentUpdate,
    AgentPlanRemovedUpdate,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AudioContentBlock,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    ImageContentBlock,
    ResourceContentBlock,
    SessionInfoUpdate,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
)

from kandev.agents.runtime import AgentUpdate

# What `session/update` may carry (the SDK's `SessionNotification.update`).
SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | AgentPlanContentUpdate
    | AgentPlanRemovedUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
)
ContentBlock: TypeAlias = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
ToolCallContent: TypeAlias = (
    ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent
)


def _render_block(block: ContentBlock) -> str:
    if isinstance(block, TextContentBlock):
        return block.text
    if isinstance(block, ResourceContentBlock):
        return f"[{block.name}]({block.uri})"
    kind = getattr(block, "type", "content")
    return f"[{kind}]"


def _render_tool_content(items: list[ToolCallContent] | None) -> str:
    parts: list[str] = []
    for item in items or []:
        if isinstance(item, ContentToolCallContent):
            parts.append(_render_block(item.content))
        elif isinstance(item, FileEditToolCallContent):
            parts.append(f"[diff {item.path}]")
        elif isinstance(item, TerminalToolCallContent):
            parts.append(f"[terminal {item.terminal_id}]")
    return "\n".join(part for part in parts if part)


def _ask_title(title: str | None, raw_input: object) -> str | None:
    """ "Ask: <first question's prompt>" for an ask_user_question_kandev call (issue 14.3),
    whose title agents often give as the tool name or its raw JSON; else None."""
    if title and "ask_user_question" not in title and not title.lstrip().startswith("{"):
        return None
    questions = raw_input.get("questions") if isinstance(raw_input, dict) else None
    first = questions[0] if isinstance(questions, list) and questions else None
    prompt = first.get("prompt") if isinstance(first, dict) else None
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    line = prompt.strip().splitlines()[0]
    return f"Ask: {line[:117]}…" if len(line) > 120 else f"Ask: {line}"


def reduce_update(update: SessionUpdate) -> AgentUpdate | None:
    """Map one ACP `session/update` payload to what Kandev stores (None: not stored)."""
    if isinstance(update, AgentMessageChunk):
        return AgentUpdate(kind="agent_text", content=_render_block(update.content))
    if isinstance(update, AgentThoughtChunk):
        return AgentUpdate(kind="agent_thought", content=_render_block(update.content))
    if isinstance(update, ToolCallStart):
        metadata: dict[str, Any] = {
            "title": update.title,  # kept apart from content, which later carries output
            "status": update.status or "pending",
            "kind": update.kind or "other",
        }
        if update.raw_input is not None:
            metadata["raw_input"] = update.raw_input
        ask = _ask_title(update.title, update.raw_input)
        if ask:
            metadata["title"] = ask
        text = _render_tool_content(update.content)
        if text:
            metadata["text"] = text
        return AgentUpdate(
            kind="tool_call", content=update.title, key=update.tool_call_id, metadata=metadata
        )
    if isinstance(update, ToolCallProgress):
        # Only what the agent changed: absent fields mean "unchanged".
        metadata = {}
        if update.status is not None:
            metadata["status"] = update.status
        if update.title is not None:
            metadata["title"] = update.title
        if update.kind is not None:
            metadata["kind"] = update.kind
        if update.raw_input is not None:
            metadata["raw_input"] = update.raw_input
        if update.raw_output is not None:
            metadata["raw_output"] = update.raw_output
        ask = _ask_title(update.title, update.raw_input)
        if ask:
            metadata["title"] = ask
        return AgentUpdate(
            kind="tool_call_update",
            content=_render_tool_content(update.content),
            key=update.tool_call_id,
            metadata=metadata,
        )
    if isinstance(update, AgentPlanUpdate):
        entries = [
            {"content": e.content, "status": e.status, "priority": e.priority}
            for e in update.entries
        ]
        rendered = "\n".join(f"[{e['status']}] {e['content']}" for e in entries)
        return AgentUpdate(kind="plan", content=rendered, key="plan", metadata={"entries": entries})
    return None  # user echoes, mode/commands/usage/config updates: not stored
