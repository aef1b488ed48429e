"""The top bar's inbox count: open questions the caller may answer, from the one list the
inbox and `list_pending_questions_kandev` use (ClarificationService.list_pending: the same
scoping).

Computed once per full page (web/topbar.py) and by the `/inbox/count` fragment the badge
refetches on events; never on a timer.
"""

from __future__ import annotations

from kandev.clarification.listing import MAX_LIMIT
from kandev.clarification.service import ClarificationService


async def open_item_count(clarifications: ClarificationService) -> int:
    """Open questions (bundles) visible to the caller, capped at one page of MAX_LIMIT.

    Permission requests (CONTRACT §11) join this count once the permissions service
    exists: add its open-request count here and in routes/inbox.py's item list.
    """
    envelope = await clarifications.list_pending(limit=MAX_LIMIT)
    return int(envelope["count"])
