"""REST for user management: /api/v1/users (admins only; 404 while auth is off)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from kandev.api.auth import AuthDep
from kandev.auth.identity import Identity, current_identity
from kandev.auth.service import require_admin
from kandev.auth.validation import MAX_DISPLAY_NAME, MAX_EMAIL, MAX_PASSWORD

router = APIRouter(prefix="/api/v1/users", tags=["users"])


class CreateUserBody(BaseModel):
    email: str = Field(max_length=MAX_EMAIL)
    password: str = Field(max_length=MAX_PASSWORD)
    display_name: str | None = Field(default=None, max_length=MAX_DISPLAY_NAME)
    role: str | None = Field(default=None, max_length=16)


async def admin_identity() -> Identity:
    """404 for a missing/synthetic identity, 403 for a member — before the body is read."""
    return require_admin(current_identity())


AdminIdentity = Annotated[Identity, Depends(admin_identity)]


@router.post("", status_code=201)
async def create_user(body: CreateUserBody, actor: AdminIdentity, auth: AuthDep) -> dict[str, Any]:
    user = await auth.create_user(
        body.email, body.password, body.display_name, body.role, actor=actor
    )
    return {"user": user}


@router.get("")
async def list_users(actor: AdminIdentity, auth: AuthDep) -> dict[str, Any]:
    users = await auth.list_users(actor)
    return {"users": users, "total": len(users)}
