"""The web UI: server-rendered pages (Jinja2), htmx fragments, SSE-driven live updates.

`router` holds every page and fragment route plus the vendor asset route;
`static_app()` serves Kandev's own CSS and ES modules. Mount both in `create_app`.
"""

from __future__ import annotations

from kandev.web.assets import static_app
from kandev.web.routes import router

__all__ = ["router", "static_app"]
