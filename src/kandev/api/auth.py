"""REST for sessions and personal access tokens: /api/v1/auth/*.

Routers parse, call one AuthService method and shape the reply; the service owns the
rules. Token routes answer 404 to a missing or synthetic identity (auth off), so a PAT
can't be minted before auth is enabled and survive the switch.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field, StrictInt

from kandev.api.deps import AuthServiceDep
from kandev.auth.identity import Identity, current_identity
from kandev.auth.middleware import SESSION_COOKIE
from kandev.auth.service import SessionGrant, require_real
from kandev.auth.validation import MAX_DISPLAY_NAME, MAX_EMAIL, MAX_PASSWORD, MAX_TOKEN_NAME

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])
# Spelled as the contract writes it ("SameSite=Lax"); Starlette passes the value through.
SAME_SITE: Any = "Lax"


class SetupBody(BaseModel):
    email: str = Field(max_length=MAX_EMAIL)
    password: str = Field(max_length=MAX_PASSWORD)
    display_name: str | None = Field(default=None, max_length=MAX_DISPLAY_NAME)


class LoginBody(BaseModel):
    email: str = Field(max_length=MAX_EMAIL)
    password: str = Field(max_length=MAX_PASSWORD)


class TokenBody(BaseModel):
    name: str = Field(max_length=MAX_TOKEN_NAME)
    # Strict: "5", 5.5 and true are not a number of hours.
    ttl_hours: StrictInt | None = None


async def real_identity() -> Identity:
    """Runs before body validation, so auth-off callers get 404 whatever they send."""
    return require_real(current_identity())


AuthDep = AuthServiceDep
RealIdentity = Annotated[Identity, Depends(real_identity)]


def client_ip(request: Request) -> str:
    return request.client.host if request.client else ""


def is_https(request: Request) -> bool:
    # The perimeter has already applied X-Forwarded-Proto from a trusted proxy (and dropped
    # it from anyone else), so the scheme is the whole answer.
    return request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, grant: SessionGrant) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        grant.token,
        max_age=grant.max_age,
        path="/",
        httponly=True,
        samesite=SAME_SITE,
        secure=is_https(request),
    )


@router.get("/me")
async def me(auth: AuthDep) -> dict[str, Any]:
    return await auth.me(current_identity())


@router.post("/setup")
async def setup(
    body: SetupBody, request: Request, response: Response, auth: AuthDep
) -> dict[str, Any]:
    grant = await auth.setup(
        body.email,
        body.password,
        body.display_name,
        client_ip=client_ip(request),
        user_agent=request.headers.get("user-agent", ""),
    )
    set_session_cookie(response, request, grant)
    return {"user": grant.user}


@router.post("/login")
async def login(
    body: LoginBody, request: Request, response: Response, auth: AuthDep
) -> dict[str, Any]:
    grant = await auth.login(
        body.email,
        body.password,
        client_ip=client_ip(request),
        user_agent=request.headers.get("user-agent", ""),
    )
    set_session_cookie(response, request, grant)
    return {"user": grant.user}


@router.post("/logout", status_code=204)
async def logout(request: Request, auth: AuthDep) -> Response:
    await auth.logout(current_identity())
    response = Response(status_code=204)
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite=SAME_SITE, secure=is_https(request)
    )
    return response


@router.post("/tokens", status_code=201)
async def create_token(body: TokenBody, identity: RealIdentity, auth: AuthDep) -> dict[str, Any]:
    raw, record = await auth.create_token(identity, body.name, body.ttl_hours)
    return {"token": raw, "record": record}


@router.get("/tokens")
async def list_tokens(identity: RealIdentity, auth: AuthDep) -> dict[str, Any]:
    return {"tokens": await auth.list_tokens(identity)}


@router.delete("/tokens/{token_id}", status_code=204)
async def delete_token(token_id: str, identity: RealIdentity, auth: AuthDep) -> Response:
    await auth.delete_token(identity, token_id)
    return Response(status_code=204)
