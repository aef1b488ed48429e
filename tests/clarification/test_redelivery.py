"""After a restart: claims whose delivery was never confirmed reach their agent once.

`redeliver_after_restart` (started by Services.prepare for what startup recovery reported)
on both databases, with the orchestrator's resume replaced by a recorder: what is resumed,
with which prompt, and which delivered mark each case ends with.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update

from kandev.catalog.messages import ANSWERED, REJECTED
from kandev.clarification import claims
from kandev.clarification.recovery import RecoveryReport, recover_on_startup
from kandev.db.tables import agent_profiles, task_sessions
from kandev.services import Services
from kandev.sessions.turn_hooks import DispatchRejected
from tests.clarification.test_repository import (
    answers_for,
    at,
    bundle,
    one_session_bundle,
    set_state,
)


class Resumes:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.error = error

    async def __call__(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error


async def claimed(
    services: Services,
    status: str,
    *,
    managed: bool = True,
    detached: bool = False,
    reason: str = "",
) -> list[str]:
    db = services.db
    await one_session_bundle(db)
    if managed:
        async with db.write() as conn:
            profile = (await conn.execute(select(agent_profiles.c.id).limit(1))).scalar_one()
            await conn.execute(
                update(task_sessions)
                .where(task_sessions.c.id == "s1")
                .values(agent_profile_id=profile)
            )
    if detached:
        async with db.write() as conn:
            await claims.detach_active(conn, db, "s1", at(50))
    responses = answers_for(await bundle(db, "p1")) if status == ANSWERED else None
    async with db.write() as conn:
        rows = (
            await claims.attempt_claim(
                conn, db, "p1", status, responses, at(100), reject_reason=reason
            )
        ).claimed
    assert rows is not None
    assert await recover_on_startup(db, at(1000)) == RecoveryReport(undelivered=["p1"])
    return [m.id for m in rows]


def resume_with(services: Services, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Resumes:
    resumes = Resumes(**kw)
    monkeypatch.setattr(services.orchestrator, "resume_detached", resumes)
    return resumes


async def delivered_via(services: Services) -> list[Any]:
    return [
        (m.metadata.get("response_delivery_pending"), m.metadata.get("response_delivered_via"))
        for m in await bundle(services.db, "p1")
    ]


async def test_an_undelivered_answer_resumes_the_agent_once(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await claimed(services, ANSWERED)
    resumes = resume_with(services, monkeypatch)
    await services.clarifications.redeliver_after_restart(["p1"])
    assert len(resumes.calls) == 1
    call = resumes.calls[0]
    reservation = call["reservation"]
    assert (call["session_id"], reservation.pending_id, reservation.message_ids) == (
        "s1",
        "p1",
        ids,
    )
    assert call["prompt"].startswith("[kandev:resume]\nYou previously asked the user")
    assert await delivered_via(services) == [(None, "resume_turn")] * 2
    # Delivered: neither a second pass nor the next start sends it again.
    await services.clarifications.redeliver_after_restart(["p1"])
    assert await recover_on_startup(services.db, at(2000)) == RecoveryReport()
    assert len(resumes.calls) == 1


async def test_a_rejection_the_agent_waited_for_resumes_it_with_the_reason(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    await claimed(services, REJECTED, reason="out of scope")
    resumes = resume_with(services, monkeypatch)
    await services.clarifications.redeliver_after_restart(["p1"])
    [call] = resumes.calls
    assert "declined to answer" in call["prompt"]
    assert "Reason: out of scope" in call["prompt"]
    assert await delivered_via(services) == [(None, "resume_turn")] * 2


@pytest.mark.parametrize(
    ("status", "kw"),
    [
        (REJECTED, {"detached": True}),  # nobody waited: recorded, as when the server was up
        (ANSWERED, {"managed": False}),  # an agent Kandev does not run reads the conversation
    ],
    ids=["detached-rejection", "byo-agent"],
)
async def test_nothing_to_resume_is_recorded(
    services: Services, monkeypatch: pytest.MonkeyPatch, status: str, kw: dict[str, Any]
) -> None:
    await claimed(services, status, **kw)
    resumes = resume_with(services, monkeypatch)
    await services.clarifications.redeliver_after_restart(["p1"])
    assert resumes.calls == []
    assert await delivered_via(services) == [(None, "recorded")] * 2


async def test_a_session_that_ended_meanwhile_retires_the_claim(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    await claimed(services, ANSWERED)
    await set_state(services.db, "s1", "CANCELLED")
    resumes = resume_with(services, monkeypatch)
    await services.clarifications.redeliver_after_restart(["p1"])
    assert resumes.calls == []
    assert await delivered_via(services) == [(None, "retired")] * 2


async def test_a_resume_that_cannot_start_keeps_the_intent_for_the_next_start(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    await claimed(services, ANSWERED)
    resumes = resume_with(services, monkeypatch, error=DispatchRejected("no agent"))
    await services.clarifications.redeliver_after_restart(["p1"])
    assert len(resumes.calls) == 1
    assert await delivered_via(services) == [(True, None)] * 2
    assert await recover_on_startup(services.db, at(2000)) == RecoveryReport(undelivered=["p1"])
