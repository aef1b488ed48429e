from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from kandev.web.assets import vendor_response

router = APIRouter()


@router.get("/static/vendor/{name}")
async def vendor_file(name: str, request: Request) -> Response:
    """An allow-listed third-party file from the pinned node_modules."""
    return vendor_response(name, request.url.query)
