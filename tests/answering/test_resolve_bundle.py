"""ResolveBundle at the service level, on both databases (seed R1-R12, N1-N9, M5, L16, P1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from kandev.auth.identity import Identity, acting_as
from kandev.clarification.inputs import RequestInput
from kandev.db.tables import metadata as schema
from kandev.db.tables import task_session_messages
from kandev.errors import Conflict, NotFound, ValidationFailed
from kandev.services import Services
from tests.prompted import prompted_session

QUESTIONS = [
    {
        "id": "color",
        "prompt": "Which colors?",
        "options": [
            {"option_id": "red", "label": "Red", "description": "warm"},
            {"option_id": "green", "label": "Green", "description": "calm"},
            {"option_id": "blue", "label": "Blue", "description": "cool"},
        ],
    },
    {
        "id": "size",
        "prompt": "Which size?",
        "options": [
            {"option_id": "s", "label": "Small", "description": "S"},
            {"option_id": "l", "label": "Large", "description": "L"},
        ],
    },
]
GOOD = [
    {"question_id": "color", "selected_options": ["red"]},
    {"question_id": "size", "selected_options": ["s"]},
]


async def _bundle(services: Services, owner: Identity | None = None) -> tuple[str, str, str]:
    """A session without a managed agent and an open question; (task, session, pending)."""
    task_id, session_id = await prompted_session(services, owner)
    with acting_as(owner):
        pending_id = await services.clarifications.request(
            RequestInput(session_id=session_id, questions=QUESTIONS)
        )
    return task_id, session_id, pending_id


async def _resolve(services: Services, pending_id: str, answers: Any = None, **kw: Any) -> dict:
    return await services.clarifications.resolve_bundle(
        pending_id, answers, kw.get("rejected", False), kw.get("reason", "")
    )


async def test_winner_then_loser_replays_the_winner(services: Services) -> None:
    _, _, pending_id = await _bundle(services)
    won = await _resolve(services, pending_id, GOOD)
    assert (won["success"], won["claimed"], won["status"]) == (True, True, "answered")
    other = [
        {"question_id": "size", "selected_options": ["l"]},
        {"question_id": "color", "selected_options": ["blue"]},
    ]
    lost = await _resolve(services, pending_id, other)
    assert (lost["claimed"], lost["status"]) == (False, "answered")
    # The winner's answers, in the bundle's question order — not the loser's.
    assert lost["response"] == won["response"]
    assert lost["response"]["answers"][0]["selected_options"] == ["red"]


async def test_replayed_rejection_has_empty_answers_and_no_reason(services: Services) -> None:
    _, _, pending_id = await _bundle(services)
    won = await _resolve(services, pending_id, rejected=True, reason="  not today  ")
    assert won["response"] == {"answers": [], "rejected": True, "reject_reason": "not today"}
    lost = await _resolve(services, pending_id, rejected=True, reason="me neither")
    assert (lost["claimed"], lost["status"]) == (False, "rejected")
    assert lost["response"] == {"answers": [], "rejected": True, "reject_reason": ""}


async def test_superseded_bundle_is_409_not_a_fake_winner(services: Services) -> None:
    _, session_id, pending_id = await _bundle(services)
    await services.sessions.prompt(session_id, "a newer turn")
    with pytest.raises(Conflict, match="no longer active"):
        await _resolve(services, pending_id, GOOD)


async def test_validation_runs_before_the_loser_branch(services: Services) -> None:
    _, _, pending_id = await _bundle(services)
    await _resolve(services, pending_id, GOOD)
    with pytest.raises(ValidationFailed) as bad:
        await _resolve(services, pending_id, [{"question_id": "color"}])
    assert bad.value.field == "answers"


@pytest.mark.parametrize(
    ("answers", "field"),
    [
        ([GOOD[0]], "answers"),  # N6.1 not one entry per question
        ([], "answers"),  # N6.1 / N8a: empty answers without rejected
        ([{"question_id": "", "selected_options": []}, GOOD[1]], "answers[0].question_id"),
        ([{"question_id": "shape"}, GOOD[1]], "answers[0].question_id"),  # N6.3 unknown
        ([GOOD[0], {"question_id": "color"}], "answers[1].question_id"),  # N6.4 duplicate
        (
            [{"question_id": "color", "selected_options": ["pink"]}, GOOD[1]],
            "answers[0].selected_options",
        ),  # N8 unknown option
        (
            [{"question_id": "color", "custom_text": "é" * 2001}, GOOD[1]],
            "answers[0].custom_text",
        ),  # N8b
    ],
)
async def test_each_validation_rule_alone(
    services: Services, answers: list[dict], field: str
) -> None:
    _, _session_id, pending_id = await _bundle(services)
    with pytest.raises(ValidationFailed) as bad:
        await _resolve(services, pending_id, answers)
    assert bad.value.field == field
    # Nothing was claimed: the bundle still answers normally.
    assert (await _resolve(services, pending_id, GOOD))["claimed"] is True


async def test_rejection_rules(services: Services) -> None:
    _, _, pending_id = await _bundle(services)
    with pytest.raises(ValidationFailed) as both:
        await _resolve(services, pending_id, GOOD, rejected=True)
    assert both.value.field == "answers"  # N8a
    with pytest.raises(ValidationFailed) as long_reason:
        await _resolve(services, pending_id, rejected=True, reason="ж" * 2001)
    assert long_reason.value.field == "reject_reason"
    exact = await _resolve(services, pending_id, rejected=True, reason="ж" * 2000)
    assert exact["response"]["reject_reason"] == "ж" * 2000


async def test_text_caps_count_characters_and_check_before_trimming(services: Services) -> None:
    _, _, pending_id = await _bundle(services)
    over = [{"question_id": "color", "custom_text": "界" * 2000 + " "}, GOOD[1]]
    with pytest.raises(ValidationFailed):  # 2001 characters with the space: rejected, not trimmed
        await _resolve(services, pending_id, over)
    exact = [{"question_id": "color", "custom_text": "界" * 2000}, GOOD[1]]
    assert (await _resolve(services, pending_id, exact))["claimed"] is True


async def test_equivalent_submissions_normalize_to_identical_payloads(
    tmp_path: Path, services: Services
) -> None:
    payloads = []
    for answers in (
        [
            {
                "question_id": "color",
                "selected_options": ["blue", "red", "blue"],
                "custom_text": "  both  ",
            },
            {"question_id": "size", "selected_options": ["l"]},
        ],
        [
            {"question_id": "size", "selected_options": ["l"], "custom_text": ""},
            {"question_id": "color", "selected_options": ["red", "blue"], "custom_text": "both"},
        ],
    ):
        _, _, pending_id = await _bundle(services)
        payloads.append(json.dumps((await _resolve(services, pending_id, answers))["response"]))
    assert payloads[0] == payloads[1]
    assert json.loads(payloads[0])["answers"][0] == {
        "question_id": "color",
        "selected_options": ["red", "blue"],
        "custom_text": "both",
    }


async def test_an_entry_with_neither_field_is_accepted(services: Services) -> None:
    _, _, pending_id = await _bundle(services)
    result = await _resolve(services, pending_id, [{"question_id": "color"}, GOOD[1]])
    assert result["response"]["answers"][0] == {
        "question_id": "color",
        "selected_options": [],
        "custom_text": "",
    }


async def test_a_bundle_without_question_ids_is_refused_before_the_claim(
    services: Services,
) -> None:
    _, _, pending_id = await _bundle(services)
    async with services.db.write() as conn:
        rows = await conn.execute(
            task_session_messages.select().where(
                task_session_messages.c.type == "clarification_request"
            )
        )
        first = rows.mappings().first()
        meta = {**first["metadata"], "question_id": ""}
        await conn.execute(
            update(task_session_messages)
            .where(task_session_messages.c.id == first["id"])
            .values(metadata=meta)
        )
    for kwargs in ({"answers": GOOD}, {"rejected": True}):
        with pytest.raises(ValidationFailed) as bad:
            await _resolve(services, pending_id, **kwargs)
        assert bad.value.field == "pending_id"


async def test_scoped_access_and_the_empty_task_id_rule(services: Services) -> None:
    alice, bob = Identity("alice"), Identity("bob")
    _task_id, _, pending_id = await _bundle(services, alice)
    with acting_as(bob), pytest.raises(NotFound) as foreign:
        await _resolve(services, pending_id, GOOD)
    with acting_as(bob), pytest.raises(NotFound) as fabricated:
        await _resolve(services, "fabricated", GOOD)
    assert str(foreign.value) == str(fabricated.value) == "clarification request not found"
    # M5: rows whose task_id is empty resolve their task through the session.
    async with services.db.write() as conn:
        await conn.execute(
            update(task_session_messages)
            .where(task_session_messages.c.type == "clarification_request")
            .values(task_id="")
        )
    with acting_as(alice):
        assert (await _resolve(services, pending_id, GOOD))["claimed"] is True


def test_there_is_one_claim_mechanism() -> None:
    """P1, structurally: no resolutions table, and no module writes a transient claim
    status (the claim moves rows straight to their outcome in its one statement); the
    catalogue only names the legacy `responding` status the reads still recognize."""
    assert "clarification_resolutions" not in schema.tables
    src = Path(__file__).resolve().parents[2] / "src" / "kandev"
    migrations = " ".join(p.read_text() for p in (src / "db" / "migrations").rglob("*.py"))
    assert "clarification_resolutions" not in migrations
    writers = [
        p.relative_to(src).as_posix()
        for p in src.rglob("*.py")
        if "RESPONDING" in p.read_text() or '"responding"' in p.read_text()
    ]
    assert writers == ["catalog/messages.py"]
    resolver = (src / "clarification" / "answering.py").read_text()
    # The resolver claims through the claims module (attempt_claim), never with an
    # UPDATE of its own.
    assert "attempt_claim(" in resolver and "update(" not in resolver
