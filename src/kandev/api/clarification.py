from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from kandev.api.deps import ClarificationServiceDep
from kandev.api.errors import error_response
from kandev.clarification.inputs import RequestInput, RespondInput

router = APIRouter(prefix="/api/v1/clarification", tags=["clarification"])


@router.get("")
async def list_pending(
    clarification_service: ClarificationServiceDep,
    workspace_id: str | None = Query(default=None, max_length=64),
    created_since: str | None = Query(default=None, max_length=64),
    cursor: str | None = Query(default=None, max_length=512),
    # A string so that `limit` is read by listing's rule (clamped, never rejected unless not
    # an integer) exactly as the MCP tool's is.
    limit: str | None = Query(default=None, max_length=32),
) -> dict[str, Any]:
    """The open questions the caller can see: list_pending_questions_kandev's envelope, order,
    visibility and errors, by the same code (ClarificationService.list_pending)."""
    return await clarification_service.list_pending(
        workspace_id=workspace_id,
        created_since=created_since,
        cursor=cursor,
        limit=limit,  # type: ignore[arg-type]  # listing.clamp_limit parses it
    )


@router.post("/request")
async def create_request(
    clarification_service: ClarificationServiceDep,
    body: RequestInput,
) -> dict[str, Any]:
    pending_id = await clarification_service.request(body)
    return {"pending_id": pending_id}


@router.get("/{pending_id}")
async def get_request(
    clarification_service: ClarificationServiceDep,
    pending_id: str,
) -> dict[str, Any]:
    return await clarification_service.get_request(pending_id)


@router.get("/{pending_id}/wait", response_model=None)
async def wait(
    clarification_service: ClarificationServiceDep,
    pending_id: str,
    timeout: float = Query(default=60.0, gt=0, le=3600),
) -> dict[str, Any] | JSONResponse:
    result = await clarification_service.wait(pending_id, timeout)
    if result is None:
        return error_response(504, "timed out waiting for a response")
    return result


@router.post("/{pending_id}/respond")
async def respond(
    clarification_service: ClarificationServiceDep,
    pending_id: str,
    body: RespondInput,
) -> dict[str, Any]:
    answers = [a.model_dump() for a in body.answers] if body.answers is not None else None
    return await clarification_service.resolve_bundle(
        pending_id, answers, body.rejected, body.reject_reason, via="rest"
    )


@router.post("/{pending_id}/cancel")
async def cancel(
    clarification_service: ClarificationServiceDep,
    pending_id: str,
) -> dict[str, Any]:
    await clarification_service.cancel(pending_id)
    return {"success": True}
