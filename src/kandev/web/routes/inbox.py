"""`/inbox`: every open question the signed-in user may answer, across workspaces, oldest
first, answerable in place; plus the fragments the page and the top-bar badge refetch on
events, and the no-JavaScript answer form.

The list is ClarificationService.list_pending, the code behind GET /api/v1/clarification and
`list_pending_questions_kandev` (same scoping, same order), beside PermissionService.list_pending
(GET /api/v1/permissions, `list_pending_permissions_kandev`), merged oldest first; answering
is resolve_bundle, deciding is PermissionService.respond: the one path of REST and MCP each.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from kandev.api.deps import (
    ClarificationServiceDep,
    PermissionServiceDep,
    TaskServiceDep,
    WorkspaceServiceDep,
)
from kandev.api.errors import status_for
from kandev.board.models import Task
from kandev.board.tasks import TaskService
from kandev.board.workspaces import WorkspaceService
from kandev.clarification.inputs import RespondInput
from kandev.clarification.listing import MAX_LIMIT
from kandev.clarification.service import ClarificationService
from kandev.errors import KandevError, NotFound, ValidationFailed
from kandev.permissions.service import PermissionService
from kandev.web.inbox_count import open_item_count
from kandev.web.pages_inbox import (
    KIND_PERMISSION,
    KIND_QUESTION,
    InboxCount,
    InboxItem,
    InboxPage,
)
from kandev.web.render import render
from kandev.web.routes.common import form_text, page_route, parse_form

router = APIRouter()
UNANSWERED = "pick an option or type an answer for every question, or skip them all"
SKIP_REASON = "User skipped"  # the overlay's reason too (clarification.js SKIP_REASON)


def humanize_age(seconds: int) -> str:
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def overlay_rows(bundle: dict[str, Any]) -> list[dict[str, Any]]:
    """The bundle's questions as the message rows the overlay expects (one per question)."""
    total = len(bundle["questions"])
    return [
        {
            "id": f"{bundle['pending_id']}-{index}",
            "session_id": bundle["session_id"],
            "task_id": bundle["task_id"],
            "turn_id": None,
            "type": "clarification_request",
            "content": q["prompt"],
            "created_at": bundle["created_at"],
            "metadata": {
                "pending_id": bundle["pending_id"],
                "question_id": q["question_id"],
                "question_index": index,
                "question_total": total,
                "status": "pending",
                "context": bundle["context"],
                "question": {
                    "id": q["question_id"],
                    "title": q["title"],
                    "prompt": q["prompt"],
                    "options": q["options"],
                },
            },
        }
        for index, q in enumerate(bundle["questions"])
    ]


async def _items(
    clarification_service: ClarificationService,
    permission_service: PermissionService,
    workspace_service: WorkspaceService,
    task_service: TaskService,
) -> tuple[list[InboxItem], bool]:
    """Open questions and permission requests, oldest first (the order both lists use)."""
    envelope = await clarification_service.list_pending(limit=MAX_LIMIT)
    requests = await permission_service.list_pending(limit=MAX_LIMIT)
    workspaces, _ = await workspace_service.list_workspaces()
    workspace_names = {w.id: w.name for w in workspaces}
    tasks: dict[str, Any] = {}

    async def task_of(task_id: str) -> Any:
        if task_id not in tasks:
            try:
                tasks[task_id] = await task_service.get_task(task_id)
            except NotFound:  # deleted since the list was read
                tasks[task_id] = None
        return tasks[task_id]

    def item(kind: str, entry: dict[str, Any], task: Task, **specific: Any) -> InboxItem:
        return InboxItem(
            kind=kind,
            pending_id=entry["pending_id"],
            task_id=task.id,
            task_title=task.title,
            workspace_name=workspace_names.get(task.workspace_id, ""),
            session_id=entry["session_id"],
            created_at=entry["created_at"],
            age=humanize_age(entry["age_seconds"]),
            **specific,
        )

    items: list[InboxItem] = []
    for bundle in envelope["bundles"]:
        if (task := await task_of(bundle["task_id"])) is not None:
            items.append(
                item(
                    KIND_QUESTION,
                    bundle,
                    task,
                    context=bundle["context"],
                    questions=bundle["questions"],
                    rows=overlay_rows(bundle),
                )
            )
    for request in requests["permissions"]:
        if (task := await task_of(request["task_id"])) is not None:
            items.append(
                item(
                    KIND_PERMISSION,
                    request,
                    task,
                    context="",
                    questions=[],
                    rows=[],
                    tool_call=request["tool_call"],
                    options=request["options"],
                )
            )
    items.sort(key=lambda item: (item.created_at, item.pending_id))
    return items, bool(envelope["next_cursor"] or requests["next_cursor"])


@router.get("/inbox", name="inbox")
@page_route
async def inbox_page(
    clarification_service: ClarificationServiceDep,
    permission_service: PermissionServiceDep,
    workspace_service: WorkspaceServiceDep,
    task_service: TaskServiceDep,
    request: Request,
) -> Response:
    items, more = await _items(
        clarification_service, permission_service, workspace_service, task_service
    )
    return render(request, "inbox.html", InboxPage(items=items, more=more), nav="inbox")


@router.get("/inbox/list", name="inbox_list")
@page_route
async def inbox_list(
    clarification_service: ClarificationServiceDep,
    permission_service: PermissionServiceDep,
    workspace_service: WorkspaceServiceDep,
    task_service: TaskServiceDep,
    request: Request,
) -> Response:
    """The list alone (the page refetches it on events and merges it in)."""
    items, more = await _items(
        clarification_service, permission_service, workspace_service, task_service
    )
    return render(request, "partials/_inbox_list.html", InboxPage(items=items, more=more))


@router.get("/inbox/count", name="inbox_count")
@page_route
async def inbox_count(
    clarification_service: ClarificationServiceDep,
    permission_service: PermissionServiceDep,
    request: Request,
) -> Response:
    count = await open_item_count(clarification_service, permission_service)
    return render(request, "partials/inbox_count.html", InboxCount(count=count))


def _answers(form: Any) -> list[dict[str, Any]]:
    """Form fields `option.<question_id>` (checkboxes) and `text.<question_id>`; free text
    wins over options, as in the overlay."""
    question_ids = [v for v in form.getlist("question_id") if isinstance(v, str)]
    answers: list[dict[str, Any]] = []
    for question_id in question_ids:
        text = form_text(form, f"text.{question_id}").strip()
        if text:
            answers.append({"question_id": question_id, "custom_text": text})
        else:
            selected = [v for v in form.getlist(f"option.{question_id}") if isinstance(v, str)]
            answers.append({"question_id": question_id, "selected_options": selected})
    return answers


@router.post("/inbox/{pending_id}/answer", name="inbox_answer")
@page_route
async def inbox_answer(
    clarification_service: ClarificationServiceDep,
    permission_service: PermissionServiceDep,
    workspace_service: WorkspaceServiceDep,
    task_service: TaskServiceDep,
    request: Request,
    pending_id: str,
) -> Response:
    """The no-JavaScript answer: the same resolve_bundle as POST …/respond."""
    form = await request.form()
    if form_text(form, "action") == "skip":
        values: dict[str, Any] = {"rejected": True, "reject_reason": SKIP_REASON}
    else:
        values = {"answers": _answers(form)}
    try:
        # As the overlay: Submit needs every question answered (Skip all declines them).
        if any(
            not a.get("custom_text") and not a["selected_options"]
            for a in values.get("answers", [])
        ):
            raise ValidationFailed("answers", UNANSWERED)
        body = parse_form(RespondInput, values)
        answers = [a.model_dump() for a in body.answers] if body.answers is not None else None
        await clarification_service.resolve_bundle(
            pending_id, answers, body.rejected, body.reject_reason, via="web"
        )
    except KandevError as exc:
        if isinstance(exc, NotFound):
            raise
        items, more = await _items(
            clarification_service, permission_service, workspace_service, task_service
        )
        page = InboxPage(items=items, more=more, error=exc.message)
        return render(request, "inbox.html", page, nav="inbox", status_code=status_for(exc))
    return RedirectResponse("/inbox", status_code=303)


def _same_site(back: str) -> str:
    return back if back.startswith("/") and not back.startswith("//") else "/inbox"


@router.post("/permissions/{pending_id}/respond-form", name="permission_respond_form")
@page_route
async def permission_respond_form(
    clarification_service: ClarificationServiceDep,
    permission_service: PermissionServiceDep,
    workspace_service: WorkspaceServiceDep,
    task_service: TaskServiceDep,
    request: Request,
    pending_id: str,
) -> Response:
    """The no-JavaScript decision (a permission card's option button, on the task page or
    the inbox): the same PermissionService.respond as POST /api/v1/permissions/{id}/respond;
    back to the page it came from. A loser is redirected too: the card shows what won."""
    form = await request.form()
    back = _same_site(form_text(form, "back"))
    try:
        await permission_service.respond(pending_id, form_text(form, "option_id"), via="web")
    except KandevError as exc:
        if isinstance(exc, NotFound) or not back.startswith("/inbox"):
            raise
        items, more = await _items(
            clarification_service, permission_service, workspace_service, task_service
        )
        page = InboxPage(items=items, more=more, error=exc.message)
        return render(request, "inbox.html", page, nav="inbox", status_code=status_for(exc))
    return RedirectResponse(back, status_code=303)
