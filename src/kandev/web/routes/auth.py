"""Sign-in pages: `/login`, `/setup` (first admin, mode setup) and the sign-out form.

Each handler calls the one AuthService method REST calls and sets the same cookie
(api.auth.set_session_cookie); errors from the service are shown inline on the form.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from kandev.api.auth import SAME_SITE, client_ip, is_https, set_session_cookie
from kandev.api.deps import AuthServiceDep
from kandev.api.errors import status_for
from kandev.auth.identity import current_identity
from kandev.auth.middleware import SESSION_COOKIE
from kandev.errors import KandevError
from kandev.web.guard import LOGIN_PATH, SETUP_PATH, safe_next, sign_in_page_redirect
from kandev.web.pages_account import SignInPage
from kandev.web.render import render
from kandev.web.routes.common import form_text

router = APIRouter()


@router.get(LOGIN_PATH, name="login")
async def login_page(request: Request, next: str = "/") -> Response:
    redirect = sign_in_page_redirect(request, LOGIN_PATH)
    if redirect is not None:
        return redirect
    return render(request, "login.html", SignInPage(mode="login", next=safe_next(next)))


@router.post(LOGIN_PATH, name="login_form")
async def login_form(auth_service: AuthServiceDep, request: Request) -> Response:
    redirect = sign_in_page_redirect(request, LOGIN_PATH)
    if redirect is not None:
        return redirect
    form = await request.form()
    email, target = form_text(form, "email"), safe_next(form_text(form, "next"))
    try:
        grant = await auth_service.login(
            email,
            form_text(form, "password"),
            client_ip=client_ip(request),
            user_agent=request.headers.get("user-agent", ""),
        )
    except KandevError as exc:
        page = SignInPage(mode="login", next=target, email=email, error=exc.message)
        return render(request, "login.html", page, status_code=status_for(exc))
    response = RedirectResponse(target, status_code=303)
    set_session_cookie(response, request, grant)
    return response


@router.get(SETUP_PATH, name="setup")
async def setup_page(request: Request) -> Response:
    redirect = sign_in_page_redirect(request, SETUP_PATH)
    if redirect is not None:
        return redirect
    return render(request, "login.html", SignInPage(mode="setup", next="/"))


@router.post(SETUP_PATH, name="setup_form")
async def setup_form(auth_service: AuthServiceDep, request: Request) -> Response:
    redirect = sign_in_page_redirect(request, SETUP_PATH)
    if redirect is not None:
        return redirect
    form = await request.form()
    email, display_name = form_text(form, "email"), form_text(form, "display_name")
    try:
        grant = await auth_service.setup(
            email,
            form_text(form, "password"),
            display_name or None,
            client_ip=client_ip(request),
            user_agent=request.headers.get("user-agent", ""),
        )
    except KandevError as exc:
        page = SignInPage(
            mode="setup", next="/", email=email, display_name=display_name, error=exc.message
        )
        return render(request, "login.html", page, status_code=status_for(exc))
    response = RedirectResponse("/", status_code=303)
    set_session_cookie(response, request, grant)
    return response


@router.post("/logout", name="logout_form")
async def logout_form(auth_service: AuthServiceDep, request: Request) -> Response:
    """The top bar's sign-out form: end the cookie session (as POST /api/v1/auth/logout)."""
    await auth_service.logout(current_identity())
    response = RedirectResponse(LOGIN_PATH, status_code=303)
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite=SAME_SITE, secure=is_https(request)
    )
    return response
