"""Repositories of a workspace (CONTRACT §10)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from kandev.api.deps import get_services
from kandev.repos.inputs import RepositoryCreate, RepositoryUpdate
from kandev.services import Services

router = APIRouter(prefix="/api/v1/workspaces/{workspace_id}/repositories", tags=["repositories"])


@router.post("", status_code=201)
async def create_repository(
    workspace_id: str, body: RepositoryCreate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.repositories.create_repository(workspace_id, body)).to_json()


@router.get("")
async def list_repositories(
    workspace_id: str, services: Services = Depends(get_services)
) -> dict[str, Any]:
    items = await services.repositories.list_repositories(workspace_id)
    return {"repositories": [r.to_json() for r in items], "total": len(items)}


@router.get("/{repository_id}")
async def get_repository(
    workspace_id: str, repository_id: str, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.repositories.get_repository(workspace_id, repository_id)).to_json()


@router.patch("/{repository_id}")
async def update_repository(
    workspace_id: str,
    repository_id: str,
    body: RepositoryUpdate,
    services: Services = Depends(get_services),
) -> dict[str, Any]:
    repository = await services.repositories.update_repository(workspace_id, repository_id, body)
    return repository.to_json()


@router.delete("/{repository_id}", status_code=204)
async def delete_repository(
    workspace_id: str, repository_id: str, services: Services = Depends(get_services)
) -> Response:
    """409 while tasks use the repository."""
    await services.repositories.delete_repository(workspace_id, repository_id)
    return Response(status_code=204)
