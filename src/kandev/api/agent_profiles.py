from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from kandev.api.deps import get_services
from kandev.board.inputs import AgentProfileCreate, AgentProfileUpdate
from kandev.services import Services

router = APIRouter(prefix="/api/v1/agent-profiles", tags=["agent profiles"])


@router.post("", status_code=201)
async def create_profile(
    body: AgentProfileCreate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.agent_profiles.create_profile(body)).to_json()


@router.get("")
async def list_profiles(services: Services = Depends(get_services)) -> dict[str, Any]:
    profiles = await services.agent_profiles.list_profiles()
    return {"agent_profiles": [p.to_json() for p in profiles], "total": len(profiles)}


@router.get("/{profile_id}")
async def get_profile(profile_id: str, services: Services = Depends(get_services)) -> Any:
    return (await services.agent_profiles.get_profile(profile_id)).to_json()


@router.patch("/{profile_id}")
async def update_profile(
    profile_id: str, body: AgentProfileUpdate, services: Services = Depends(get_services)
) -> Any:
    return (await services.agent_profiles.update_profile(profile_id, body)).to_json()


@router.delete("/{profile_id}", status_code=204)
async def delete_profile(profile_id: str, services: Services = Depends(get_services)) -> Response:
    await services.agent_profiles.delete_profile(profile_id)
    return Response(status_code=204)
