from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from kandev.api.deps import WorkflowServiceDep
from kandev.board.inputs import StepCreate, StepUpdate, WorkflowCreate, WorkflowUpdate

router = APIRouter(prefix="/api/v1/workflows", tags=["workflows"])


@router.post("", status_code=201)
async def create_workflow(
    workflow_service: WorkflowServiceDep,
    body: WorkflowCreate,
) -> dict[str, Any]:
    return (await workflow_service.create_workflow(body)).to_json()


@router.get("")
async def list_workflows(
    workflow_service: WorkflowServiceDep,
    workspace_id: str | None = None,
) -> dict[str, Any]:
    items, total = await workflow_service.list_workflows(workspace_id)
    return {"workflows": [w.to_json() for w in items], "total": total}


@router.get("/{workflow_id}")
async def get_workflow(
    workflow_service: WorkflowServiceDep,
    workflow_id: str,
) -> dict[str, Any]:
    return (await workflow_service.get_workflow(workflow_id)).to_json()


@router.post("/{workflow_id}/steps", status_code=201)
async def add_step(
    workflow_service: WorkflowServiceDep,
    workflow_id: str,
    body: StepCreate,
) -> dict[str, Any]:
    return (await workflow_service.add_step(workflow_id, body)).to_json()


@router.patch("/{workflow_id}")
async def update_workflow(
    workflow_service: WorkflowServiceDep,
    workflow_id: str,
    body: WorkflowUpdate,
) -> dict[str, Any]:
    return (await workflow_service.update_workflow(workflow_id, body)).to_json()


@router.delete("/{workflow_id}", status_code=204)
async def delete_workflow(
    workflow_service: WorkflowServiceDep,
    workflow_id: str,
) -> Response:
    """Deletes the workflow with its steps; 409 while tasks sit on it."""
    await workflow_service.delete_workflow(workflow_id)
    return Response(status_code=204)


@router.patch("/{workflow_id}/steps/{step_id}")
async def update_step(
    workflow_service: WorkflowServiceDep,
    workflow_id: str,
    step_id: str,
    body: StepUpdate,
) -> dict[str, Any]:
    return (await workflow_service.update_step(workflow_id, step_id, body)).to_json()


@router.delete("/{workflow_id}/steps/{step_id}", status_code=204)
async def delete_step(
    workflow_service: WorkflowServiceDep,
    workflow_id: str,
    step_id: str,
) -> Response:
    """400 while tasks sit on the step (CONTRACT §3)."""
    await workflow_service.delete_step(workflow_id, step_id)
    return Response(status_code=204)
