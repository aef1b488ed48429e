from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from kandev.api.deps import get_services
from kandev.board.inputs import StepCreate, WorkflowCreate
from kandev.services import Services

router = APIRouter(prefix="/api/v1/workflows", tags=["workflows"])


@router.post("", status_code=201)
async def create_workflow(
    body: WorkflowCreate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workflows.create_workflow(body)).to_json()


@router.get("")
async def list_workflows(
    workspace_id: str | None = None, services: Services = Depends(get_services)
) -> dict[str, Any]:
    items, total = await services.workflows.list_workflows(workspace_id)
    return {"workflows": [w.to_json() for w in items], "total": total}


@router.get("/{workflow_id}")
async def get_workflow(
    workflow_id: str, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workflows.get_workflow(workflow_id)).to_json()


@router.post("/{workflow_id}/steps", status_code=201)
async def add_step(
    workflow_id: str, body: StepCreate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workflows.add_step(workflow_id, body)).to_json()
