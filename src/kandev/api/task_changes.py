"""A task's changes on its repository: read, review, commit, merge, overlaps (CONTRACT §10)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from kandev.api.deps import get_services
from kandev.repos.changes import MergeConflict
from kandev.repos.inputs import CommitCreate, MergeCreate, ReviewCreate
from kandev.services import Services

router = APIRouter(prefix="/api/v1/tasks/{task_id}", tags=["task changes"])


@router.get("/changes")
async def get_changes(task_id: str, services: Services = Depends(get_services)) -> Any:
    return await services.changes.changes(task_id)


@router.get("/overlaps")
async def get_overlaps(task_id: str, services: Services = Depends(get_services)) -> Any:
    return await services.changes.overlaps(task_id)


@router.post("/review", status_code=202)
async def review(
    task_id: str, body: ReviewCreate, services: Services = Depends(get_services)
) -> Any:
    """The comments reach the task's primary session as one prompt."""
    return await services.changes.review(task_id, body)


@router.post("/commit")
async def commit(
    task_id: str, body: CommitCreate, services: Services = Depends(get_services)
) -> Any:
    return await services.changes.commit(task_id, body)


@router.post("/merge")
async def merge(task_id: str, body: MergeCreate, services: Services = Depends(get_services)) -> Any:
    try:
        return await services.changes.merge(task_id, body)
    except MergeConflict as exc:  # the one error that carries more than a message
        return JSONResponse({"error": exc.message, "conflicts": exc.conflicts}, status_code=409)
