"""AcpRuntime against real agent subprocesses (tests/agents/scripted_agent.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from kandev.agents.acp_runtime import AcpRuntime, resolve_command
from kandev.agents.runtime import AgentFailed, AgentLaunch
from tests.agents.conftest import WAIT_SECONDS, Recorder, StartAgent
from tests.agents.mcp_stub import WORKSPACES, StubMcpServer
from tests.agents.scripted_agent import CRASH_STDERR_LINE

SCRIPT = Path(__file__).with_name("scripted_agent.py")
MCP_URL = "http://127.0.0.1:9/agent/mcp"
TOKEN = "agent-token-123"


def launch_for(tmp_path: Path, **changes: object) -> AgentLaunch:
    launch = AgentLaunch(
        session_id="sess-1",
        command=[sys.executable, str(SCRIPT)],
        env={},
        cwd=tmp_path,
        mcp_url=MCP_URL,
        mcp_token=TOKEN,
    )
    return dataclasses.replace(launch, **changes)


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_echo_streams_text_in_order(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)
    assert handle.alive and not handle.resumed and handle.acp_session_id

    with anyio.fail_after(WAIT_SECONDS):
        stop_reason = await handle.prompt("echo hello streaming world")

    assert stop_reason == "end_turn"
    # Every update of the turn was delivered before prompt() returned, in order (chunks
    # that queued up behind a delivery come as one: tests/agents/test_update_delivery.py).
    assert [u.kind for u in recorder.updates] == ["agent_text"] * len(recorder.updates)
    assert recorder.text() == "hello streaming world"
    assert {session_id for _, session_id, _ in recorder.log} == {"sess-1"}


async def test_session_new_gets_cwd_env_and_the_kandev_mcp_server(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    launch = launch_for(tmp_path, env={"SCRIPTED_AGENT_PROBE": "from-launch-env"})
    handle = await start_agent(launch, recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("whoami") == "end_turn"

    who = json.loads(recorder.text())
    assert who["opened_with"] == "new"
    assert who["session_id"] == handle.acp_session_id
    assert who["cwd"] == str(tmp_path)
    assert who["probe"] == "from-launch-env"
    assert who["mcp_servers"] == [
        {
            "name": "kandev",
            "type": "http",
            "url": MCP_URL,
            "headers": {"Authorization": f"Bearer {TOKEN}"},
        }
    ]


async def test_agent_reaches_the_mcp_server_with_the_bearer(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder, mcp_stub
) -> None:
    stub: StubMcpServer = mcp_stub()
    handle = await start_agent(launch_for(tmp_path, mcp_url=stub.url), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("mcp") == "end_turn"

    assert json.loads(recorder.text()) == WORKSPACES
    assert stub.authorizations and set(stub.authorizations) == {f"Bearer {TOKEN}"}


async def test_tool_calls_and_plan_are_reduced(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("tool") == "end_turn"

    call, update, plan = recorder.updates
    assert (call.kind, call.key, call.content) == ("tool_call", "call-1", "Read README.md")
    assert call.metadata == {
        "title": "Read README.md",  # the title survives content later carrying the output
        "status": "pending",
        "kind": "read",
        "raw_input": {"path": "README.md"},
    }
    assert (update.kind, update.key, update.content) == ("tool_call_update", "call-1", "42 lines")
    assert update.metadata == {"status": "completed"}
    assert (plan.kind, plan.key) == ("plan", "plan")
    assert plan.content == "[completed] Read the code\n[in_progress] Write the fix"


async def test_permission_requests_pick_the_first_allow_option(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("permission") == "end_turn"

    assert recorder.text() == "permission: yes"


async def test_cancel_ends_a_running_turn(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)
    results: list[str] = []

    async def run_slow() -> None:
        results.append(await handle.prompt("slow"))

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_slow)
            await recorder.wait_for(lambda r: r.text() == "working")
            await handle.cancel()

    assert results == ["cancelled"]
    # The session is still usable.
    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("echo again") == "end_turn"
    assert recorder.text() == "workingagain"


async def test_crash_mid_turn_fails_the_prompt_and_reports_the_exit_once(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)

    with anyio.fail_after(WAIT_SECONDS), pytest.raises(AgentFailed) as failed:
        await handle.prompt("crash")

    message = str(failed.value)
    assert "exited with code 3" in message
    assert CRASH_STDERR_LINE in message
    await recorder.wait_for(lambda r: len(r.exits) == 1)
    assert not handle.alive
    assert handle.returncode == 3
    # What the agent said before dying arrived before its exit.
    assert [kind for kind, _, _ in recorder.log] == ["update", "exit"]
    assert recorder.log[0][2].content == "about to crash"  # type: ignore[union-attr]
    assert CRASH_STDERR_LINE in recorder.exits[0]
    assert "code 3" in recorder.exits[0]

    await handle.stop()  # after a crash, stop() is harmless and reports nothing more
    with pytest.raises(AgentFailed):
        await handle.prompt("echo too late")
    assert len(recorder.exits) == 1


async def test_stop_ends_the_process_without_an_exit_event(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)
    pid = handle.pid
    assert pid_exists(pid)

    with anyio.fail_after(WAIT_SECONDS):
        await handle.stop()
        await handle.stop()  # idempotent

    assert handle.returncode is not None
    assert not pid_exists(pid)
    assert not handle.alive
    assert recorder.exits == []


async def test_stop_kills_an_agent_that_ignores_sigterm(tmp_path: Path, recorder: Recorder) -> None:
    handle = await AcpRuntime(stop_grace=0.3).start(launch_for(tmp_path), recorder)
    with anyio.fail_after(WAIT_SECONDS):
        await handle.prompt("ignore-term")
        await handle.stop()

    assert handle.returncode == -signal.SIGKILL
    assert not pid_exists(handle.pid)
    assert recorder.exits == []


async def test_stop_ends_the_agents_children_too(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    fifo = tmp_path / "child.fifo"
    os.mkfifo(fifo)
    handle = await start_agent(launch_for(tmp_path), recorder)
    with anyio.fail_after(WAIT_SECONDS):
        await handle.prompt(f"spawn {fifo}")
    child_pid = int(recorder.text().removeprefix("spawned "))
    try:
        with anyio.fail_after(WAIT_SECONDS):
            # Opening returns once the child opened the FIFO for writing; then it says "alive".
            reader = await anyio.to_thread.run_sync(open, fifo, abandon_on_cancel=True)
            assert await anyio.to_thread.run_sync(reader.read, 5, abandon_on_cancel=True) == "alive"
            await handle.stop()
            # EOF only once every writer is gone: the child died with the agent.
            assert await anyio.to_thread.run_sync(reader.read, abandon_on_cancel=True) == ""
        reader.close()
    finally:
        if pid_exists(child_pid):  # the test failed: do not leave the child behind
            os.kill(child_pid, signal.SIGKILL)


async def test_stop_during_a_turn_fails_that_turn_quietly(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(launch_for(tmp_path), recorder)
    errors: list[str] = []

    async def run_slow() -> None:
        try:
            await handle.prompt("slow")
        except AgentFailed as exc:
            errors.append(str(exc))

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_slow)
            await recorder.wait_for(lambda r: r.text() == "working")
            await handle.stop()

    assert errors == ["agent was stopped"]
    assert recorder.exits == []


async def test_resume_loads_the_same_acp_session(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    first = await start_agent(launch_for(tmp_path), recorder)
    acp_session_id = first.acp_session_id
    await first.stop()

    second = await start_agent(launch_for(tmp_path, resume_acp_session_id=acp_session_id), recorder)
    assert second.resumed
    assert second.acp_session_id == acp_session_id

    with anyio.fail_after(WAIT_SECONDS):
        await second.prompt("whoami")
    # The history the agent replays while loading is not delivered again.
    assert len(recorder.updates) == 1
    who = json.loads(recorder.text())
    assert who["opened_with"] == "load"
    assert who["session_id"] == acp_session_id
    assert who["mcp_servers"][0]["headers"] == {"Authorization": f"Bearer {TOKEN}"}


async def test_resume_without_load_support_opens_a_new_session(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    no_load = {"SCRIPTED_AGENT_NO_LOAD": "1"}
    first = await start_agent(launch_for(tmp_path, env=no_load), recorder)
    old_id = first.acp_session_id
    await first.stop()

    second = await start_agent(
        launch_for(tmp_path, env=no_load, resume_acp_session_id=old_id), recorder
    )

    assert not second.resumed
    assert second.acp_session_id and second.acp_session_id != old_id
    with anyio.fail_after(WAIT_SECONDS):
        await second.prompt("whoami")
    assert json.loads(recorder.text())["opened_with"] == "new"


async def test_failed_load_falls_back_to_a_new_session(
    tmp_path: Path, start_agent: StartAgent, recorder: Recorder
) -> None:
    handle = await start_agent(
        launch_for(tmp_path, resume_acp_session_id="missing-session"), recorder
    )

    assert not handle.resumed
    assert handle.acp_session_id.startswith("scripted-")


async def test_command_not_found(tmp_path: Path, recorder: Recorder) -> None:
    launch = launch_for(tmp_path, command=["kandev-no-such-agent-command", "--acp"])

    with pytest.raises(AgentFailed, match="agent command not found: kandev-no-such-agent-command"):
        await AcpRuntime().start(launch, recorder)


async def test_command_not_executable(tmp_path: Path, recorder: Recorder) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)

    with pytest.raises(AgentFailed, match="agent command is not executable"):
        await AcpRuntime().start(launch_for(tmp_path, command=[str(script)]), recorder)


async def test_missing_working_directory(tmp_path: Path, recorder: Recorder) -> None:
    launch = launch_for(tmp_path / "nowhere")

    with pytest.raises(AgentFailed, match="working directory does not exist"):
        await AcpRuntime().start(launch, recorder)


async def test_a_program_that_is_not_an_acp_agent(tmp_path: Path, recorder: Recorder) -> None:
    command = [
        sys.executable,
        "-c",
        "import sys; print('hello'); print('usage: not an agent', file=sys.stderr)",
    ]

    with anyio.fail_after(WAIT_SECONDS), pytest.raises(AgentFailed) as failed:
        await AcpRuntime().start(launch_for(tmp_path, command=command), recorder)

    message = str(failed.value)
    assert message.startswith("agent did not answer ACP initialize (agent exited with code 0)")
    assert "hello" in message
    assert "usage: not an agent" in message
    assert recorder.log == []


async def test_an_agent_that_never_answers_times_out_and_is_killed(
    tmp_path: Path, recorder: Recorder
) -> None:
    pid_file = tmp_path / "pid"
    command = [
        sys.executable,
        "-c",
        "import os, sys, pathlib; pathlib.Path(sys.argv[1]).write_text(str(os.getpid())); "
        "sys.stdin.read()",
        str(pid_file),
    ]

    with anyio.fail_after(WAIT_SECONDS), pytest.raises(AgentFailed) as failed:
        await AcpRuntime(init_timeout=0.5).start(launch_for(tmp_path, command=command), recorder)

    assert str(failed.value).startswith(
        "agent did not start within 0.5 s (KANDEV_AGENT_START_TIMEOUT): no answer to ACP initialize"
    )
    assert not pid_exists(int(pid_file.read_text()))
    assert recorder.log == []


def test_kandev_command_runs_this_installation() -> None:
    assert resolve_command(["kandev", "demo-agent"]) == [
        sys.executable,
        "-m",
        "kandev",
        "demo-agent",
    ]
    assert resolve_command(["npx", "agent"]) == ["npx", "agent"]
    with pytest.raises(AgentFailed, match="empty"):
        resolve_command([])
