"""A task's changes as the Changes panel shows them: unified diff rows with old/new line
numbers, the code highlighted server-side (Pygments), one line at a time so every row
keeps its numbers. Everything from the diff is escaped; only Pygments' token classes are
markup."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from markupsafe import Markup
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")
HIGHLIGHT_LINE_CAP = 2000  # longer lines are shown plain


@dataclass(frozen=True)
class DiffRow:
    kind: str  # "hunk" | "add" | "del" | "ctx" | "note"
    old: int | None
    new: int | None
    code: Markup

    @property
    def line(self) -> int | None:
        """The line a comment on this row refers to: the new side's, else the old side's."""
        return self.new if self.new is not None else self.old


@dataclass(frozen=True)
class FileView:
    path: str
    old_path: str | None
    status: str
    additions: int
    deletions: int
    binary: bool
    truncated: bool
    fingerprint: str
    reviewed: str  # "" | "reviewed" | "stale"
    rows: list[DiffRow]
    markable: bool = True  # among the task's changes (a file changed back is not)


@lru_cache(maxsize=256)
def _lexer(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _css_class(ttype: _TokenType) -> str:
    current: _TokenType | None = ttype
    while current is not None and current not in STANDARD_TYPES:
        current = current.parent
    return STANDARD_TYPES[current] if current is not None else ""


def highlight_line(code: str, lexer: Lexer) -> Markup:
    """One line of code as escaped HTML with `<span class="…">` per token."""
    if not code or len(code) > HIGHLIGHT_LINE_CAP or isinstance(lexer, TextLexer):
        return Markup(html.escape(code))
    parts = []
    for ttype, value in lexer.get_tokens(code):
        value = value.rstrip("\n") if value.endswith("\n") else value
        if not value:
            continue
        css = _css_class(ttype)
        escaped = html.escape(value)
        parts.append(f'<span class="{css}">{escaped}</span>' if css else escaped)
    return Markup("".join(parts))


def diff_rows(path: str, diff: str) -> list[DiffRow]:
    """The hunks of one file's `git diff` text as rows (the headers before them skipped)."""
    lexer = _lexer(path)
    rows: list[DiffRow] = []
    old = new = 0
    in_hunk = False
    for raw in diff.split("\n"):
        match = HUNK.match(raw)
        if match:
            old, new = int(match.group(1)), int(match.group(2))
            in_hunk = True
            rows.append(DiffRow("hunk", None, None, Markup(html.escape(raw))))
            continue
        if not in_hunk or not raw:
            continue
        sign, code = raw[0], raw[1:]
        if sign == "+":
            rows.append(DiffRow("add", None, new, highlight_line(code, lexer)))
            new += 1
        elif sign == "-":
            rows.append(DiffRow("del", old, None, highlight_line(code, lexer)))
            old += 1
        elif sign == " ":
            rows.append(DiffRow("ctx", old, new, highlight_line(code, lexer)))
            old += 1
            new += 1
        elif sign == "\\":
            rows.append(DiffRow("note", None, None, Markup(html.escape(raw[2:]))))
    return rows


def file_views(changes: dict[str, Any]) -> list[FileView]:
    return [
        FileView(
            path=f["path"],
            old_path=f["old_path"],
            status=f["status"],
            additions=f["additions"],
            deletions=f["deletions"],
            binary=f["binary"],
            truncated=f["truncated"],
            fingerprint=f.get("fingerprint", ""),
            reviewed=f.get("reviewed", ""),
            rows=[] if f["binary"] else diff_rows(f["path"], f["diff"]),
            markable=f.get("markable", True),
        )
        for f in changes["files"]
    ]
