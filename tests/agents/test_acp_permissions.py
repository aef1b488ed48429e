"""The permission seam: the default policy, and an injected policy answering a real agent."""

from __future__ import annotations

from pathlib import Path

import anyio
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    PermissionOptionKind,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from kandev.agents.acp_permissions import AutoAllowPolicy
from kandev.agents.acp_runtime import AcpRuntime
from tests.agents.conftest import WAIT_SECONDS, Recorder
from tests.agents.test_acp_runtime import launch_for

TOOL_CALL = ToolCallUpdate(tool_call_id="call-1", title="Edit a file")


def option(option_id: str, kind: PermissionOptionKind) -> PermissionOption:
    return PermissionOption(option_id=option_id, name=option_id, kind=kind)


async def test_auto_allow_picks_the_first_allow_option() -> None:
    options = [
        option("no", "reject_once"),
        option("always", "allow_always"),
        option("once", "allow_once"),
    ]
    response = await AutoAllowPolicy().decide("s1", TOOL_CALL, options)
    assert response.outcome == AllowedOutcome(outcome="selected", option_id="always")


async def test_auto_allow_declines_without_an_allow_option() -> None:
    response = await AutoAllowPolicy().decide("s1", TOOL_CALL, [option("no", "reject_once")])
    assert response.outcome == DeniedOutcome(outcome="cancelled")


class RejectingPolicy:
    """Picks the first reject option and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ToolCallUpdate, list[PermissionOption]]] = []

    async def decide(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        self.asked.append((session_id, tool_call, options))
        chosen = next(o for o in options if o.kind.startswith("reject"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )


async def test_the_runtime_asks_the_injected_policy(tmp_path: Path, recorder: Recorder) -> None:
    policy = RejectingPolicy()
    runtime = AcpRuntime(init_timeout=10.0, stop_grace=2.0, permission_policy=policy)
    with anyio.fail_after(WAIT_SECONDS * 2):
        handle = await runtime.start(launch_for(tmp_path), recorder)
    try:
        with anyio.fail_after(WAIT_SECONDS):
            assert await handle.prompt("permission") == "end_turn"
    finally:
        await handle.stop()

    assert recorder.text() == "permission: no"
    [(session_id, tool_call, options)] = policy.asked
    assert session_id == launch_for(tmp_path).session_id  # the Kandev session, not ACP's
    assert tool_call.title == "Edit a file"
    assert [o.option_id for o in options] == ["no", "yes"]
