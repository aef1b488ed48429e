from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from kandev.api.deps import get_services
from kandev.services import Services
from kandev.sessions.inputs import MessagePageQuery, PromptInput, SessionCreate, StopInput

router = APIRouter(prefix="/api/v1", tags=["sessions"])


@router.post("/tasks/{task_id}/sessions", status_code=201)
async def create_session(
    task_id: str, body: SessionCreate | None = None, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return await services.sessions.create_session(task_id, body or SessionCreate())


@router.get("/tasks/{task_id}/sessions")
async def list_task_sessions(
    task_id: str, services: Services = Depends(get_services)
) -> dict[str, Any]:
    sessions = await services.sessions.list_task_sessions(task_id)
    return {"sessions": sessions, "total": len(sessions)}


@router.get("/sessions/{session_id}")
async def get_session(session_id: str, services: Services = Depends(get_services)) -> Any:
    return await services.sessions.get_session(session_id)


@router.post("/sessions/{session_id}/prompt", status_code=202)
async def prompt(
    session_id: str, body: PromptInput, services: Services = Depends(get_services)
) -> dict[str, Any]:
    result = await services.sessions.prompt(session_id, body.text)
    return {
        "session_id": result.session_id,
        "turn_id": result.turn_id,
        "queued": result.queued,
        "queued_prompt_id": result.queued_prompt_id,
    }


@router.post("/sessions/{session_id}/cancel", status_code=202)
async def cancel(session_id: str, services: Services = Depends(get_services)) -> dict[str, Any]:
    return {"cancelled": await services.sessions.cancel_turn(session_id)}


@router.post("/sessions/{session_id}/stop")
async def stop(
    session_id: str, body: StopInput | None = None, services: Services = Depends(get_services)
) -> Any:
    return await services.sessions.stop(session_id, (body or StopInput()).state)


@router.get("/sessions/{session_id}/messages")
async def list_messages(
    session_id: str,
    query: Annotated[MessagePageQuery, Query()],
    services: Services = Depends(get_services),
) -> dict[str, Any]:
    items, has_more = await services.sessions.list_messages(session_id, query)
    return {
        "messages": [m.to_json() for m in items],
        "has_more": has_more,
        "cursor": items[-1].id if has_more and items else None,
    }


@router.post("/sessions/{session_id}/agent-token", status_code=201)
async def agent_token(session_id: str, services: Services = Depends(get_services)) -> Any:
    return await services.sessions.create_agent_token(session_id)
