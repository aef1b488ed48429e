"""The board `/`: workspace and workflow pickers, one column per step, live cards."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from kandev.api.deps import (
    AgentProfileServiceDep,
    EventsServiceDep,
    RepositoryServiceDep,
    SessionServiceDep,
    TaskPresenterDep,
    TaskServiceDep,
    WorkflowServiceDep,
    WorkspaceServiceDep,
)
from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.board.models import Workflow, Workspace
from kandev.repos.models import Repository
from kandev.sessions.inputs import SessionCreate
from kandev.web.pages import BoardPage, CardFragment, Column
from kandev.web.render import render
from kandev.web.routes.common import form_text, page_route, parse_form

router = APIRouter()
BOARD_COOKIE = "kandev_board"  # "<workspace_id>:<workflow_id>", the last board shown


def _pick(items: list, wanted: str | None, remembered: str | None):
    by_id = {item.id: item for item in items}
    for candidate in (wanted, remembered):
        if candidate and candidate in by_id:
            return by_id[candidate]
    return items[0] if items else None


def board_url(workspace_id: str = "", workflow_id: str = "") -> str:
    query = "&".join(
        f"{k}={v}" for k, v in (("workspace", workspace_id), ("workflow", workflow_id)) if v
    )
    return "/" + (f"?{query}" if query else "")


@router.get("/", name="board")
@page_route
async def board_page(
    presenter: TaskPresenterDep,
    events: EventsServiceDep,
    workspace_service: WorkspaceServiceDep,
    workflow_service: WorkflowServiceDep,
    task_service: TaskServiceDep,
    profile_service: AgentProfileServiceDep,
    repository_service: RepositoryServiceDep,
    request: Request,
    workspace: str | None = None,
    workflow: str | None = None,
) -> Response:
    last_event_id = events.last_id()  # before reading: what follows is replayed
    remembered_ws, _, remembered_wf = request.cookies.get(BOARD_COOKIE, "").partition(":")
    if workspace:  # an explicit id that is missing or invisible is a 404, as on REST
        await workspace_service.get_workspace(workspace)
    workspaces, _ = await workspace_service.list_workspaces()
    chosen_ws: Workspace | None = _pick(workspaces, workspace, remembered_ws)
    workflows: list[Workflow] = []
    chosen_wf: Workflow | None = None
    columns: list[Column] = []
    total = 0
    repositories: list[Repository] = []
    if chosen_ws is not None:
        workflows, _ = await workflow_service.list_workflows(chosen_ws.id)
        repositories = await repository_service.list_repositories(chosen_ws.id)
        if workflow:
            wanted = await workflow_service.get_workflow(workflow)
            workflow = wanted.id if wanted.workspace_id == chosen_ws.id else None
        chosen_wf = _pick(workflows, workflow, remembered_wf)
    if chosen_wf is not None:
        tasks, _ = await task_service.list_tasks(workflow_id=chosen_wf.id)
        cards = [c for c in await presenter.tasks(tasks) if not c["archived_at"]]
        total = len(cards)
        by_step: dict[str, list] = {step.id: [] for step in chosen_wf.steps}
        for card in cards:
            by_step.setdefault(card["workflow_step_id"], []).append(card)
        columns = [
            Column(step=step, cards=sorted(by_step[step.id], key=lambda c: c["position"]))
            for step in sorted(chosen_wf.steps, key=lambda s: s.position)
        ]
    page = BoardPage(
        workspaces=workspaces,
        workspace=chosen_ws,
        workflows=workflows,
        workflow=chosen_wf,
        columns=columns,
        profiles=await profile_service.list_profiles(),
        total_tasks=total,
        last_event_id=last_event_id,
        repositories=repositories,
    )
    response = render(request, "board.html", page, nav="board")
    if chosen_ws is not None:
        value = f"{chosen_ws.id}:{chosen_wf.id if chosen_wf else ''}"
        response.set_cookie(BOARD_COOKIE, value, max_age=365 * 86400, httponly=True, samesite="lax")
    return response


@router.get("/tasks/{task_id}/card", name="task_card")
@page_route
async def task_card(
    presenter: TaskPresenterDep, task_service: TaskServiceDep, request: Request, task_id: str
) -> Response:
    """One card (htmx/live.js swaps it in); the same data path as the board."""
    card = await presenter.task(await task_service.get_task(task_id))
    return render(request, "partials/card.html", CardFragment(card=card))


@router.post("/workspaces/new", name="workspace_new")
@page_route
async def create_workspace(
    workspace_service: WorkspaceServiceDep, workflow_service: WorkflowServiceDep, request: Request
) -> Response:
    """A workspace with the default workflow (Backlog, In Progress, Review, Done)."""
    form = await request.form()
    data = parse_form(WorkspaceCreate, {"name": form_text(form, "name") or "My workspace"})
    ws = await workspace_service.create_workspace(data)
    wf = await workflow_service.create_workflow(
        parse_form(
            WorkflowCreate,
            {"workspace_id": ws.id, "name": form_text(form, "workflow") or "Development"},
        )
    )
    return RedirectResponse(board_url(ws.id, wf.id), status_code=303)


@router.post("/tasks/new", name="task_new")
@page_route
async def create_task(
    task_service: TaskServiceDep, session_service: SessionServiceDep, request: Request
) -> Response:
    """Create the task, then (with a profile) start its first session with the prompt."""
    form = await request.form()
    values = {
        "workspace_id": form_text(form, "workspace_id"),
        "workflow_id": form_text(form, "workflow_id"),
        "title": form_text(form, "title"),
        "description": form_text(form, "description"),
    }
    for name in ("workflow_step_id", "repository_id"):  # optional: "" leaves the default
        if form_text(form, name):
            values[name] = form_text(form, name)
    task = await task_service.create_task(parse_form(TaskCreate, values))
    profile_id = form_text(form, "agent_profile_id")
    prompt = form_text(form, "prompt").strip()
    if profile_id:
        session = {"agent_profile_id": profile_id}
        if prompt:
            session["prompt"] = prompt
        await session_service.create_session(task.id, parse_form(SessionCreate, session))
    target = (
        f"/tasks/{task.id}"
        if form_text(form, "open")
        else board_url(task.workspace_id, task.workflow_id)
    )
    return RedirectResponse(target, status_code=303)
