"""The services a REST or page handler may name, one dependency each (FastAPI `Depends`),
taken from the app's `SurfaceServices`: a handler's signature says what it uses."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from kandev.auth.agent_tokens import AgentTokenService
from kandev.auth.service import AuthService
from kandev.board.agent_profiles import AgentProfileService
from kandev.board.tasks import TaskService
from kandev.board.workflows import WorkflowService
from kandev.board.workspaces import WorkspaceService
from kandev.clarification.service import ClarificationService
from kandev.config import Settings
from kandev.moves.service import MoveService
from kandev.pending.presenter import TaskPresenter
from kandev.permissions.service import PermissionService
from kandev.repos.changes import ChangesService
from kandev.repos.service import RepositoryService
from kandev.services import SurfaceServices
from kandev.sessions.service import SessionService
from kandev.streams.events import EventsService


def surface_services(request: Request) -> SurfaceServices:
    return request.app.state.services.surface


def _service(name: str) -> Any:
    # `async def`: FastAPI runs a plain `def` dependency in its thread pool — a thread hop
    # per dependency per request for what is one attribute read.
    async def get(request: Request) -> Any:
        return getattr(surface_services(request), name)

    get.__name__ = f"{name}_service"
    return Depends(get)


SettingsDep = Annotated[Settings, _service("settings")]
AuthServiceDep = Annotated[AuthService, _service("auth")]
AgentTokenServiceDep = Annotated[AgentTokenService, _service("agent_tokens")]
WorkspaceServiceDep = Annotated[WorkspaceService, _service("workspaces")]
WorkflowServiceDep = Annotated[WorkflowService, _service("workflows")]
TaskServiceDep = Annotated[TaskService, _service("tasks")]
AgentProfileServiceDep = Annotated[AgentProfileService, _service("agent_profiles")]
SessionServiceDep = Annotated[SessionService, _service("sessions")]
ClarificationServiceDep = Annotated[ClarificationService, _service("clarifications")]
PermissionServiceDep = Annotated[PermissionService, _service("permissions")]
MoveServiceDep = Annotated[MoveService, _service("moves")]
RepositoryServiceDep = Annotated[RepositoryService, _service("repositories")]
ChangesServiceDep = Annotated[ChangesService, _service("changes")]
EventsServiceDep = Annotated[EventsService, _service("events")]
TaskPresenterDep = Annotated[TaskPresenter, _service("presenter")]
