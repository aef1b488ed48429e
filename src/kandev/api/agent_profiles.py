from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from kandev.api.deps import AgentProfileServiceDep
from kandev.board.inputs import AgentProfileCreate, AgentProfileUpdate

router = APIRouter(prefix="/api/v1/agent-profiles", tags=["agent profiles"])


@router.post("", status_code=201)
async def create_profile(
    profile_service: AgentProfileServiceDep,
    body: AgentProfileCreate,
) -> dict[str, Any]:
    return (await profile_service.create_profile(body)).to_json()


@router.get("")
async def list_profiles(
    profile_service: AgentProfileServiceDep,
) -> dict[str, Any]:
    profiles = await profile_service.list_profiles()
    return {"agent_profiles": [p.to_json() for p in profiles], "total": len(profiles)}


@router.get("/{profile_id}")
async def get_profile(
    profile_service: AgentProfileServiceDep,
    profile_id: str,
) -> dict[str, Any]:
    return (await profile_service.get_profile(profile_id)).to_json()


@router.patch("/{profile_id}")
async def update_profile(
    profile_service: AgentProfileServiceDep,
    profile_id: str,
    body: AgentProfileUpdate,
) -> dict[str, Any]:
    return (await profile_service.update_profile(profile_id, body)).to_json()


@router.delete("/{profile_id}", status_code=204)
async def delete_profile(
    profile_service: AgentProfileServiceDep,
    profile_id: str,
) -> Response:
    await profile_service.delete_profile(profile_id)
    return Response(status_code=204)
