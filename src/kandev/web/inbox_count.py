"""The top bar's inbox count: open questions the caller may answer, from the one list the
inbox, GET /api/v1/clarification and `list_pending_questions_kandev` use (same scoping).

Computed once per full page (routes/common.page_route stores it on `request.state`, which
base.html reads) and by the `/inbox/count` fragment the badge refetches on events; never
on a timer.
"""

from __future__ import annotations

from starlette.requests import Request

from kandev.clarification.listing import MAX_LIMIT
from kandev.services import Services


async def open_item_count(services: Services) -> int:
    """Open questions (bundles) visible to the caller, capped at one page of MAX_LIMIT.

    Permission requests (CONTRACT §11) join this count once the permissions service
    exists: add its open-request count here and in routes/inbox.py's item list.
    """
    envelope = await services.clarifications.list_pending(limit=MAX_LIMIT)
    return int(envelope["count"])


def wants_inbox_count(request: Request) -> bool:
    """Only full pages show the top bar; fragments and form posts skip the query."""
    return request.method == "GET" and request.headers.get("hx-request") != "true"
