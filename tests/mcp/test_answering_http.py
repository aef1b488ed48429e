"""Answering over real HTTP: REST vs MCP race, R10/R12 envelopes, authorization (A1-A9)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.mcp.conftest import (
    agent_token,
    bearer_client,
    board,
    mcp_client,
    ok,
    tool_error,
    two_users,
)

QUESTIONS = [
    {
        "id": "pick",
        "prompt": "Pick some",
        "options": [
            {"option_id": "a", "label": "Alpha", "description": "first"},
            {"option_id": "b", "label": "Beta", "description": "second"},
        ],
    }
]
NOT_FOUND = {"error": "clarification request not found"}


async def _question(http: httpx.AsyncClient, task_id: str | None = None) -> tuple[str, str]:
    """An open question on a session without a managed agent; (session_id, pending_id)."""
    if task_id is None:
        task_id = (await board(http))["task"]["id"]
    sid, _ = await agent_token(http, task_id)
    await http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
    r = await http.post(
        "/api/v1/clarification/request", json={"session_id": sid, "questions": QUESTIONS}
    )
    assert r.status_code == 200, r.text
    return sid, r.json()["pending_id"]


async def test_rest_and_mcp_race_exactly_one_winner(mcp_server_factory, database_url) -> None:
    server = mcp_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        task_id = (await board(http))["task"]["id"]
        async with mcp_client(server.external_url) as external:
            for _ in range(8):
                _, pending_id = await _question(http, task_id)
                rest_body = {"answers": [{"question_id": "pick", "selected_options": ["a"]}]}
                mcp_args = {
                    "pending_id": pending_id,
                    "answers": [{"question_id": "pick", "selected_options": ["b"]}],
                }
                rest, mcp = await asyncio.gather(
                    http.post(f"/api/v1/clarification/{pending_id}/respond", json=rest_body),
                    external.call_tool("answer_question_kandev", mcp_args),
                )
                assert rest.status_code == 200, rest.text
                via_rest, via_mcp = rest.json(), ok(mcp)
                assert sorted([via_rest["claimed"], via_mcp["claimed"]]) == [False, True]
                # The loser was told what won: both carry the winner's payload, JSON-equal.
                assert via_rest["response"] == via_mcp["response"]
                assert via_rest["status"] == via_mcp["status"] == "answered"
                winner = via_rest if via_rest["claimed"] else via_mcp
                expected = "a" if winner is via_rest else "b"
                assert winner["response"]["answers"][0]["selected_options"] == [expected]


async def test_envelope_keys_are_always_present(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        _, answered = await _question(http)
        r = await http.post(
            f"/api/v1/clarification/{answered}/respond",
            json={"answers": [{"question_id": "pick"}]},
        )
        raw = json.loads(r.text)  # key presence, not unmarshalled defaults
        assert set(raw) >= {"success", "claimed", "status", "response"}
        assert raw["success"] is True
        assert set(raw["response"]) == {"answers", "rejected", "reject_reason"}
        assert raw["response"]["rejected"] is False and raw["response"]["reject_reason"] == ""
        assert set(raw["response"]["answers"][0]) == {
            "question_id",
            "selected_options",
            "custom_text",
        }
        assert raw["response"]["answers"][0]["selected_options"] == []
        _, rejected = await _question(http)
        r = await http.post(f"/api/v1/clarification/{rejected}/respond", json={"rejected": True})
        raw = json.loads(r.text)
        assert raw["response"] == {"answers": [], "rejected": True, "reject_reason": ""}


async def test_auth_off_carve_outs(mcp_server_factory, sqlite_url) -> None:
    """A4: with auth off nobody is newly denied; exactly these six things changed."""
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        _, pending_id = await _question(http)
        url = f"/api/v1/clarification/{pending_id}/respond"
        answer = {"answers": [{"question_id": "pick", "selected_options": ["a"]}]}
        first = await http.post(url, json=answer)
        # (2) success carries claimed/status/response
        assert {"claimed", "status", "response"} <= set(first.json())
        # (1) a duplicate is 200 claimed:false with the winner's payload, not 409
        dup = await http.post(url, json=answer)
        assert dup.status_code == 200 and dup.json()["claimed"] is False
        # (3) no durable messages → 404
        r = await http.post("/api/v1/clarification/fabricated/respond", json=answer)
        assert (r.status_code, r.json()) == (404, NOT_FOUND)
        # (4) unknown option ids, rejected+answers and over-long text are rejected
        _, fresh = await _question(http)
        furl = f"/api/v1/clarification/{fresh}/respond"
        for body, field in (
            (
                {"answers": [{"question_id": "pick", "selected_options": ["z"]}]},
                "answers[0].selected_options",
            ),
            ({"rejected": True, **answer}, "answers"),
            ({"rejected": True, "reason": "x" * 2001}, "reject_reason"),
            (
                {"answers": [{"question_id": "pick", "custom_text": "x" * 2001}]},
                "answers[0].custom_text",
            ),
        ):
            r = await http.post(furl, json=body)
            assert r.status_code == 400 and r.json()["error"].startswith(f"{field}:"), r.text
        # (5) is covered at the service level (a bundle without question ids, L16)
        # (6) /wait on an id with no durable messages → 404, not 504
        r = await http.get("/api/v1/clarification/fabricated/wait", params={"timeout": 0.1})
        assert (r.status_code, r.json()) == (404, NOT_FOUND)
        # And a bundle that exists still times out with 504 for an authorized caller.
        r = await http.get(f"/api/v1/clarification/{fresh}/wait", params={"timeout": 0.1})
        assert r.status_code == 504


async def test_foreign_ids_look_exactly_like_fabricated_ones(
    mcp_server_factory, database_url
) -> None:
    server = mcp_server_factory(database_url, auth=True)
    alice_pat, bob_pat = await two_users(server.url)
    async with (
        bearer_client(server.url, alice_pat) as alice,
        bearer_client(server.url, bob_pat) as bob,
    ):
        _, pending_id = await _question(alice)
        answer = {"answers": [{"question_id": "pick", "selected_options": ["a"]}]}
        for method, suffix, body, params in (
            ("GET", "", None, None),
            ("GET", "/wait", None, {"timeout": 0.1}),
            ("POST", "/respond", answer, None),
            ("POST", "/cancel", None, None),
        ):
            foreign = await bob.request(
                method, f"/api/v1/clarification/{pending_id}{suffix}", json=body, params=params
            )
            fabricated = await bob.request(
                method, f"/api/v1/clarification/no-such-id{suffix}", json=body, params=params
            )
            assert foreign.status_code == fabricated.status_code == 404, suffix
            assert foreign.content == fabricated.content, suffix
            assert "Pick some" not in foreign.text
        async with mcp_client(server.external_url, bob_pat) as bob_mcp:
            foreign = tool_error(
                await bob_mcp.call_tool(
                    "answer_question_kandev", {"pending_id": pending_id, **answer}
                )
            )
            fabricated = tool_error(
                await bob_mcp.call_tool(
                    "answer_question_kandev", {"pending_id": "no-such-id", **answer}
                )
            )
            assert (
                foreign
                == fabricated
                == {
                    "code": "NOT_FOUND",
                    "message": "clarification request not found",
                }
            )
        # Alice answers her own question: authorization lets the owner through.
        r = await alice.post(f"/api/v1/clarification/{pending_id}/respond", json=answer)
        assert r.status_code == 200 and r.json()["claimed"] is True


async def test_tools_live_on_the_right_surfaces_and_tasks_show_pending(
    mcp_server_factory, sqlite_url
) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        sid, creds = await agent_token(http, b["task"]["id"])
        async with (
            mcp_client(server.external_url) as external,
            mcp_client(creds["mcp_url"], creds["token"]) as agent,
        ):
            external_names = {t.name for t in (await external.list_tools()).tools}
            agent_names = {t.name for t in (await agent.list_tools()).tools}
            assert {"list_pending_questions_kandev", "answer_question_kandev"} <= external_names
            assert "ask_user_question_kandev" not in external_names  # S3
            assert not {"list_pending_questions_kandev", "answer_question_kandev"} & agent_names
            schema = next(
                t for t in (await external.list_tools()).tools if t.name == "answer_question_kandev"
            ).input_schema
            assert schema["required"] == ["pending_id"]  # N9

            async def pending_fields(client: Any) -> tuple[Any, Any]:
                tasks = ok(await client.call_tool("list_tasks_kandev", {}))["tasks"]
                task = next(t for t in tasks if t["id"] == b["task"]["id"])
                return task["task_pending_action"], task["primary_session_pending_action"]

            assert await pending_fields(external) == (None, None)  # T2: null, not ""
            await http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
            await http.post(
                "/api/v1/clarification/request", json={"session_id": sid, "questions": QUESTIONS}
            )
            assert await pending_fields(external) == ("clarification", "clarification")  # T1
            assert await pending_fields(agent) == ("clarification", "clarification")


@pytest.mark.parametrize("surface", ["rest", "mcp"])
async def test_inactive_without_a_winner_is_a_conflict(
    mcp_server_factory, sqlite_url, surface
) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        sid, pending_id = await _question(http)
        await http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "newer turn"})
        answer = [{"question_id": "pick", "selected_options": ["a"]}]
        if surface == "rest":
            r = await http.post(
                f"/api/v1/clarification/{pending_id}/respond", json={"answers": answer}
            )
            assert (r.status_code, r.json()) == (
                409,
                {"error": "clarification request is no longer active"},
            )
        else:
            async with mcp_client(server.external_url) as external:
                error = tool_error(
                    await external.call_tool(
                        "answer_question_kandev", {"pending_id": pending_id, "answers": answer}
                    )
                )
            assert error == {
                "code": "CONFLICT",
                "message": "clarification request is no longer active",
            }
