"""Board tools: workspaces, workflows, steps, tasks."""

from __future__ import annotations

from typing import Any

from kandev.board.inputs import Description, RowId, TaskCreate, Title
from kandev.mcp.tools.base import BOTH, NoArgs, ToolArgs, ToolContext, ToolSpec


class ListWorkflowsArgs(ToolArgs):
    workspace_id: RowId | None = None


class WorkflowArgs(ToolArgs):
    workflow_id: RowId


class ListTasksArgs(ToolArgs):
    workflow_id: RowId | None = None
    workspace_id: RowId | None = None


class CreateTaskArgs(ToolArgs):
    workspace_id: RowId
    workflow_id: RowId
    workflow_step_id: RowId | None = None
    title: Title
    description: Description = ""


async def list_workspaces(ctx: ToolContext, _: NoArgs) -> dict[str, Any]:
    workspaces, _total = await ctx.services.workspaces.list_workspaces()
    return {"workspaces": [w.to_json() for w in workspaces]}


async def list_workflows(ctx: ToolContext, args: ListWorkflowsArgs) -> dict[str, Any]:
    workflows, _total = await ctx.services.workflows.list_workflows(args.workspace_id)
    return {"workflows": [w.to_json() for w in workflows]}


async def list_workflow_steps(ctx: ToolContext, args: WorkflowArgs) -> dict[str, Any]:
    workflow = await ctx.services.workflows.get_workflow(args.workflow_id)
    return {"workflow_id": workflow.id, "steps": [s.to_json() for s in workflow.steps]}


async def list_tasks(ctx: ToolContext, args: ListTasksArgs) -> dict[str, Any]:
    tasks, _total = await ctx.services.tasks.list_tasks(
        workflow_id=args.workflow_id, workspace_id=args.workspace_id
    )
    return {"tasks": await ctx.services.presenter.tasks(tasks)}


async def create_task(ctx: ToolContext, args: CreateTaskArgs) -> dict[str, Any]:
    task = await ctx.services.tasks.create_task(TaskCreate(**args.model_dump()))
    return {"task": await ctx.services.presenter.task(task)}


TOOLS = (
    ToolSpec(
        "list_workspaces_kandev",
        "List the Kandev workspaces visible to the caller.",
        NoArgs,
        list_workspaces,
        BOTH,
    ),
    ToolSpec(
        "list_workflows_kandev",
        "List workflows (boards) with their steps, optionally of one workspace.",
        ListWorkflowsArgs,
        list_workflows,
        BOTH,
    ),
    ToolSpec(
        "list_workflow_steps_kandev",
        "List the steps (columns) of a workflow, in board order.",
        WorkflowArgs,
        list_workflow_steps,
        BOTH,
    ),
    ToolSpec(
        "list_tasks_kandev",
        "List tasks, optionally filtered by workflow and/or workspace.",
        ListTasksArgs,
        list_tasks,
        BOTH,
    ),
    ToolSpec(
        "create_task_kandev",
        "Create a task on a workflow; without workflow_step_id it lands on the start step.",
        CreateTaskArgs,
        create_task,
        BOTH,
    ),
)
