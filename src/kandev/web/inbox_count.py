"""The top bar's inbox count: open questions and permission requests the caller may answer,
from the lists the inbox, `list_pending_questions_kandev` and `list_pending_permissions_kandev`
use (ClarificationService.list_pending, PermissionService.list_pending: the same scoping).

Computed once per full page (web/topbar.py) and by the `/inbox/count` fragment the badge
refetches on events; never on a timer.
"""

from __future__ import annotations

from kandev.clarification.listing import MAX_LIMIT
from kandev.clarification.service import ClarificationService
from kandev.permissions.service import PermissionService


async def open_item_count(
    clarifications: ClarificationService, permissions: PermissionService
) -> int:
    """Open questions (bundles) plus open permission requests visible to the caller, each
    capped at one page of MAX_LIMIT."""
    questions = await clarifications.list_pending(limit=MAX_LIMIT)
    requests = await permissions.list_pending(limit=MAX_LIMIT)
    return int(questions["count"]) + int(requests["count"])
