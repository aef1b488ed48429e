"""The task page `/tasks/{id}`: stepper, session tabs, the live conversation, the composer
and the clarification overlay; plus the no-JavaScript form fallbacks and fragments."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from kandev.api.deps import (
    AgentProfileServiceDep,
    ChangesServiceDep,
    EventsServiceDep,
    MoveServiceDep,
    SessionServiceDep,
    TaskPresenterDep,
    TaskServiceDep,
    WorkflowServiceDep,
    WorkspaceServiceDep,
)
from kandev.api.errors import status_for
from kandev.board.models import Workspace
from kandev.errors import Conflict, KandevError, NotFound
from kandev.moves.models import ACTOR_USER, MoveRequest
from kandev.repos.changes import MergeConflict
from kandev.repos.inputs import CommitCreate, MergeCreate
from kandev.sessions.inputs import MessagePageQuery, PromptInput, SessionCreate
from kandev.web.diff_view import file_views
from kandev.web.pages import ChangesFragment, MessagesFragment, TaskPage
from kandev.web.render import render
from kandev.web.routes.common import form_text, page_route, parse_form

router = APIRouter()
CLARIFICATION_TYPE = "clarification_request"
CONVERSATION_LIMIT = 500  # the newest messages shown; older ones stay reachable over REST


def _pick_session(sessions: list[dict], wanted: str | None) -> dict | None:
    for s in sessions:
        if s["id"] == wanted:
            return s
    live = [s for s in sessions if s["state"] not in ("COMPLETED", "FAILED", "CANCELLED")]
    primary = [s for s in sessions if s["is_primary"]]
    return (live or primary or sessions)[-1] if sessions else None


@router.get("/tasks/{task_id}", name="task_page")
@page_route
async def task_page(
    presenter: TaskPresenterDep,
    events: EventsServiceDep,
    task_service: TaskServiceDep,
    workflow_service: WorkflowServiceDep,
    workspace_service: WorkspaceServiceDep,
    session_service: SessionServiceDep,
    profile_service: AgentProfileServiceDep,
    request: Request,
    task_id: str,
    session: str | None = None,
) -> Response:
    last_event_id = events.last_id()  # before reading: what follows is replayed
    task = await presenter.task(await task_service.get_task(task_id))
    workflow = await workflow_service.get_workflow(task["workflow_id"])
    workspace = await _workspace_of(workspace_service, task["workspace_id"])
    sessions = await session_service.list_task_sessions(task_id)
    chosen = _pick_session(sessions, session)
    messages, has_more = [], False
    if chosen is not None:
        newest, has_more = await session_service.list_messages(
            chosen["id"], MessagePageQuery(limit=CONVERSATION_LIMIT, sort="desc")
        )
        messages = list(reversed(newest))
    profiles = await profile_service.list_profiles()
    page = TaskPage(
        task=task,
        workflow=workflow,
        sessions=sessions,
        session=chosen,
        messages=messages,
        has_more=has_more,
        profiles=profiles,
        profile_names={p.id: p.name for p in profiles},
        clarification_rows=[m.to_json() for m in messages if m.type == CLARIFICATION_TYPE],
        last_event_id=last_event_id,
        workspace=workspace,
    )
    return render(request, "task.html", page, nav="board")


async def _workspace_of(workspaces: WorkspaceServiceDep, workspace_id: str) -> Workspace | None:
    """The task's workspace for the breadcrumb; None when it names none that exists (a task
    the caller may still see)."""
    if not workspace_id:
        return None
    try:
        return await workspaces.get_workspace(workspace_id)
    except NotFound:
        return None


@router.get("/sessions/{session_id}/messages-fragment", name="messages_fragment")
@page_route
async def messages_fragment(
    session_service: SessionServiceDep,
    request: Request,
    session_id: str,
    after: str | None = None,
    limit: int = 100,
) -> Response:
    """Conversation items after `after` (or the first ones), rendered as on the page."""
    query = MessagePageQuery(after=after, limit=max(1, min(limit, 500)))
    messages, _ = await session_service.list_messages(session_id, query)
    return render(request, "partials/_messages.html", MessagesFragment(messages=messages))


def _changes_fragment(
    request: Request,
    task_id: str,
    changes: dict[str, Any],
    *,
    notice: str = "",
    error: str = "",
    status_code: int = 200,
) -> Response:
    page = ChangesFragment(
        task_id=task_id,
        branch=changes["branch"],
        base_branch=changes["base_branch"],
        additions=changes["additions"],
        deletions=changes["deletions"],
        truncated=changes["truncated"],
        reviewed_files=changes["reviewed_files"],
        files=file_views(changes),
        overlaps=changes.get("overlaps", []),
        since=changes.get("since") or "",
        last_review=changes.get("last_review"),
        notice=notice,
        error=error,
    )
    return render(request, "partials/_changes.html", page, status_code=status_code)


def _failure_text(exc: KandevError) -> str:
    if isinstance(exc, MergeConflict):
        return f"Merge refused: conflicts in {', '.join(exc.conflicts)} — nothing was changed"
    return exc.message


def _acted(request: Request, task_id: str, panel: dict[str, Any], notice: str) -> Response:
    """After a commit or a merge from the panel: the panel with what happened (HX-Request),
    or back to the page (a failure is the error page, with REST's status)."""
    failure: KandevError | None = panel["failure"]
    if request.headers.get("HX-Request") != "true":
        if failure is not None:
            if isinstance(failure, MergeConflict):
                raise Conflict(_failure_text(failure))
            raise failure
        return RedirectResponse(f"/tasks/{task_id}#changes-panel", 303)
    if failure is not None:
        return _changes_fragment(
            request, task_id, panel, error=_failure_text(failure), status_code=status_for(failure)
        )
    return _changes_fragment(request, task_id, panel, notice=notice)


@router.get("/tasks/{task_id}/changes-fragment", name="changes_fragment")
@page_route
async def changes_fragment(
    changes_service: ChangesServiceDep,
    request: Request,
    task_id: str,
    since: str | None = Query(default=None, max_length=64),
) -> Response:
    """The Changes panel of a task on a repository: files, totals, highlighted diffs; with
    `since=last_review`, those since the caller's last review."""
    panel = await changes_service.review_panel(task_id, since)
    return _changes_fragment(request, task_id, panel)


@router.post("/tasks/{task_id}/reviewed-form", name="reviewed_form")
@page_route
async def reviewed_form(
    changes_service: ChangesServiceDep, request: Request, task_id: str
) -> Response:
    """Mark one file reviewed (reviewed=1) or not; the panel again (the page without JS)."""
    form = await request.form()
    changes = await changes_service.mark_reviewed(
        task_id,
        form_text(form, "path"),
        form_text(form, "reviewed") == "1",
        form_text(form, "since") or None,
    )
    if request.headers.get("HX-Request") != "true":
        return RedirectResponse(f"/tasks/{task_id}#changes-panel", 303)
    return _changes_fragment(request, task_id, changes)


@router.post("/tasks/{task_id}/commit-form", name="commit_form")
@page_route
async def commit_form(
    changes_service: ChangesServiceDep, request: Request, task_id: str
) -> Response:
    """Commit everything in the task's worktree with `message`; the panel again."""
    form = await request.form()
    data = parse_form(CommitCreate, {"message": form_text(form, "message")})
    panel = await changes_service.commit_panel(task_id, data)
    result = panel["result"] or {}
    count = len(result.get("files", []))
    notice = (
        f"Committed {str(result.get('commit', ''))[:7]} ({count} file{'' if count == 1 else 's'})"
    )
    return _acted(request, task_id, panel, notice)


@router.post("/tasks/{task_id}/merge-form", name="merge_form")
@page_route
async def merge_form(
    changes_service: ChangesServiceDep, request: Request, task_id: str
) -> Response:
    """Merge the task branch into its base branch (`strategy` merge|squash); the panel
    again. A conflict changes nothing and lists the conflicting paths."""
    form = await request.form()
    data = parse_form(MergeCreate, {"strategy": form_text(form, "strategy") or "merge"})
    panel = await changes_service.merge_panel(task_id, data)
    result = panel["result"] or {}
    notice = (
        f"{'Squashed' if result.get('strategy') == 'squash' else 'Merged'} into "
        f"{result.get('base_branch', '')} as {str(result.get('commit', ''))[:7]}"
    )
    return _acted(request, task_id, panel, notice)


# --- form fallbacks (the page works without JavaScript) --------------------------------


@router.post("/tasks/{task_id}/move-form", name="task_move_form")
@page_route
async def move_form(move_service: MoveServiceDep, request: Request, task_id: str) -> Response:
    form = await request.form()
    await move_service.move(
        MoveRequest(
            task_id=task_id,
            workflow_id=form_text(form, "workflow_id"),
            workflow_step_id=form_text(form, "workflow_step_id"),
            position=None,
            actor=ACTOR_USER,
        ),
        human=True,
    )
    back = form_text(form, "back")
    return RedirectResponse(back if back.startswith("/") else f"/tasks/{task_id}", 303)


@router.post("/tasks/{task_id}/sessions-form", name="session_new_form")
@page_route
async def new_session_form(
    session_service: SessionServiceDep, request: Request, task_id: str
) -> Response:
    form = await request.form()
    values = {"agent_profile_id": form_text(form, "agent_profile_id") or None}
    if form_text(form, "prompt").strip():
        values["prompt"] = form_text(form, "prompt").strip()
    created = await session_service.create_session(task_id, parse_form(SessionCreate, values))
    return RedirectResponse(f"/tasks/{task_id}?session={created['id']}", 303)


@router.post("/sessions/{session_id}/prompt-form", name="prompt_form")
@page_route
async def prompt_form(
    session_service: SessionServiceDep, request: Request, session_id: str
) -> Response:
    form = await request.form()
    body = parse_form(PromptInput, {"text": form_text(form, "text")})
    await session_service.prompt(session_id, body.text)
    session = await session_service.get_session(session_id)
    return RedirectResponse(f"/tasks/{session['task_id']}?session={session_id}", 303)
