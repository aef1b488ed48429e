"""What every page handler shares: the service container, form parsing, error pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from kandev.errors import KandevError, ValidationFailed
from kandev.services import SurfaceServices
from kandev.web.errors import error_page
from kandev.web.guard import sign_in_redirect
from kandev.web.topbar import load_top_bar

ModelT = TypeVar("ModelT", bound=BaseModel)


def surface_of(request: Request) -> SurfaceServices:
    """For the wrapper below only: handlers name the services they use (kandev.api.deps)."""
    return request.app.state.services.surface


def page_route(
    handler: Callable[..., Awaitable[Response]],
) -> Callable[..., Awaitable[Response]]:
    """Sign-in redirect first; a domain error becomes the HTML error page with REST's status."""

    @wraps(handler)
    async def wrapper(request: Request, *args: Any, **kwargs: Any) -> Response:
        redirect = sign_in_redirect(request)
        if redirect is not None:
            return redirect
        try:
            await load_top_bar(request, surface_of(request))  # badge and user (base.html)
            return await handler(*args, request=request, **kwargs)
        except KandevError as exc:
            return error_page(request, exc)

    return wrapper


def parse_form(model: type[ModelT], values: dict[str, Any]) -> ModelT:
    """Build a service input from form fields; a bad field is the same 400 as on REST."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "form"
        raise ValidationFailed(field, first.get("msg", "invalid value")) from None


def form_text(form: Any, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""
