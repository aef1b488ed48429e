"""Static assets: Kandev's own files (package data) and third-party files from node_modules.

Templates never hard-code an asset URL: `static(path)` appends `?v=<sha256[:12]>` of the
file, so a changed file gets a new URL and a hashed URL can be cached forever. Third-party
code is never copied into the repository; `/static/vendor/<name>` serves an allow-listed
file from the pinned `node_modules` (installed by `make` from package-lock.json).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from starlette.responses import FileResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).parent / "static"
# Public name → file inside node_modules. Only these are served.
VENDOR_FILES: dict[str, str] = {
    "htmx.min.js": "htmx.org/dist/htmx.min.js",
}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def node_modules_dir() -> Path:
    """KANDEV_NODE_MODULES, else the checkout's node_modules (editable installs)."""
    configured = os.environ.get("KANDEV_NODE_MODULES")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / "node_modules"


@lru_cache(maxsize=256)
def _file_hash(path: Path, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def asset_hash(path: Path) -> str:
    try:
        return _file_hash(path, path.stat().st_mtime_ns)
    except OSError:
        return "missing"


def own_asset_path(relative: str) -> Path | None:
    path = (STATIC_DIR / relative).resolve()
    if not path.is_relative_to(STATIC_DIR.resolve()) or not path.is_file():
        return None
    return path


def vendor_asset_path(name: str) -> Path | None:
    relative = VENDOR_FILES.get(name)
    if relative is None:
        return None
    path = node_modules_dir() / relative
    return path if path.is_file() else None


def static_url(relative: str) -> str:
    """URL of an own asset, e.g. static('css/app.css') → /static/css/app.css?v=…"""
    path = own_asset_path(relative)
    return f"/static/{relative}?v={asset_hash(path) if path else 'missing'}"


def vendor_url(name: str) -> str:
    path = vendor_asset_path(name)
    return f"/static/vendor/{name}?v={asset_hash(path) if path else 'missing'}"


def _cache_control(path: Path, query: str) -> str:
    wanted = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("v")
    return IMMUTABLE if wanted == asset_hash(path) else REVALIDATE


class OwnStatic(StaticFiles):
    """StaticFiles on the package's static/ folder, with the hashed-URL cache rule."""

    def file_response(self, full_path, stat_result, scope: Scope, status_code: int = 200):
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = _cache_control(
            Path(full_path), scope.get("query_string", b"").decode()
        )
        return response


def static_app() -> StaticFiles:
    return OwnStatic(directory=STATIC_DIR)


def vendor_response(name: str, query: str) -> Response:
    path = vendor_asset_path(name)
    if path is None:
        return JSONResponse({"error": "not found"}, status_code=404)
    return FileResponse(
        path,
        media_type="text/javascript",
        headers={"Cache-Control": _cache_control(path, query)},
    )
