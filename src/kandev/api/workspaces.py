from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from kandev.api.deps import WorkspaceServiceDep
from kandev.board.inputs import WorkspaceCreate, WorkspaceUpdate

router = APIRouter(prefix="/api/v1/workspaces", tags=["workspaces"])


@router.post("", status_code=201)
async def create_workspace(
    workspace_service: WorkspaceServiceDep,
    body: WorkspaceCreate,
) -> dict[str, Any]:
    return (await workspace_service.create_workspace(body)).to_json()


@router.get("")
async def list_workspaces(
    workspace_service: WorkspaceServiceDep,
) -> dict[str, Any]:
    items, total = await workspace_service.list_workspaces()
    return {"workspaces": [w.to_json() for w in items], "total": total}


@router.get("/{workspace_id}")
async def get_workspace(
    workspace_service: WorkspaceServiceDep,
    workspace_id: str,
) -> dict[str, Any]:
    return (await workspace_service.get_workspace(workspace_id)).to_json()


@router.patch("/{workspace_id}")
async def update_workspace(
    workspace_service: WorkspaceServiceDep,
    workspace_id: str,
    body: WorkspaceUpdate,
) -> dict[str, Any]:
    return (await workspace_service.update_workspace(workspace_id, body)).to_json()


@router.delete("/{workspace_id}", status_code=204)
async def delete_workspace(
    workspace_service: WorkspaceServiceDep,
    workspace_id: str,
) -> Response:
    """Deletes the workspace with its workflows; 409 while tasks hang off it."""
    await workspace_service.delete_workspace(workspace_id)
    return Response(status_code=204)
