from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from kandev.api.deps import get_services
from kandev.board.inputs import TaskCreate, TaskMove, TaskUpdate
from kandev.moves.service import ACTOR_USER, MoveRequest
from kandev.services import Services

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"])


@router.post("", status_code=201)
async def create_task(body: TaskCreate, services: Services = Depends(get_services)) -> Any:
    return await services.tasks.present_one(await services.tasks.create_task(body))


@router.get("")
async def list_tasks(
    workflow_id: str | None = None,
    workspace_id: str | None = None,
    services: Services = Depends(get_services),
) -> dict[str, Any]:
    items, total = await services.tasks.list_tasks(
        workflow_id=workflow_id, workspace_id=workspace_id
    )
    return {"tasks": await services.tasks.present(items), "total": total}


@router.get("/{task_id}")
async def get_task(task_id: str, services: Services = Depends(get_services)) -> Any:
    return await services.tasks.present_one(await services.tasks.get_task(task_id))


@router.patch("/{task_id}")
async def update_task(
    task_id: str, body: TaskUpdate, services: Services = Depends(get_services)
) -> Any:
    return await services.tasks.present_one(await services.tasks.update_task(task_id, body))


@router.delete("/{task_id}", status_code=204)
async def delete_task(task_id: str, services: Services = Depends(get_services)) -> Response:
    await services.tasks.delete_task(task_id)
    return Response(status_code=204)


@router.post("/{task_id}/archive")
async def archive_task(task_id: str, services: Services = Depends(get_services)) -> Any:
    """Stops the task's agents (its sessions end CANCELLED), then archives it."""
    return await services.tasks.present_one(await services.tasks.archive_task(task_id))


@router.post("/{task_id}/unarchive")
async def unarchive_task(task_id: str, services: Services = Depends(get_services)) -> Any:
    return await services.tasks.present_one(await services.tasks.unarchive_task(task_id))


@router.post("/{task_id}/move")
async def move_task(
    task_id: str, body: TaskMove, services: Services = Depends(get_services)
) -> dict[str, Any]:
    """A human move: applied now, even while the task's agent is running a turn."""
    request = MoveRequest(
        task_id=task_id,
        workflow_id=body.workflow_id,
        workflow_step_id=body.workflow_step_id,
        position=body.position,
        actor=ACTOR_USER,
    )
    result = await services.moves.move(request, human=True)
    return {
        "task": await services.tasks.present_one(result.task),
        "workflow_step": result.step.to_json(),
        "disposition": result.disposition,
    }
