"""`KandevAcpClient`: the ACP client callbacks an agent process talks to.

Deliberately minimal:

- capabilities: no file system, no terminal (agents use their own tools for those);
- `session/update`: handed, synchronously and in arrival order, to the runtime's callback;
- `session/request_permission`: answered by the injected `PermissionPolicy`;
- every other client method (fs/*, terminal/*, extensions) answers method-not-found.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp import RequestError
from acp.schema import (
    CreateTerminalResponse,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from kandev.agents.acp_permissions import PermissionPolicy
from kandev.agents.acp_updates import SessionUpdate

SessionUpdateCallback = Callable[[str, SessionUpdate], None]


class KandevAcpClient:
    """The ACP Client the agent talks to: forwards updates, asks the permission policy."""

    def __init__(
        self,
        on_session_update: SessionUpdateCallback,
        permission_policy: PermissionPolicy,
        kandev_session_id: str = "",
    ) -> None:
        self._on_session_update = on_session_update
        self._permission_policy = permission_policy
        self._kandev_session_id = kandev_session_id  # the policy decides for this session

    async def session_update(self, session_id: str, update: SessionUpdate, **kwargs: Any) -> None:
        # Must not await before enqueueing: the SDK runs each notification in its own task,
        # and only the synchronous prefix of those tasks runs in arrival order.
        self._on_session_update(session_id, update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        return await self._permission_policy.decide(self._kandev_session_id, tool_call, options)

    # Capabilities say no fs and no terminal; answer such calls method-not-found explicitly
    # (the SDK would otherwise answer some terminal methods with a null result).
    async def write_text_file(self, **kwargs: Any) -> WriteTextFileResponse | None:
        raise RequestError.method_not_found("fs/write_text_file")

    async def read_text_file(self, **kwargs: Any) -> ReadTextFileResponse:
        raise RequestError.method_not_found("fs/read_text_file")

    async def create_terminal(self, **kwargs: Any) -> CreateTerminalResponse:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, **kwargs: Any) -> TerminalOutputResponse:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, **kwargs: Any) -> ReleaseTerminalResponse | None:
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, **kwargs: Any) -> WaitForTerminalExitResponse:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, **kwargs: Any) -> KillTerminalResponse | None:
        raise RequestError.method_not_found("terminal/kill")

    # Extension payloads are free-form JSON objects (the SDK's own type).
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None
