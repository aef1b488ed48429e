"""Who may see pages, in one place. The middleware lets non-/api paths through without an
identity, so each page checks here and redirects instead of answering 401; the sign-in pages
ask here where a caller who does not need them should go instead."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse

from kandev.auth.identity import current_identity

LOGIN_PATH = "/login"
SETUP_PATH = "/setup"


def sign_in_redirect(request: Request) -> RedirectResponse | None:
    """A redirect to /setup or /login when the caller may not see pages, else None."""
    mode = request.app.state.services.auth.mode
    if mode == "disabled" or current_identity() is not None:
        return None
    if mode == "setup":
        return RedirectResponse(SETUP_PATH, status_code=303)
    # Only a page can be returned to; after a refused form post, come back to the board.
    target = "/"
    if request.method in ("GET", "HEAD"):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{LOGIN_PATH}?next={quote(target, safe='')}", status_code=303)


def safe_next(value: str | None) -> str:
    """A same-site path to return to after signing in; anything else is the board.

    Refused: absolute URLs, scheme-relative `//host`, `/\\host` (browsers read `\\` as `/`),
    and control characters, so `?next=` can never send a user to another site.
    """
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value) or "\\" in value:
        return "/"
    return value


def sign_in_page_redirect(request: Request, page: str) -> RedirectResponse | None:
    """Where a caller goes instead of the sign-in page `page` (LOGIN_PATH or SETUP_PATH):
    auth off → the board; mode setup → /setup; setup done → /login; signed in → `next`."""
    mode = request.app.state.services.auth.mode
    if mode == "disabled":
        return RedirectResponse("/", status_code=303)
    if mode == "setup":
        return None if page == SETUP_PATH else RedirectResponse(SETUP_PATH, status_code=303)
    identity = current_identity()
    if identity is not None and not identity.synthetic:
        return RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
    return None if page == LOGIN_PATH else RedirectResponse(LOGIN_PATH, status_code=303)
