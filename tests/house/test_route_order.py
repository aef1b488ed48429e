"""The app's routers are ordered for speed (the hot paths first), which is only safe while
no route shadows another: every route's own path, with sample values in its parameters,
must resolve to that very route."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.routing import BaseRoute, Match

from kandev.app import create_app
from kandev.config import Settings


def _leaves(routes: list[BaseRoute]) -> Iterator[BaseRoute]:
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _leaves(inner.routes)
        else:
            yield route


def _resolve(routes: list[BaseRoute], scope: dict[str, Any]) -> BaseRoute | None:
    """The route the app would pick: the first full match, into included routers."""
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            inner = getattr(route, "original_router", None)
            return route if inner is None else _resolve(inner.routes, scope)
    return None


def test_every_route_resolves_to_itself(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path / "home"))
    checked = 0
    for route in _leaves(app.router.routes):
        path = getattr(route, "path", None)
        methods = getattr(route, "methods", None)
        if not path or not methods or ("{" in path and ":path}" in path):
            continue  # mounts and catch-all paths have no one sample path
        sample = re.sub(r"\{[^}]+\}", "sample-1", path)
        for method in methods:
            scope = {"type": "http", "path": sample, "method": method, "root_path": ""}
            scope.update(app=app, headers=[], query_string=b"")
            assert _resolve(app.router.routes, scope) is route, f"{method} {path} is shadowed"
            checked += 1
    assert checked > 80  # the API, the pages and the MCP endpoints were all seen
