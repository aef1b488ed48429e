"""The one function that calls Jinja, and the base context every page gets.

Pages pass a frozen dataclass (web/pages.py); `render` adds BASE_CONTEXT's names. The
Environment uses StrictUndefined, so a template cannot silently depend on a stray value.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from kandev.auth.identity import current_identity
from kandev.clarification.outcome import MAX_TEXT_RUNES
from kandev.web.assets import static_url, vendor_url
from kandev.web.error_text import readable_error
from kandev.web.markdown import render_markdown

TEMPLATE_DIR = Path(__file__).parent / "templates"

# name → what it is; tests/web/test_page_contexts.py keeps this honest.
BASE_CONTEXT: dict[str, str] = {
    "request": "the Starlette request",
    "identity": "the signed-in Identity, the synthetic one with auth off, or None",
    "auth_mode": "'disabled', 'setup' or 'enabled'",
    "nav": "which top-bar entry is current ('board', 'inbox', 'settings' or '')",
    "page": "the page's dataclass (web/pages.py)",
}


def _tojson_attr(value: Any) -> Markup:
    """JSON for an HTML attribute or a <script type=application/json> block."""
    text = json.dumps(value, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


def pretty_json(value: Any) -> str:
    """A tool's raw input as indented JSON for a <pre> (autoescaped like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@lru_cache(maxsize=64)
def state_label(state: str) -> str:
    """IN_PROGRESS → 'In Progress' (Jinja's `title` filter is a regex per call)."""
    return " ".join(word.capitalize() for word in state.split("_"))


# A task's `state` is what its agent is doing; its column is the workflow step (which people
# and step rules change). The badge says the former in words that cannot be read as a column
# name ("In Progress" on a Backlog card confused the first users).
ACTIVITY_LABELS: dict[str, str] = {
    "TODO": "Idle",
    "IN_PROGRESS": "Agent working",
    "REVIEW": "Agent done",
    "COMPLETED": "Completed",
    "FAILED": "Agent failed",
    "CANCELLED": "Cancelled",
}
WAITING_LABEL = "Agent waiting"  # a question or permission request is open: "needs input"
ACTIVITY_TITLE = (
    "What the agent is doing on this task. The column is the workflow step: where the task "
    "sits on the board, moved by people and step rules, not by the agent's activity."
)


WAITING_CLASS = "waiting"  # the badge's colour key while a question or permission is open


def activity_label(state: str, pending_action: str | None = None) -> str:
    """The board card's and task header's badge: IN_PROGRESS → 'Agent working'."""
    if pending_action:
        return WAITING_LABEL
    return ACTIVITY_LABELS.get(state) or state_label(state)


def activity_class(state: str, pending_action: str | None = None) -> str:
    """The badge's colour class, one per label: `state-waiting` (needs the human: the
    attention colour) whatever the state, else `state-<state>` (app.css `.chip-state`)."""
    return f"state-{WAITING_CLASS if pending_action else state.lower()}"


def _build_env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATE_DIR),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        static=static_url,
        vendor=vendor_url,
        activity_title=ACTIVITY_TITLE,
        activity_labels={**ACTIVITY_LABELS, "": WAITING_LABEL},
        # The server's limit on an answer's text (code points); clarification.js MAX_RUNES
        # is the same number (tests/web/test_account_http.py keeps them equal).
        answer_max_runes=MAX_TEXT_RUNES,
    )
    env.filters["markdown"] = render_markdown
    env.filters["jsonattr"] = _tojson_attr
    env.filters["pretty_json"] = pretty_json
    env.filters["state_label"] = state_label
    env.filters["activity_label"] = activity_label
    env.filters["activity_class"] = activity_class
    env.filters["readable_error"] = readable_error
    return env


env = _build_env()


def auth_mode(request: Request) -> str:
    return request.app.state.services.auth.mode


def render(
    request: Request,
    template: str,
    page: Any,
    *,
    nav: str = "",
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render a full page or a fragment; `page` is a dataclass instance (or None)."""
    context = {
        "request": request,
        "identity": current_identity(),
        "auth_mode": auth_mode(request),
        "nav": nav,
        "page": page,
    }
    html = env.get_template(template).render(context)
    response = HTMLResponse(html, status_code=status_code, headers=headers)
    response.headers.setdefault("Cache-Control", "no-store")
    return response
