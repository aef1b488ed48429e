from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from kandev.api.deps import get_services
from kandev.board.inputs import WorkspaceCreate, WorkspaceUpdate
from kandev.services import Services

router = APIRouter(prefix="/api/v1/workspaces", tags=["workspaces"])


@router.post("", status_code=201)
async def create_workspace(
    body: WorkspaceCreate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workspaces.create_workspace(body)).to_json()


@router.get("")
async def list_workspaces(services: Services = Depends(get_services)) -> dict[str, Any]:
    items, total = await services.workspaces.list_workspaces()
    return {"workspaces": [w.to_json() for w in items], "total": total}


@router.get("/{workspace_id}")
async def get_workspace(
    workspace_id: str, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workspaces.get_workspace(workspace_id)).to_json()


@router.patch("/{workspace_id}")
async def update_workspace(
    workspace_id: str, body: WorkspaceUpdate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workspaces.update_workspace(workspace_id, body)).to_json()


@router.delete("/{workspace_id}", status_code=204)
async def delete_workspace(
    workspace_id: str, services: Services = Depends(get_services)
) -> Response:
    """Deletes the workspace with its workflows; 409 while tasks hang off it."""
    await services.workspaces.delete_workspace(workspace_id)
    return Response(status_code=204)
