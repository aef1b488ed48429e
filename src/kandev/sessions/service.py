"""Session service: sessions of a task, prompts, stop, messages, agent tokens.

Every method authorizes through the access rules first; the orchestrator does the live part.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.agent_tokens import AgentTokenService
from kandev.auth.identity import current_identity
from kandev.board import agent_profile_repository
from kandev.board.agent_profiles import PROFILE_NOT_FOUND
from kandev.board.scoped import ScopedService
from kandev.catalog.events import SESSION_CREATED
from kandev.catalog.states import CREATED, IDLE
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, NotFound
from kandev.events.bus import EventBus
from kandev.events.publisher import task_owner_id
from kandev.ids import IdFactory
from kandev.sessions import message_repository as messages_repo
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.describe import SessionDescriber
from kandev.sessions.inputs import MessagePageQuery, SessionCreate
from kandev.sessions.models import Message, Session
from kandev.sessions.orchestrator import Orchestrator, PromptResult

MESSAGE_NOT_FOUND = "message not found"


class SessionService(ScopedService):
    access: AccessRules  # sessions too, not only the board's rows

    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        access: AccessRules,
        orchestrator: Orchestrator,
        agent_tokens: AgentTokenService,
        bus: EventBus,
        describer: SessionDescriber,
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.orchestrator = orchestrator
        self.agent_tokens = agent_tokens
        self.bus = bus
        self.describer = describer

    async def _json(self, session: Session) -> dict[str, Any]:
        async with self.db.read() as conn:
            return (await self.describer.sessions_json(conn, [session]))[0]

    async def create_session(self, task_id: str, data: SessionCreate) -> dict[str, Any]:
        now = self.clock.now()
        async with self.db.write() as conn:
            task = await self.access.authorize_task_write(conn, task_id)
            if task.archived_at is not None:  # an archived task runs no agents
                raise Conflict("task is archived; unarchive it to start a session")
            if data.agent_profile_id is not None:
                profile = await agent_profile_repository.get_profile(conn, data.agent_profile_id)
                if profile is None:
                    raise NotFound(PROFILE_NOT_FOUND)
            first = await sessions_repo.count_task_sessions(conn, task_id) == 0
            session = await sessions_repo.insert_session(
                conn,
                {
                    "id": self.new_id(),
                    "task_id": task_id,
                    "agent_profile_id": data.agent_profile_id,
                    # Without a profile Kandev starts nothing: the session waits, IDLE, for
                    # an agent that connects with an agent token (its JSON says so: `hint`).
                    "state": CREATED if data.agent_profile_id is not None else IDLE,
                    "is_primary": first,
                    "metadata": {},
                    "started_at": now,
                    "updated_at": now,
                },
            )
            owner_id = await task_owner_id(conn, task_id)
        payload = session.to_json()
        self.bus.publish(
            SESSION_CREATED,
            {"session": payload},
            task_id=task_id,
            session_id=session.id,
            owner_id=owner_id,
        )
        if data.prompt is not None:
            await self.orchestrator.recorder.enqueue_prompt(session, data.prompt, _author())
        if session.agent_profile_id is not None:
            await self.orchestrator.start_session(session)
        elif data.prompt is not None:
            # No managed agent: the first prompt is simply recorded as the first turn.
            prompt = await self.orchestrator.recorder.pop_prompt(session.id)
            assert prompt is not None
            await self.orchestrator.recorder.begin_turn(session, prompt["content"], _author())
        return await self.get_session(session.id)

    async def _authorized_session(self, session_id: str) -> Session:
        async with self.db.read() as conn:
            return await self.access.authorized_session(conn, session_id)

    async def get_session(self, session_id: str) -> dict[str, Any]:
        return await self._json(await self._authorized_session(session_id))

    async def list_task_sessions(self, task_id: str) -> list[dict[str, Any]]:
        async with self.db.read() as conn:
            await self.access.authorize_task(conn, task_id)
            sessions = await sessions_repo.list_task_sessions(conn, task_id)
            return await self.describer.sessions_json(conn, sessions)

    async def prompt(self, session_id: str, text: str) -> PromptResult:
        async def check(conn: AsyncConnection) -> Session:
            # Inside the prompt's write transaction: authorized, live, or nothing is written.
            session = await self.access.authorized_session(conn, session_id, lock_turn=True)
            if session.is_terminal:
                raise Conflict(f"session is {session.state}; start a new session to continue")
            return session

        return await self.orchestrator.prompt_session(session_id, text, _author(), check)

    async def cancel_turn(self, session_id: str) -> bool:
        session = await self._authorized_session(session_id)
        if session.is_terminal:
            raise Conflict(f"session is {session.state}")
        return await self.orchestrator.cancel_turn(session_id)

    async def stop(self, session_id: str, state: str) -> dict[str, Any]:
        session = await self._authorized_session(session_id)
        if not session.is_terminal:
            await self.orchestrator.stop_session(session_id, state)
        return await self.get_session(session_id)

    async def list_messages(
        self, session_id: str, query: MessagePageQuery
    ) -> tuple[list[Message], bool]:
        async with self.db.read() as conn:
            await self.access.authorize_session(conn, session_id)
            anchors: dict[str, Message | None] = {"before": None, "after": None}
            for name in ("before", "after"):
                anchor_id = getattr(query, name)
                if anchor_id is None:
                    continue
                anchor = await messages_repo.get_message(conn, anchor_id)
                if anchor is None or anchor.session_id != session_id:
                    raise NotFound(MESSAGE_NOT_FOUND)
                anchors[name] = anchor
            return await messages_repo.page_messages(
                conn,
                session_id,
                limit=query.limit,
                before=anchors["before"],
                after=anchors["after"],
                sort=query.sort,
            )

    async def create_agent_token(self, session_id: str) -> dict[str, str]:
        """Credentials for an agent running anywhere to act as this session over MCP."""
        async with self.db.write() as conn:
            session = await self.access.authorized_session(conn, session_id)
            task_id = session.task_id
            if session.is_terminal:
                raise Conflict(f"session is {session.state}")
            token = await self.agent_tokens.mint(conn, session_id, task_id)
        return {"mcp_url": self.orchestrator.agent_mcp_url(), "token": token}


def _author() -> str:
    identity = current_identity()
    return identity.user_id if identity is not None else ""
