"""Settings pages: `/settings/tokens`, `/settings/agents`, `/settings/mcp`.

Each form calls the service method its REST route calls (AuthService for tokens,
AgentProfileService for profiles); the service's error is shown inline, naming the field.
"""

from __future__ import annotations

import shlex
from typing import get_args

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from kandev.api.deps import AgentProfileServiceDep, AuthServiceDep, SettingsDep
from kandev.api.errors import status_for
from kandev.auth.identity import current_identity
from kandev.auth.service import AuthService
from kandev.board.agent_profiles import AgentProfileService, require_profile_manager
from kandev.board.inputs import (
    AgentProfileCreate,
    AgentProfileUpdate,
    AllowEntry,
    PermissionPolicyName,
)
from kandev.errors import Forbidden, KandevError, ValidationFailed
from kandev.web.mcp_catalog import client_configs, external_tools, group_tools
from kandev.web.pages_account import AgentsPage, McpPage, ProfileForm, TokensPage
from kandev.web.render import render
from kandev.web.routes.common import form_text, page_route, parse_form

router = APIRouter()
TOKENS_PATH = "/settings/tokens"
AGENTS_PATH = "/settings/agents"
PROFILE_FIELDS = ("name", "command", "env", "permission_policy", "permission_allow")
# The input model's own rules, read off its types: ("ask", "allow", "deny") and 200.
PERMISSION_POLICIES: tuple[str, ...] = get_args(PermissionPolicyName)
ALLOW_ENTRY_MAX: int = get_args(AllowEntry)[1].max_length


def _field_of(exc: KandevError) -> str:
    """The form field an error names: ValidationFailed.field, else a 'name: …' prefix."""
    named = getattr(exc, "field", "") or exc.message.partition(":")[0]
    return named.split(".")[0] if named.split(".")[0] in PROFILE_FIELDS else ""


def _identity_is_real() -> bool:
    identity = current_identity()
    return identity is not None and not identity.synthetic


# --- tokens -------------------------------------------------------------------------


async def _tokens_page(auth_service: AuthService, request: Request, **extra) -> TokensPage:
    if not _identity_is_real():  # auth off: the token routes do not exist (CONTRACT §2)
        return TokensPage(available=False, tokens=[], **extra)
    tokens = await auth_service.list_tokens(current_identity())
    return TokensPage(available=True, tokens=tokens, **extra)


@router.get(TOKENS_PATH, name="settings_tokens")
@page_route
async def tokens_page(auth_service: AuthServiceDep, request: Request) -> Response:
    return render(
        request, "settings/tokens.html", await _tokens_page(auth_service, request), nav="settings"
    )


def _ttl_hours(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit():
        raise ValidationFailed("ttl_hours", "must be a whole number of hours")
    return int(text)


@router.post(TOKENS_PATH, name="settings_tokens_create")
@page_route
async def create_token(auth_service: AuthServiceDep, request: Request) -> Response:
    """Mint a token and show it once, in this response (it is never readable again)."""
    form = await request.form()
    name, ttl = form_text(form, "name"), form_text(form, "ttl_hours")
    try:
        raw, record = await auth_service.create_token(current_identity(), name, _ttl_hours(ttl))
    except ValidationFailed as exc:
        page = await _tokens_page(
            auth_service,
            request,
            error=exc.message,
            error_field=exc.field,
            values={"name": name, "ttl_hours": ttl},
        )
        return render(request, "settings/tokens.html", page, nav="settings", status_code=400)
    page = await _tokens_page(auth_service, request, new_token=raw, new_token_name=record["name"])
    return render(request, "settings/tokens.html", page, nav="settings", status_code=201)


@router.post(TOKENS_PATH + "/{token_id}/revoke", name="settings_tokens_revoke")
@page_route
async def revoke_token(auth_service: AuthServiceDep, request: Request, token_id: str) -> Response:
    await auth_service.delete_token(current_identity(), token_id)
    return RedirectResponse(TOKENS_PATH, status_code=303)


# --- agent profiles -----------------------------------------------------------------


def _can_manage_profiles() -> bool:
    try:
        require_profile_manager()  # the service's own rule, not a second copy of it
    except Forbidden:
        return False
    return True


def _profile_json(profile) -> dict:
    shown = profile.to_json()  # env values masked, exactly as REST shows them
    shown["command_line"] = shlex.join(shown["command"])
    return shown


async def _agents_page(
    profile_service: AgentProfileService, request: Request, **extra
) -> AgentsPage:
    profiles = await profile_service.list_profiles()
    extra.setdefault("create_form", ProfileForm(profile_id=""))
    return AgentsPage(
        profiles=[_profile_json(p) for p in profiles], can_edit=_can_manage_profiles(), **extra
    )


@router.get(AGENTS_PATH, name="settings_agents")
@page_route
async def agents_page(profile_service: AgentProfileServiceDep, request: Request) -> Response:
    return render(
        request,
        "settings/agents.html",
        await _agents_page(profile_service, request),
        nav="settings",
    )


def _parse_command(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise ValidationFailed("command", f"cannot be split into arguments: {exc}") from None


def _parse_env(text: str) -> dict[str, str]:
    """`KEY=value` per line; `KEY=********` keeps the stored value (as on REST)."""
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValidationFailed("env", f"line {number}: expected KEY=value")
        env[key.strip()] = value
    return env


def _parse_policy(text: str) -> str:
    if text not in PERMISSION_POLICIES:
        choices = ", ".join(repr(p) for p in PERMISSION_POLICIES)
        raise ValidationFailed("permission_policy", f"must be one of {choices}, not {text!r}")
    return text


def _parse_allow(text: str) -> list[str]:
    """One tool kind or exact tool title per line; blank lines and repeats are dropped."""
    entries: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.strip()
        if not entry or entry in entries:
            continue
        if len(entry) > ALLOW_ENTRY_MAX:
            raise ValidationFailed(
                "permission_allow", f"line {number}: at most {ALLOW_ENTRY_MAX} characters"
            )
        entries.append(entry)
    return entries


def _profile_values(form) -> dict[str, object]:
    values: dict[str, object] = {
        "name": form_text(form, "name").strip(),
        "command": _parse_command(form_text(form, "command")),
        "env": _parse_env(form_text(form, "env")),
    }
    # A form without the permission fields (an older page, a script) leaves them as they are.
    if "permission_policy" in form:
        values["permission_policy"] = _parse_policy(form_text(form, "permission_policy"))
    if "permission_allow" in form:
        values["permission_allow"] = _parse_allow(form_text(form, "permission_allow"))
    return values


def _typed(form, profile_id: str, exc: KandevError) -> ProfileForm:
    return ProfileForm(
        profile_id=profile_id,
        name=form_text(form, "name"),
        command=form_text(form, "command"),
        env=form_text(form, "env"),
        permission_policy=form_text(form, "permission_policy") or "ask",
        permission_allow=form_text(form, "permission_allow"),
        error=exc.message,
        error_field=_field_of(exc),
    )


@router.post(AGENTS_PATH, name="settings_agents_create")
@page_route
async def create_profile(profile_service: AgentProfileServiceDep, request: Request) -> Response:
    form = await request.form()
    try:
        data = parse_form(AgentProfileCreate, _profile_values(form))
        await profile_service.create_profile(data)
    except Forbidden as exc:  # a member: no form to show the error on
        page = await _agents_page(profile_service, request, notice=exc.message)
        return render(request, "settings/agents.html", page, nav="settings", status_code=403)
    except KandevError as exc:
        page = await _agents_page(profile_service, request, create_form=_typed(form, "", exc))
        return render(
            request, "settings/agents.html", page, nav="settings", status_code=status_for(exc)
        )
    return RedirectResponse(AGENTS_PATH, status_code=303)


@router.post(AGENTS_PATH + "/{profile_id}", name="settings_agents_update")
@page_route
async def update_profile(
    profile_service: AgentProfileServiceDep, request: Request, profile_id: str
) -> Response:
    form = await request.form()
    try:
        data = parse_form(AgentProfileUpdate, _profile_values(form))
        await profile_service.update_profile(profile_id, data)
    except Forbidden as exc:  # a member: no form to show the error on
        page = await _agents_page(profile_service, request, notice=exc.message)
        return render(request, "settings/agents.html", page, nav="settings", status_code=403)
    except KandevError as exc:
        page = await _agents_page(profile_service, request, edit_form=_typed(form, profile_id, exc))
        return render(
            request, "settings/agents.html", page, nav="settings", status_code=status_for(exc)
        )
    return RedirectResponse(AGENTS_PATH, status_code=303)


@router.post(AGENTS_PATH + "/{profile_id}/delete", name="settings_agents_delete")
@page_route
async def delete_profile(
    profile_service: AgentProfileServiceDep, request: Request, profile_id: str
) -> Response:
    try:
        await profile_service.delete_profile(profile_id)
    except KandevError as exc:
        page = await _agents_page(profile_service, request, notice=exc.message)
        return render(
            request, "settings/agents.html", page, nav="settings", status_code=status_for(exc)
        )
    return RedirectResponse(AGENTS_PATH, status_code=303)


# --- external MCP -------------------------------------------------------------------


@router.get("/settings/mcp", name="settings_mcp")
@page_route
async def mcp_page(
    auth_service: AuthServiceDep, settings: SettingsDep, request: Request
) -> Response:
    tools = await external_tools(request.app)
    auth_on = auth_service.mode != "disabled"
    base_url = settings.public_base_url()
    page = McpPage(
        endpoint=f"{base_url}/mcp",
        auth_on=auth_on,
        clients=client_configs(base_url, auth_on),
        groups=group_tools(tools),
        tool_count=len(tools),
    )
    return render(request, "settings/mcp.html", page, nav="settings")
