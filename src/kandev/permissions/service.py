"""PermissionService: how an agent's permission request is decided (CONTRACT §11).

- `decide` is the agent side (called by the ACP permission policy with the Kandev session id):
  the profile's policy answers at once ("allow", "deny", an allow-listed tool), or "ask"
  records a durable `permission_request`, sets the session WAITING_FOR_INPUT and blocks until
  someone decides or the request expires (None: the agent gets a cancelled outcome).
- `respond` is the human side (REST, MCP, CLI): authorization through the task (a foreign id
  is the same 404 as an unknown one), the option validated before the claim, then the one
  claim statement; a loser is told the winner's decision, 409 when nobody won.
- Expiry: a request still open when its turn ends, its session ends, or at startup.

The database decides; the in-memory waiters only carry the decision to the blocked call.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.identity import current_identity
from kandev.board import agent_profile_repository as profiles_repo
from kandev.catalog.messages import (
    ALLOWED,
    DECISION_KEY,
    EXPIRED,
    OPTIONS_KEY,
    PENDING,
    PENDING_ID_KEY,
    PERMISSION_DECIDED,
    REJECTED,
    STATUS_KEY,
    TOOL_CALL_KEY,
)
from kandev.clarification.listing import clamp_limit, decode_cursor, encode_cursor
from kandev.clock import Clock, isoformat
from kandev.db.engine import Database
from kandev.errors import Conflict, NotFound, ValidationFailed
from kandev.events.publisher import PendingEvents
from kandev.ids import IdFactory
from kandev.log_fields import log_event
from kandev.permissions import repository as repo
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.describe import SessionsView
from kandev.sessions.models import Message
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.turns import asking_turn

log = logging.getLogger(__name__)

REQUEST_NOT_FOUND = "permission request not found"
NO_LONGER_OPEN = "permission request is no longer open"
ALLOW_KINDS = ("allow_once", "allow_always")
REJECT_KINDS = ("reject_once", "reject_always")


def first_option(options: list[dict[str, Any]], kinds: tuple[str, ...]) -> str | None:
    return next((o["option_id"] for o in options if o.get("kind") in kinds), None)


def allow_listed(allow: list[str], tool_call: dict[str, Any]) -> bool:
    """A tool kind ("read", "execute", …) or a tool title named in the profile's allow-list."""
    return any(entry in (tool_call.get("kind"), tool_call.get("title")) for entry in allow)


def _status_of(option: dict[str, Any]) -> str:
    return ALLOWED if option.get("kind") in ALLOW_KINDS else REJECTED


class PermissionService:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        access: AccessRules,
        recorder: SessionRecorder,
    ) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id
        self.access = access
        self.recorder = recorder
        # pending_id → the blocked agent call's future: the chosen option id, None = cancelled
        self._waiters: dict[str, asyncio.Future[str | None]] = {}
        self._background: set[asyncio.Future[Any]] = set()

    # --- the agent's side ---------------------------------------------------------------

    async def decide(
        self, session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> str | None:
        """The option id the agent gets, or None for a cancelled outcome."""
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, session_id)
            profile = None
            if session is not None and session.agent_profile_id:
                profile = await profiles_repo.get_profile(conn, session.agent_profile_id)
        if session is None or session.is_terminal:
            return None
        policy = profile.permission_policy if profile is not None else "ask"
        allow = profile.permission_allow if profile is not None else []
        title = tool_call.get("title", "")
        if allow_listed(allow, tool_call) or policy == "allow":
            chosen = first_option(options, ALLOW_KINDS)
            self._log("permission allowed by policy", session_id, title=title, option_id=chosen)
            return chosen
        if policy == "deny":
            chosen = first_option(options, REJECT_KINDS)
            self._log("permission denied by policy", session_id, title=title, option_id=chosen)
            return chosen
        return await self._ask(session_id, session.task_id, tool_call, options)

    async def _ask(
        self,
        session_id: str,
        task_id: str,
        tool_call: dict[str, Any],
        options: list[dict[str, Any]],
    ) -> str | None:
        pending_id = self.new_id()
        waiter: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiters[pending_id] = waiter
        try:
            now = self.clock.now()

            async def insert(conn: AsyncConnection) -> list[Message]:
                turn = await asking_turn(conn, session_id, task_id, self.new_id, now)
                row = await repo.insert_request(
                    conn,
                    message_id=self.new_id(),
                    pending_id=pending_id,
                    session_id=session_id,
                    task_id=task_id,
                    turn_id=turn.id,
                    tool_call=tool_call,
                    options=options,
                    now=now,
                    # Asked during a turn whose end was recorded first (the agent asked and
                    # at once ended its turn): it expires with that turn, as one open at its end.
                    status=EXPIRED if turn.over else PENDING,
                )
                return [row]

            (row,) = await self.recorder.write_messages(insert, added=True) or []
            self._log(
                "permission asked",
                session_id,
                pending_id=pending_id,
                task_id=task_id,
                turn_id=row.turn_id,
                title=tool_call.get("title", ""),
                kind=tool_call.get("kind") or None,
            )
            if row.metadata.get(STATUS_KEY) == EXPIRED:
                self._log("permission expired", session_id, pending_id=pending_id)
                return None  # the agent's call: cancelled
            await self.recorder.mark_waiting(session_id)
            return await waiter
        except asyncio.CancelledError:
            # The agent's call went away (its process ended): the request can never be
            # delivered, so it expires.
            self._in_background(self._expire_one(pending_id))
            raise
        finally:
            self._waiters.pop(pending_id, None)

    # --- the human's side ---------------------------------------------------------------

    async def respond(self, pending_id: str, option_id: Any, via: str = "") -> dict[str, Any]:
        row = await self._authorized(pending_id)
        options = row.metadata.get(OPTIONS_KEY) or []
        if not isinstance(option_id, str) or not option_id:
            raise ValidationFailed("option_id", "is required")
        option = next((o for o in options if o.get("option_id") == option_id), None)
        if option is None:
            offered = ", ".join(str(o.get("option_id")) for o in options)
            raise ValidationFailed(
                "option_id", f"{option_id!r} is not offered by this request (offered: {offered})"
            )
        status = _status_of(option)
        identity = current_identity()
        decision = {
            "option_id": option_id,
            "name": option.get("name", ""),
            "kind": option.get("kind", ""),
            "via": via,
            "decided_by": identity.user_id if identity is not None else "",
        }
        async with self.db.write() as conn:
            claimed = await repo.claim_request(conn, pending_id, status, decision, self.clock.now())
        if claimed is None:
            return await self._loser(pending_id)
        self._log(
            "permission answered",
            claimed.session_id,
            pending_id=pending_id,
            task_id=claimed.task_id,
            status=status,
            option_id=option_id,
            via=via or None,
        )
        session_id = claimed.session_id

        async def still_waiting(conn: AsyncConnection) -> bool:
            return await repo.has_open_requests(conn, session_id)

        # Back to RUNNING, unless the agent waits on another request of the same turn.
        await self.recorder.mark_answered_live(session_id, still_waiting=still_waiting)
        await self.recorder.publish_messages([claimed])
        self._wake(pending_id, option_id)
        return {"pending_id": pending_id, "claimed": True, "status": status, "option_id": option_id}

    async def _authorized(self, pending_id: str) -> Message:
        async with self.db.read() as conn:
            row = await repo.find_request(conn, pending_id)
            if row is None:
                raise NotFound(REQUEST_NOT_FOUND)
            try:
                await self.access.authorize_task(conn, row.task_id)
            except NotFound:
                raise NotFound(REQUEST_NOT_FOUND) from None
        return row

    async def _loser(self, pending_id: str) -> dict[str, Any]:
        """One re-read: a decided row means a winner exists; replay its decision."""
        async with self.db.read() as conn:
            row = await repo.find_request(conn, pending_id)
        status = row.metadata.get(STATUS_KEY) if row is not None else None
        if row is None or status not in PERMISSION_DECIDED:
            raise Conflict(NO_LONGER_OPEN)
        decision = row.metadata.get(DECISION_KEY) or {}
        return {
            "pending_id": pending_id,
            "claimed": False,
            "status": status,
            "option_id": decision.get("option_id", ""),
        }

    async def list_pending(
        self, *, workspace_id: Any = None, cursor: Any = None, limit: Any = None
    ) -> dict[str, Any]:
        size = clamp_limit(limit)
        after = decode_cursor(cursor)
        if workspace_id is not None and not isinstance(workspace_id, str):
            raise ValidationFailed("workspace_id", "must be a string")
        now = self.clock.now()
        async with self.db.read() as conn:
            rows = await repo.list_open_requests(
                conn,
                user_id=self.access.scope(),
                workspace_id=workspace_id or None,
                after=after,
                limit=size + 1,
            )
        page = rows[:size]
        items = [_list_item(row, workspace, now) for row, workspace in page]
        next_cursor = ""
        if len(rows) > size and items:
            next_cursor = encode_cursor(items[-1]["created_at"], items[-1]["pending_id"])
        return {"permissions": items, "count": len(items), "next_cursor": next_cursor}

    # --- expiry (turn lifecycle hooks, startup) -----------------------------------------

    async def turn_ending_in(
        self, conn: AsyncConnection, session_id: str, view: SessionsView, events: PendingEvents
    ) -> bool:
        """The turn is over: its open requests expire (the agent's calls get cancelled);
        never makes the session wait. Inside the turn-end transaction: only a session the
        view shows with a pending request writes anything; its waiters wake once it
        committed."""
        if not view.has_pending_permission(session_id):
            return False
        rows = await repo.expire_requests(conn, self.clock.now(), session_id=session_id)
        view.permissions_settled(session_id)
        self.recorder.message_events(events, view, rows)
        for row in rows:
            pending_id = str(row.metadata.get(PENDING_ID_KEY))
            self._log("permission expired", row.session_id, pending_id=pending_id)
            events.after(functools.partial(self._wake, pending_id, None))
        return False

    async def expire_session(self, session_id: str) -> int:
        now = self.clock.now()
        return await self._expire(
            lambda conn: repo.expire_requests(conn, now, session_id=session_id)
        )

    async def expire_on_startup(self, now: datetime | None = None) -> int:
        """Requests a previous server left open can never reach their agent: expired."""
        at = now or self.clock.now()
        return await self._expire(lambda conn: repo.expire_requests(conn, at))

    async def _expire_one(self, pending_id: str) -> None:
        now = self.clock.now()
        await self._expire(lambda conn: repo.expire_request(conn, pending_id, now))

    async def _expire(self, change: Callable[[AsyncConnection], Awaitable[list[Message]]]) -> int:
        rows = await self.recorder.write_messages(change) or []
        for row in rows:
            self._log(
                "permission expired", row.session_id, pending_id=row.metadata.get(PENDING_ID_KEY)
            )
            self._wake(str(row.metadata.get(PENDING_ID_KEY)), None)
        return len(rows)

    @staticmethod
    def _log(event: str, session_id: str, **fields: Any) -> None:
        log_event(log, logging.INFO, event, session_id=session_id, **fields)

    def _wake(self, pending_id: str, option_id: str | None) -> None:
        waiter = self._waiters.get(pending_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(option_id)

    async def settle_background(self, timeout: float = 5.0) -> None:
        """Let background expiries finish (bounded) before the database goes away."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=timeout)

    def _in_background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _list_item(row: Message, workspace_id: str, now: datetime) -> dict[str, Any]:
    return {
        "pending_id": row.metadata.get(PENDING_ID_KEY),
        "task_id": row.task_id,
        "session_id": row.session_id,
        "workspace_id": workspace_id,
        "created_at": isoformat(row.created_at),
        "age_seconds": max(0, int((now - row.created_at).total_seconds())),
        "tool_call": row.metadata.get(TOOL_CALL_KEY) or {},
        "options": row.metadata.get(OPTIONS_KEY) or [],
    }
