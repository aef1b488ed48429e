"""The demo agent (`kandev demo-agent`) as a real ACP subprocess, driven by AcpRuntime."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from kandev.agents.demo_agent import describe_answer, question_for
from kandev.agents.runtime import AgentLaunch
from tests.agents.conftest import WAIT_SECONDS, Recorder, StartAgent
from tests.agents.mcp_stub import StubMcpServer, closed_port_url

DEMO_MODULE = [sys.executable, "-m", "kandev.agents.demo_agent"]
TOKEN = "demo-token"


def demo_launch(tmp_path: Path, mcp_url: str, **changes: object) -> AgentLaunch:
    return AgentLaunch(
        session_id="sess-demo",
        command=changes.pop("command", DEMO_MODULE),  # type: ignore[arg-type]
        env={},
        cwd=tmp_path,
        mcp_url=mcp_url,
        mcp_token=TOKEN,
        resume_acp_session_id=changes.pop("resume_acp_session_id", None),  # type: ignore[arg-type]
    )


async def test_reply_mentions_the_prompt_and_the_kandev_tools(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder, mcp_stub
) -> None:
    stub: StubMcpServer = mcp_stub()
    handle = await start_agent(demo_launch(tmp_path, stub.url), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("Fix the login bug") == "end_turn"

    reply = recorder.text()
    assert "You said: Fix the login bug" in reply
    assert "I can reach Kandev (1 tools: list_workspaces_kandev)" in reply
    # (Streamed in chunks; those that arrive while one is being stored are delivered as
    # one update: kandev.agents.update_delivery, tests/agents/test_update_delivery.py.)
    calls = [u for u in recorder.updates if u.kind in ("tool_call", "tool_call_update")]
    assert [(u.kind, u.key) for u in calls] == [
        ("tool_call", "list-tools-1"),
        ("tool_call_update", "list-tools-1"),
    ]
    assert calls[0].metadata["status"] == "in_progress"
    assert calls[1].metadata == {"status": "completed"}
    assert "list_workspaces_kandev" in calls[1].content
    assert stub.authorizations and set(stub.authorizations) == {f"Bearer {TOKEN}"}


async def test_turns_reuse_one_http_client(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder, mcp_stub
) -> None:
    """The agent process keeps one HTTP client (and its pool) for every turn: the second
    turn's requests come over connections the first one opened, not a new client's."""
    stub: StubMcpServer = mcp_stub()
    handle = await start_agent(demo_launch(tmp_path, stub.url), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("First turn") == "end_turn"
    first_turn = len(stub.client_ports)
    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("Second turn") == "end_turn"
    first, second = stub.client_ports[:first_turn], stub.client_ports[first_turn:]

    assert "You said: Second turn" in recorder.text()
    assert first and second
    assert set(second) <= set(first)


async def test_unreachable_mcp_server_still_ends_the_turn(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    url = closed_port_url()
    handle = await start_agent(demo_launch(tmp_path, url), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("Hello there") == "end_turn"

    reply = recorder.text()
    assert "You said: Hello there" in reply
    assert f"I could not reach Kandev at {url}" in reply
    update = next(u for u in recorder.updates if u.kind == "tool_call_update")
    assert update.metadata == {"status": "failed"}


async def test_asks_the_user_and_quotes_every_part_of_the_answer(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder, mcp_stub
) -> None:
    answer = {
        "pending_id": "pq-1",
        "rejected": False,
        "reject_reason": None,
        "answers": {
            "next_step": {
                "answered": True,
                "selected_options": ["go_ahead", "stop_and_wait"],
                "selected_labels": ["Go ahead", "Stop and wait"],
                "selected_option": "go_ahead",
                "custom_text": "but write tests first",
            }
        },
    }
    stub: StubMcpServer = mcp_stub(answer=answer)
    handle = await start_agent(demo_launch(tmp_path, stub.url), recorder)
    long_prompt = "Refactor the billing module " + "x" * 100

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt(long_prompt) == "end_turn"

    [questions] = stub.questions
    assert questions == [question_for(long_prompt)]
    assert questions[0]["prompt"] == f"How should I proceed with: {long_prompt[:80]}?"
    assert [o["label"] for o in questions[0]["options"]] == ["Go ahead", "Stop and wait"]
    reply = recorder.text()
    assert '"Go ahead"' in reply and '"Stop and wait"' in reply
    assert "but write tests first" in reply
    keys = [u.key for u in recorder.updates if u.kind == "tool_call"]
    assert keys == ["list-tools-1", "ask-2"]


async def test_cancel_while_waiting_for_the_answer(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder, mcp_stub
) -> None:
    stub: StubMcpServer = mcp_stub(hold_questions=True)
    handle = await start_agent(demo_launch(tmp_path, stub.url), recorder)
    results: list[str] = []

    async def run() -> None:
        results.append(await handle.prompt("Deploy it"))

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            # The question reached Kandev (the stub) and is being held: the agent waits.
            assert await anyio.to_thread.run_sync(
                stub.question_received.wait, WAIT_SECONDS, abandon_on_cancel=True
            )
            await handle.cancel()

    assert results == ["cancelled"]
    assert any(u.key == "ask-2" for u in recorder.updates if u.kind == "tool_call")


async def test_resume_prompt_says_what_it_was_told(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder, mcp_stub
) -> None:
    stub: StubMcpServer = mcp_stub()
    handle = await start_agent(
        demo_launch(tmp_path, stub.url, resume_acp_session_id="demo-earlier-session"), recorder
    )
    assert handle.resumed and handle.acp_session_id == "demo-earlier-session"

    told = "You were waiting for an answer to: How should I proceed? The answer: Go ahead."
    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt(told) == "end_turn"

    assert told in recorder.text()
    assert all(u.kind == "agent_text" for u in recorder.updates)
    assert stub.authorizations == []  # nothing to ask: it did not call Kandev


async def test_kandev_demo_agent_command(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(
        demo_launch(tmp_path, closed_port_url(), command=["kandev", "demo-agent"]), recorder
    )

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("ping") == "end_turn"
    assert "You said: ping" in recorder.text()


def test_describe_answer() -> None:
    assert describe_answer({"rejected": True, "reject_reason": "not now"}) == (
        "You declined to answer (not now), so I will stop here."
    )
    only_text = {"answers": {"next_step": {"selected_labels": [], "custom_text": "do X"}}}
    assert describe_answer(only_text) == 'Thanks: you wrote "do X". That is what I will do.'
    assert describe_answer({"answers": {}}) == "You answered without choosing anything."
