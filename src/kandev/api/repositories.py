"""Repositories of a workspace (CONTRACT §10)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from kandev.api.deps import RepositoryServiceDep
from kandev.repos.inputs import RepositoryCreate, RepositoryUpdate

router = APIRouter(prefix="/api/v1/workspaces/{workspace_id}/repositories", tags=["repositories"])


@router.post("", status_code=201)
async def create_repository(
    repository_service: RepositoryServiceDep,
    workspace_id: str,
    body: RepositoryCreate,
) -> dict[str, Any]:
    return (await repository_service.create_repository(workspace_id, body)).to_json()


@router.get("")
async def list_repositories(
    repository_service: RepositoryServiceDep,
    workspace_id: str,
) -> dict[str, Any]:
    items = await repository_service.list_repositories(workspace_id)
    return {"repositories": [r.to_json() for r in items], "total": len(items)}


@router.get("/{repository_id}")
async def get_repository(
    repository_service: RepositoryServiceDep,
    workspace_id: str,
    repository_id: str,
) -> dict[str, Any]:
    return (await repository_service.get_repository(workspace_id, repository_id)).to_json()


@router.patch("/{repository_id}")
async def update_repository(
    repository_service: RepositoryServiceDep,
    workspace_id: str,
    repository_id: str,
    body: RepositoryUpdate,
) -> dict[str, Any]:
    repository = await repository_service.update_repository(workspace_id, repository_id, body)
    return repository.to_json()


@router.delete("/{repository_id}", status_code=204)
async def delete_repository(
    repository_service: RepositoryServiceDep,
    workspace_id: str,
    repository_id: str,
) -> Response:
    """409 while tasks use the repository."""
    await repository_service.delete_repository(workspace_id, repository_id)
    return Response(status_code=204)
