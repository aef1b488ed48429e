"""Domain errors on a page: the REST status mapping, rendered as HTML (or a fragment)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from kandev.api.errors import status_for
from kandev.errors import KandevError
from kandev.web.pages import ErrorPage
from kandev.web.render import render

TITLES = {404: "Not found", 400: "Bad request", 409: "Conflict", 403: "Forbidden"}


def error_page(request: Request, exc: KandevError) -> HTMLResponse:
    status = status_for(exc)
    page = ErrorPage(
        status=status, title=TITLES.get(status, "Something went wrong"), message=exc.message
    )
    fragment = request.headers.get("hx-request") == "true"
    return render(
        request, "partials/_error.html" if fragment else "error.html", page, status_code=status
    )
