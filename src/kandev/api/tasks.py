from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from kandev.api.deps import MoveServiceDep, TaskPresenterDep, TaskServiceDep
from kandev.board.inputs import TaskCreate, TaskMove, TaskUpdate
from kandev.moves.models import ACTOR_USER, MoveRequest

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"])


@router.post("", status_code=201)
async def create_task(
    presenter: TaskPresenterDep,
    task_service: TaskServiceDep,
    body: TaskCreate,
) -> dict[str, Any]:
    return await presenter.task(await task_service.create_task(body))


@router.get("")
async def list_tasks(
    presenter: TaskPresenterDep,
    task_service: TaskServiceDep,
    workflow_id: str | None = None,
    workspace_id: str | None = None,
) -> dict[str, Any]:
    items, total = await task_service.list_tasks(workflow_id=workflow_id, workspace_id=workspace_id)
    return {"tasks": await presenter.tasks(items), "total": total}


@router.get("/{task_id}")
async def get_task(
    presenter: TaskPresenterDep,
    task_service: TaskServiceDep,
    task_id: str,
) -> dict[str, Any]:
    return await presenter.task(await task_service.get_task(task_id))


@router.patch("/{task_id}")
async def update_task(
    presenter: TaskPresenterDep,
    task_service: TaskServiceDep,
    task_id: str,
    body: TaskUpdate,
) -> dict[str, Any]:
    return await presenter.task(await task_service.update_task(task_id, body))


@router.delete("/{task_id}", status_code=204)
async def delete_task(
    task_service: TaskServiceDep,
    task_id: str,
) -> Response:
    await task_service.delete_task(task_id)
    return Response(status_code=204)


@router.post("/{task_id}/archive")
async def archive_task(
    presenter: TaskPresenterDep,
    task_service: TaskServiceDep,
    task_id: str,
) -> dict[str, Any]:
    """Stops the task's agents (its sessions end CANCELLED), then archives it."""
    return await presenter.task(await task_service.archive_task(task_id))


@router.post("/{task_id}/unarchive")
async def unarchive_task(
    presenter: TaskPresenterDep,
    task_service: TaskServiceDep,
    task_id: str,
) -> dict[str, Any]:
    return await presenter.task(await task_service.unarchive_task(task_id))


@router.post("/{task_id}/move")
async def move_task(
    move_service: MoveServiceDep,
    task_id: str,
    body: TaskMove,
) -> dict[str, Any]:
    """A human move: applied now, even while the task's agent is running a turn."""
    request = MoveRequest(
        task_id=task_id,
        workflow_id=body.workflow_id,
        workflow_step_id=body.workflow_step_id,
        position=body.position,
        actor=ACTOR_USER,
    )
    result = await move_service.move(request, human=True)
    return await move_service.presenter.envelope(result, "rest")
