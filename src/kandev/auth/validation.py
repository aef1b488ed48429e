"""Input rules for auth requests; each failure names the offending field."""

from __future__ import annotations

from kandev.auth.identity import ROLE_ADMIN, ROLE_MEMBER
from kandev.errors import ValidationFailed

MAX_EMAIL = 320
MIN_PASSWORD = 8
MAX_PASSWORD = 1024
MAX_DISPLAY_NAME = 200
MAX_TOKEN_NAME = 200
MAX_TTL_HOURS = 87_600  # ten years
ROLES = (ROLE_ADMIN, ROLE_MEMBER)


def normalize_email(email: str) -> str:
    return email.strip().lower()


def validate_email(email: object) -> str:
    if not isinstance(email, str):
        raise ValidationFailed("email", "must be a string")
    value = normalize_email(email)
    local, at, domain = value.partition("@")
    if not at or not local or not domain or any(ch.isspace() for ch in value):
        raise ValidationFailed("email", "must be a valid email address")
    if len(value) > MAX_EMAIL:
        raise ValidationFailed("email", f"must be at most {MAX_EMAIL} characters")
    return value


def validate_password(password: object) -> str:
    if not isinstance(password, str):
        raise ValidationFailed("password", "must be a string")
    if len(password) < MIN_PASSWORD:
        raise ValidationFailed("password", f"must be at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise ValidationFailed("password", f"must be at most {MAX_PASSWORD} characters")
    return password


def validate_display_name(display_name: object) -> str:
    if display_name is None:
        return ""
    if not isinstance(display_name, str):
        raise ValidationFailed("display_name", "must be a string")
    value = display_name.strip()
    if len(value) > MAX_DISPLAY_NAME:
        raise ValidationFailed("display_name", f"must be at most {MAX_DISPLAY_NAME} characters")
    return value


def validate_role(role: object) -> str:
    if role is None:
        return ROLE_MEMBER
    if role not in ROLES:
        raise ValidationFailed("role", "must be admin or member")
    return str(role)


def validate_token_name(name: object) -> str:
    if not isinstance(name, str):
        raise ValidationFailed("name", "must be a string")
    value = name.strip()
    if not value:
        raise ValidationFailed("name", "must not be empty")
    if len(value) > MAX_TOKEN_NAME:
        raise ValidationFailed("name", f"must be at most {MAX_TOKEN_NAME} characters")
    return value


def validate_ttl_hours(ttl_hours: object) -> int:
    """Hours until expiry; 0 (or None) means the token never expires."""
    if ttl_hours is None:
        return 0
    # bool is an int subclass; `true` is not a number of hours.
    if not isinstance(ttl_hours, int) or isinstance(ttl_hours, bool):
        raise ValidationFailed("ttl_hours", "must be an integer")
    if not 0 <= ttl_hours <= MAX_TTL_HOURS:
        raise ValidationFailed("ttl_hours", f"must be between 0 and {MAX_TTL_HOURS}")
    return ttl_hours
