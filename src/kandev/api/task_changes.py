"""A task's changes on its repository: read, review, commit, merge, overlaps (CONTRACT §10)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from kandev.api.deps import ChangesServiceDep
from kandev.repos.changes import MergeConflict
from kandev.repos.inputs import CommitCreate, MergeCreate, ReviewCreate

router = APIRouter(prefix="/api/v1/tasks/{task_id}", tags=["task changes"])


@router.get("/changes", response_model=None)
async def get_changes(
    changes_service: ChangesServiceDep,
    task_id: str,
    since: str | None = Query(default=None, max_length=64),
) -> JSONResponse:
    """`?since=last_review`: the changes since the caller's last review. The answer is plain
    JSON already (up to 2 MiB of diff text): serialized as it is, not walked by the encoder."""
    return JSONResponse(await changes_service.changes(task_id, since))


@router.get("/overlaps")
async def get_overlaps(
    changes_service: ChangesServiceDep,
    task_id: str,
) -> dict[str, Any]:
    return await changes_service.overlaps(task_id)


@router.post("/review", status_code=202)
async def review(
    changes_service: ChangesServiceDep,
    task_id: str,
    body: ReviewCreate,
) -> dict[str, Any]:
    """The comments reach the task's primary session as one prompt."""
    return await changes_service.review(task_id, body)


@router.post("/commit")
async def commit(
    changes_service: ChangesServiceDep,
    task_id: str,
    body: CommitCreate,
) -> dict[str, Any]:
    return await changes_service.commit(task_id, body)


@router.post("/merge", response_model=None)
async def merge(
    changes_service: ChangesServiceDep,
    task_id: str,
    body: MergeCreate,
) -> dict[str, Any] | JSONResponse:
    try:
        return await changes_service.merge(task_id, body)
    except MergeConflict as exc:  # the one error that carries more than a message
        return JSONResponse({"error": exc.message, "conflicts": exc.conflicts}, status_code=409)
