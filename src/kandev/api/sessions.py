from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from kandev.api.deps import SessionServiceDep
from kandev.sessions.inputs import MessagePageQuery, PromptInput, SessionCreate, StopInput

router = APIRouter(prefix="/api/v1", tags=["sessions"])


@router.post("/tasks/{task_id}/sessions", status_code=201)
async def create_session(
    session_service: SessionServiceDep,
    task_id: str,
    body: SessionCreate | None = None,
) -> dict[str, Any]:
    return await session_service.create_session(task_id, body or SessionCreate())


@router.get("/tasks/{task_id}/sessions")
async def list_task_sessions(
    session_service: SessionServiceDep,
    task_id: str,
) -> dict[str, Any]:
    sessions = await session_service.list_task_sessions(task_id)
    return {"sessions": sessions, "total": len(sessions)}


@router.get("/sessions/{session_id}")
async def get_session(
    session_service: SessionServiceDep,
    session_id: str,
) -> dict[str, Any]:
    return await session_service.get_session(session_id)


@router.post("/sessions/{session_id}/prompt", status_code=202)
async def prompt(
    session_service: SessionServiceDep,
    session_id: str,
    body: PromptInput,
) -> dict[str, Any]:
    result = await session_service.prompt(session_id, body.text)
    return {
        "session_id": result.session_id,
        "turn_id": result.turn_id,
        "queued": result.queued,
        "queued_prompt_id": result.queued_prompt_id,
    }


@router.post("/sessions/{session_id}/cancel", status_code=202)
async def cancel(
    session_service: SessionServiceDep,
    session_id: str,
) -> dict[str, Any]:
    return {"cancelled": await session_service.cancel_turn(session_id)}


@router.post("/sessions/{session_id}/stop")
async def stop(
    session_service: SessionServiceDep,
    session_id: str,
    body: StopInput | None = None,
) -> dict[str, Any]:
    return await session_service.stop(session_id, (body or StopInput()).state)


@router.get("/sessions/{session_id}/messages")
async def list_messages(
    session_service: SessionServiceDep,
    session_id: str,
    query: Annotated[MessagePageQuery, Query()],
) -> dict[str, Any]:
    items, has_more = await session_service.list_messages(session_id, query)
    return {
        "messages": [m.to_json() for m in items],
        "has_more": has_more,
        "cursor": items[-1].id if has_more and items else None,
    }


@router.post("/sessions/{session_id}/agent-token", status_code=201)
async def agent_token(
    session_service: SessionServiceDep,
    session_id: str,
) -> dict[str, Any]:
    return await session_service.create_agent_token(session_id)
