"""How Kandev answers an agent's `session/request_permission`: the policy seam.

`KandevAcpClient` asks its `PermissionPolicy`; the one in use today, `AutoAllowPolicy`, picks
the first "allow" option without asking anyone. A policy that asks a human (allow / deny)
replaces it later without touching the client or the runtime.
"""

from __future__ import annotations

from typing import Protocol

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
    """Decides one permission request of an agent."""

    async def decide(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse: ...


class AutoAllowPolicy:
    """Allow what the agent offers to allow (its first allow option), silently; else decline."""

    async def decide(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        for option in options:
            if option.kind in _ALLOW_KINDS:
                return RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
                )
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
