"""Agent text as Markdown, rendered on the server and sanitized (markdown-it-py + nh3)."""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
_TAGS = nh3.ALLOWED_TAGS | {"pre", "code", "table", "thead", "tbody", "tr", "th", "td", "del"}


@lru_cache(maxsize=2048)
def render_markdown(text: str) -> Markup:
    """Safe HTML for `text`: raw HTML in the source is escaped, then the output sanitized."""
    html = _md.render(text or "")
    return Markup(nh3.clean(html, tags=_TAGS, link_rel="noopener noreferrer nofollow"))
