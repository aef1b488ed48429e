"""U+0000 in input: PostgreSQL refuses it in text and JSON, SQLite stores it; both must give
the same answer, a 400 naming the field, before any SQL runs (CONTRACT §8)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

NUL = "\x00"


def nul_message(field: str) -> str:
    return f"{field}: must not contain NUL characters"


def find_nul(value: Any, root: str = "") -> str | None:
    """The dotted path (`answers.0.custom_text`) of the first string — key or value, at any
    depth — that contains NUL, or None. A NUL in a key names the object holding it."""
    stack: list[tuple[str, Any]] = [(root, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and NUL in key:
                    return path
                stack.append((_join(path, str(key)), child))
        elif isinstance(item, (list, tuple)):
            stack.extend((_join(path, str(i)), child) for i, child in enumerate(item))
    return None


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def nul_in_json(body: bytes) -> str | None:
    """The field of a JSON body that holds NUL. Bodies without the escape (JSON can only
    carry NUL as `\\u0000`; a raw NUL byte is invalid JSON) skip the parse."""
    if b"\\u0000" not in body and b"\x00" not in body:
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not JSON: the route's own parsing answers for it
    found = find_nul(document)
    if found is None:
        return None
    return found or "body"


def nul_in_form(body: bytes) -> str | None:
    """The field of a urlencoded form body that holds NUL."""
    return nul_in_query(body)


def nul_in_query(query: bytes) -> str | None:
    """The name of a query-string (or form) parameter whose name or value holds NUL."""
    if b"%00" not in query and b"\x00" not in query:
        return None
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if NUL in name or NUL in value:
            return name.replace(NUL, "") or "query"
    return None
