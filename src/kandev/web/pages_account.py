"""Page contexts of the sign-in pages and the settings pages (one frozen dataclass each).

Templates see exactly these fields as `page.<field>` plus render.BASE_CONTEXT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kandev.auth.validation import MIN_PASSWORD


@dataclass(frozen=True)
class SignInPage:
    """`/login` and `/setup`: the form, the values to keep, and the service's error."""

    mode: str  # "login" or "setup"
    next: str  # the same-site path to return to
    email: str = ""
    display_name: str = ""
    error: str = ""
    min_password: int = MIN_PASSWORD


@dataclass(frozen=True)
class TokensPage:
    """`/settings/tokens`: the caller's tokens; `new_token` is the raw one, shown once."""

    available: bool  # False with auth off: tokens need auth on (the REST routes 404)
    tokens: list[dict[str, Any]]
    new_token: str = ""
    new_token_name: str = ""
    error: str = ""
    error_field: str = ""
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProfileForm:
    """The create/edit form of one profile: the values as typed, and the error if any."""

    profile_id: str  # "" for the create form
    name: str = ""
    command: str = ""
    env: str = ""
    permission_policy: str = "ask"  # "ask", "allow" or "deny"
    permission_allow: str = ""  # one tool kind or exact tool title per line
    error: str = ""
    error_field: str = ""  # "name", "command", "env", "permission_policy" or "permission_allow"


# What each permission policy does with an agent's request (docs/permissions.md).
PERMISSION_POLICY_TEXT: dict[str, str] = {
    "ask": "a person decides each request",
    "allow": "every request is allowed at once",
    "deny": "every request is rejected at once",
}


@dataclass(frozen=True)
class AgentsPage:
    """`/settings/agents`: profiles as REST shows them (env values masked)."""

    profiles: list[dict[str, Any]]  # AgentProfile.to_json(), plus "command_line"
    can_edit: bool  # the service's rule: admins with auth on, everyone with auth off
    create_form: ProfileForm
    edit_form: ProfileForm | None = None  # re-rendered with its error after a refused save
    notice: str = ""
    policies: dict[str, str] = field(default_factory=lambda: dict(PERMISSION_POLICY_TEXT))


@dataclass(frozen=True)
class ToolEntry:
    name: str
    description: str


@dataclass(frozen=True)
class ToolGroup:
    title: str
    summary: str
    tools: list[ToolEntry]


@dataclass(frozen=True)
class ClientConfig:
    """One copyable client configuration."""

    key: str  # stable id, e.g. "claude-code"
    title: str
    where: str  # where it goes (a file, a shell)
    language: str
    text: str


@dataclass(frozen=True)
class McpPage:
    """`/settings/mcp`: the external endpoint, client configs, the live tool catalog."""

    endpoint: str
    auth_on: bool
    clients: list[ClientConfig]
    groups: list[ToolGroup]
    tool_count: int
