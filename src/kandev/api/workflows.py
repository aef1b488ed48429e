from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from kandev.api.deps import get_services
from kandev.board.inputs import StepCreate, StepUpdate, WorkflowCreate, WorkflowUpdate
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


@router.patch("/{workflow_id}")
async def update_workflow(
    workflow_id: str, body: WorkflowUpdate, services: Services = Depends(get_services)
) -> dict[str, Any]:
    return (await services.workflows.update_workflow(workflow_id, body)).to_json()


@router.delete("/{workflow_id}", status_code=204)
async def delete_workflow(workflow_id: str, services: Services = Depends(get_services)) -> Response:
    """Deletes the workflow with its steps; 409 while tasks sit on it."""
    await services.workflows.delete_workflow(workflow_id)
    return Response(status_code=204)


@router.patch("/{workflow_id}/steps/{step_id}")
async def update_step(
    workflow_id: str,
    step_id: str,
    body: StepUpdate,
    services: Services = Depends(get_services),
) -> dict[str, Any]:
    return (await services.workflows.update_step(workflow_id, step_id, body)).to_json()


@router.delete("/{workflow_id}/steps/{step_id}", status_code=204)
async def delete_step(
    workflow_id: str, step_id: str, services: Services = Depends(get_services)
) -> Response:
    """400 while tasks sit on the step (CONTRACT §3)."""
    await services.workflows.delete_step(workflow_id, step_id)
    return Response(status_code=204)
