"""An API error message, as a page shows it: a readable sentence.

The API says `title: must not be empty` (field first, for scripts); a page says
`Title must not be empty.` Every template that shows an error uses the `readable_error`
filter; the page scripts use the same rule (static/js/error_text.js).
"""

from __future__ import annotations

import re

# `field: message`, where field is an identifier or a path such as `answers[0].question_id`.
_FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.\[\]]*): (.+)$", re.DOTALL)
# A message starting with one of these reads on from the field's name ("Title must …");
# any other keeps the colon ("Command: program 'x' not found on PATH.").
_VERBS = frozenset({"must", "is", "are", "cannot", "can", "should", "has", "needs", "may"})


def readable_error(message: str | None) -> str:
    """`ttl_hours: must be an integer` → `Ttl hours must be an integer.`"""
    text = (message or "").strip()
    if not text:
        return ""
    prefixed = _FIELD_PREFIX.match(text)
    if prefixed:
        field, rest = prefixed.groups()
        joiner = " " if rest.split(" ", 1)[0] in _VERBS else ": "
        text = f"{field.replace('_', ' ')}{joiner}{rest}"
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."
