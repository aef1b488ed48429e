"""Bearer secrets. Only SHA-256 hex digests are ever stored; the raw string is shown once.

Prefixed tokens look like `kandev_<kind>_<8 hex>_<43-char secret>`: the 8-hex display
prefix is stored in plain text so a UI can say which token is which, the hash covers the
whole string. Kinds: `pat` (personal access tokens); `agent` (per-session agent tokens).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from functools import lru_cache

SECRET_BYTES = 32  # token_urlsafe(32) → 43 chars of [A-Za-z0-9_-], no padding
SECRET_LENGTH = 43
PREFIX_HEX_LENGTH = 8
PAT_KIND = "pat"
PAT_PREFIX = "kandev_pat_"
# Anything longer than any token we mint is rejected before hashing.
MAX_TOKEN_LENGTH = 128

_SECRET_RE = re.compile(rf"[A-Za-z0-9_-]{{{SECRET_LENGTH}}}")


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def new_session_token() -> str:
    """A browser session token is the bare secret."""
    return new_secret()


def looks_like_session_token(raw: str) -> bool:
    return _SECRET_RE.fullmatch(raw) is not None


@dataclass(frozen=True)
class PrefixedToken:
    raw: str = field(repr=False)  # never in logs or tracebacks
    kind: str
    prefix: str  # the 8 hex display chars

    @property
    def sha256(self) -> str:
        return hash_token(self.raw)


def _head(kind: str) -> str:
    return f"kandev_{kind}_"


def new_prefixed_token(kind: str) -> PrefixedToken:
    prefix = secrets.token_hex(PREFIX_HEX_LENGTH // 2)
    return PrefixedToken(raw=f"{_head(kind)}{prefix}_{new_secret()}", kind=kind, prefix=prefix)


@lru_cache(maxsize=16)
def _shape(kind: str) -> re.Pattern[str]:
    body = rf"([0-9a-f]{{{PREFIX_HEX_LENGTH}}})_[A-Za-z0-9_-]{{{SECRET_LENGTH}}}"
    return re.compile(re.escape(_head(kind)) + body)


def parse_prefixed_token(raw: str, kind: str) -> PrefixedToken | None:
    """The token if `raw` has exactly the shape we mint for `kind`, else None."""
    match = _shape(kind).fullmatch(raw) if len(raw) <= MAX_TOKEN_LENGTH else None
    if match is None:
        return None
    return PrefixedToken(raw=raw, kind=kind, prefix=match.group(1))


def new_pat() -> PrefixedToken:
    return new_prefixed_token(PAT_KIND)


def parse_pat(raw: str) -> PrefixedToken | None:
    return parse_prefixed_token(raw, PAT_KIND)
