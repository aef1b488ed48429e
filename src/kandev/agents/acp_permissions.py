"""How Kandev answers an agent's `session/request_permission`: the policy seam.

`KandevAcpClient` asks its `PermissionPolicy`, naming the Kandev session the agent runs for.
`DecidingPolicy` hands the request (as plain JSON) to a `PermissionDecider` — the permissions
service, which applies the agent profile's policy and may wait for a person — and turns its
answer into the ACP response. `AutoAllowPolicy` picks the first "allow" option without asking
anyone (tests and runtimes built without a decider).
"""

from __future__ import annotations

from typing import Any, Protocol

from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    PermissionOptionKind,
    RequestPermissionResponse,
    ToolCallUpdate,
)

_ALLOW_KINDS: tuple[PermissionOptionKind, ...] = ("allow_once", "allow_always")


class PermissionPolicy(Protocol):
    """Decides one permission request of the agent of Kandev session `session_id`."""

    async def decide(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse: ...


class PermissionDecider(Protocol):
    """The option id the agent gets, or None for a cancelled outcome."""

    async def decide(
        self, session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> str | None: ...


def selected(option_id: str | None) -> RequestPermissionResponse:
    if option_id is None:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    return RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id=option_id)
    )


class AutoAllowPolicy:
    """Allow what the agent offers to allow (its first allow option), silently; else decline."""

    async def decide(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        for option in options:
            if option.kind in _ALLOW_KINDS:
                return selected(option.option_id)
        return selected(None)


class DecidingPolicy:
    """Asks a `PermissionDecider` (the agent profile's policy, maybe a person)."""

    def __init__(self, decider: PermissionDecider) -> None:
        self._decider = decider

    async def decide(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        call = {
            "tool_call_id": tool_call.tool_call_id,
            "title": tool_call.title or "",
            "kind": tool_call.kind or "",
            "raw_input": tool_call.raw_input,
        }
        offered = [{"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in options]
        return selected(await self._decider.decide(session_id, call, offered))
