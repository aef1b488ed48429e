"""Pages need a signed-in user when auth is on: the middleware lets non-/api paths through
without an identity, so each page checks here and redirects instead of answering 401."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse

from kandev.auth.identity import current_identity


def sign_in_redirect(request: Request) -> RedirectResponse | None:
    """A redirect to /setup or /login when the caller may not see pages, else None."""
    mode = request.app.state.services.auth.mode
    if mode == "disabled" or current_identity() is not None:
        return None
    if mode == "setup":
        return RedirectResponse("/setup", status_code=303)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
