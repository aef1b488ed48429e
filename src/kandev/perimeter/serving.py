"""How uvicorn must be configured for the perimeter to hold.

uvicorn's `proxy_headers` (on by default) rewrites the client address from X-Forwarded-For
for any peer in FORWARDED_ALLOW_IPS, which defaults to loopback — so any local process, or
anything reaching a loopback-bound port, picks its own address. The perimeter does that job
itself, only for --trust-proxy; uvicorn's must be off.
"""

from __future__ import annotations

from typing import Any


def uvicorn_options() -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run` / `uvicorn.Config` that every server uses."""
    return {"proxy_headers": False}
