"""Page and fragment routes, one module per page; `router` collects them."""

from __future__ import annotations

from fastapi import APIRouter

from kandev.web.routes import assets, auth, board, inbox, settings, tasks

router = APIRouter(include_in_schema=False)
for module in (assets, board, tasks, auth, settings, inbox):
    router.include_router(module.router)
