"""What base.html's top bar shows besides the identity, loaded once per full page.

routes/common.page_route calls `load_top_bar` before the handler; base.html reads
`request.state.inbox_count` (the badge) and `request.state.user_label` (who is signed in).
Fragments (HX-Request) skip it: they have no top bar.
"""

from __future__ import annotations

import logging

from starlette.requests import Request

from kandev.auth.identity import current_identity
from kandev.errors import KandevError
from kandev.services import SurfaceServices
from kandev.web.inbox_count import open_item_count

log = logging.getLogger(__name__)


def wants_top_bar(request: Request) -> bool:
    """Any full page, including one a form post renders (a new token, a refused save)."""
    return request.headers.get("hx-request") != "true"


async def load_top_bar(request: Request, services: SurfaceServices) -> None:
    if not wants_top_bar(request):
        return
    try:
        request.state.inbox_count = await open_item_count(
            services.clarifications, services.permissions
        )
    except KandevError:  # logged by the list; the page itself still renders, without a count
        log.warning("inbox count unavailable for the top bar")
    identity = current_identity()
    if identity is not None and not identity.synthetic:
        user = (await services.auth.me(identity))["user"] or {}
        request.state.user_label = user.get("display_name") or user.get("email") or ""
