"""Agents' permission requests (CONTRACT §11): list the open ones, decide one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, StringConstraints

from kandev.api.deps import PermissionServiceDep

router = APIRouter(prefix="/api/v1/permissions", tags=["permissions"])


class RespondInput(BaseModel):
    model_config = ConfigDict(strict=True)

    option_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]


@router.get("")
async def list_pending(
    permission_service: PermissionServiceDep,
    workspace_id: str | None = Query(default=None, max_length=64),
    cursor: str | None = Query(default=None, max_length=512),
    limit: str | None = Query(default=None, max_length=32),  # clamped like the questions list
) -> dict[str, Any]:
    return await permission_service.list_pending(
        workspace_id=workspace_id, cursor=cursor, limit=limit
    )


@router.post("/{pending_id}/respond")
async def respond(
    permission_service: PermissionServiceDep, pending_id: str, body: RespondInput
) -> dict[str, Any]:
    return await permission_service.respond(pending_id, body.option_id, via="rest")
