"""The one mapping from domain errors to REST responses: {"error": "<message>"}."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from kandev import errors

logger = logging.getLogger(__name__)
INTERNAL_ERROR_STATUS = 500
INTERNAL_ERROR_MESSAGE = "internal error"

STATUS_BY_ERROR: dict[type[errors.KandevError], int] = {
    errors.NotFound: 404,
    errors.ValidationFailed: 400,
    errors.BadRequest: 400,
    errors.Conflict: 409,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.RateLimited: 429,
    errors.Unavailable: 503,
    errors.ServerBusy: 503,
}


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def status_for(exc: errors.KandevError) -> int:
    """The HTTP status of a domain error: the one mapping, shared by REST and the pages."""
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def describe_validation_error(exc: RequestValidationError) -> str:
    """Name the offending field: 'title: String should have at most 500 characters'."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(part) for part in first.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path"):  # where it came from; a field may be `path`
        loc = loc[1:]
    field = ".".join(loc) or "body"
    if first.get("type") == "json_invalid":
        return "body: invalid JSON"
    if first.get("type") == "missing":
        return f"{field}: field required"
    return f"{field}: {first.get('msg', 'invalid value')}"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(errors.KandevError)
    async def _domain(_: Request, exc: errors.KandevError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, errors.Unauthorized) else None
        if isinstance(exc, errors.ServerBusy):
            headers = {"Retry-After": str(exc.retry_after_seconds)}
        return error_response(status_for(exc), exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, describe_validation_error(exc))

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
        # Logged here, before the answer leaves; Starlette then re-raises and the perimeter
        # (outermost) swallows it, so the traceback is logged once and the connection kept.
        if isinstance(exc, errors.ServerBusy):
            # A full database queue met by a middleware (the auth lookup): retryable.
            return await _domain(request, exc)
        logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(INTERNAL_ERROR_STATUS, INTERNAL_ERROR_MESSAGE)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "error"
        if exc.status_code == 404 and message == "Not Found":
            message = "not found"
        return error_response(exc.status_code, message, getattr(exc, "headers", None))
