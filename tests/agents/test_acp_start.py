"""Starting a real ACP agent: `authenticate` when the agent needs it, the start timeout, the
start/exit log lines (tests/agents/scripted_agent.py, SCRIPTED_AGENT_AUTH / _HANG)."""

from __future__ import annotations

import json
import logging
import os
import signal

import anyio
import pytest
from acp.schema import AuthEnvVar, AuthMethodAgent, EnvVarAuthMethod, TerminalAuthMethod

from kandev.agents.acp_runtime import AcpRuntime, choose_auth_method
from kandev.agents.runtime import AgentFailed
from kandev.config import Settings
from tests.agents.conftest import WAIT_SECONDS, Recorder, StartAgent
from tests.agents.test_acp_runtime import launch_for

AUTH_VAR = "SCRIPTED_TEST_API_KEY"


async def test_an_agent_requiring_auth_is_authenticated_with_the_env_key_method(
    tmp_path, start_agent: StartAgent, recorder: Recorder
) -> None:
    env = {"SCRIPTED_AGENT_AUTH": AUTH_VAR, AUTH_VAR: "sk-test"}
    handle = await start_agent(launch_for(tmp_path, env=env), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        assert await handle.prompt("whoami") == "end_turn"
    assert json.loads(recorder.text())["auth_method"] == "env-key"


async def test_a_method_naming_its_variable_in_the_description_is_used(
    tmp_path, start_agent: StartAgent, recorder: Recorder
) -> None:
    # codex-acp style: a plain method "Requires setting the `X` environment variable".
    env = {"SCRIPTED_AGENT_AUTH": AUTH_VAR, AUTH_VAR: "", "SCRIPTED_LEGACY_KEY": "k"}
    handle = await start_agent(launch_for(tmp_path, env=env), recorder)

    with anyio.fail_after(WAIT_SECONDS):
        await handle.prompt("whoami")
    assert json.loads(recorder.text())["auth_method"] == "legacy-key"


async def test_without_a_satisfiable_method_session_new_fails_naming_the_variables(
    tmp_path, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(AUTH_VAR, raising=False)
    monkeypatch.delenv("SCRIPTED_LEGACY_KEY", raising=False)
    launch = launch_for(tmp_path, env={"SCRIPTED_AGENT_AUTH": AUTH_VAR})

    with anyio.fail_after(WAIT_SECONDS * 2), pytest.raises(AgentFailed) as failed:
        await AcpRuntime(start_timeout=10.0).start(launch, recorder)

    message = str(failed.value)
    assert message.startswith("agent refused ACP session/new")
    assert f"set SCRIPTED_LEGACY_KEY or {AUTH_VAR} in the profile env" in message
    assert "Authentication required" in message


def test_choose_auth_method() -> None:
    terminal = TerminalAuthMethod(type="terminal", id="login", name="Log in")
    env_method = EnvVarAuthMethod(
        type="env_var",
        id="key",
        name="Key",
        vars=[AuthEnvVar(name="A_KEY"), AuthEnvVar(name="B_URL", optional=True)],
    )
    plain = AuthMethodAgent(id="chatgpt", name="Log in with ChatGPT")
    codex = AuthMethodAgent(
        id="openai-api-key",
        name="Use OPENAI_API_KEY",
        description="Requires setting the `OPENAI_API_KEY` environment variable.",
    )
    methods = [terminal, plain, env_method, codex]
    assert choose_auth_method(methods, {}) is None
    assert choose_auth_method(methods, {"A_KEY": ""}) is None  # empty is not set
    assert choose_auth_method(methods, {"A_KEY": "x"}) is env_method  # optional B_URL unset
    assert choose_auth_method(methods, {"OPENAI_API_KEY": "x"}) is codex


def test_the_start_timeout_is_a_setting_defaulting_to_two_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KANDEV_AGENT_START_TIMEOUT", raising=False)
    assert Settings().agent_start_timeout == 120.0
    assert AcpRuntime().start_timeout == 120.0
    monkeypatch.setenv("KANDEV_AGENT_START_TIMEOUT", "7.5")
    assert Settings().agent_start_timeout == 7.5


async def test_a_start_timeout_names_the_step_the_setting_and_the_stderr_tail(
    tmp_path, recorder: Recorder
) -> None:
    launch = launch_for(tmp_path, env={"SCRIPTED_AGENT_HANG": "session/new"})

    with anyio.fail_after(WAIT_SECONDS * 2), pytest.raises(AgentFailed) as failed:
        await AcpRuntime(start_timeout=3.0).start(launch, recorder)

    message = str(failed.value)
    assert message.startswith(
        "agent did not start within 3 s (KANDEV_AGENT_START_TIMEOUT): no answer to ACP session/new"
    )
    assert message.endswith("last stderr lines:\nscripted agent: hanging")


async def test_start_and_exit_are_logged_on_one_line_each(
    tmp_path, start_agent: StartAgent, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kandev.agents.acp_runtime")
    handle = await start_agent(launch_for(tmp_path), recorder)
    with anyio.fail_after(WAIT_SECONDS), pytest.raises(AgentFailed):
        await handle.prompt("crash")
    await recorder.wait_for(lambda r: bool(r.exits))

    lines = {r.kandev_event: r for r in caplog.records if hasattr(r, "kandev_event")}
    started, exited = lines["agent started"], lines["agent exited"]
    assert started.kandev_fields["session_id"] == "sess-1"
    assert started.kandev_fields["pid"] == handle.pid
    assert started.getMessage().startswith("agent started session_id=sess-1 pid=")
    assert exited.kandev_fields["code"] == 3 and exited.kandev_fields["expected"] is False
    assert exited.levelno == logging.WARNING
    assert "\n" not in started.getMessage() + exited.getMessage()


async def test_a_killed_agent_logs_its_signal(
    tmp_path, start_agent: StartAgent, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kandev.agents.acp_runtime")
    handle = await start_agent(launch_for(tmp_path), recorder)
    os.killpg(handle.pid, signal.SIGKILL)  # the guard leads the agent's process group
    await recorder.wait_for(lambda r: bool(r.exits))
    exited = next(r for r in caplog.records if getattr(r, "kandev_event", "") == "agent exited")
    assert exited.kandev_fields["signal"] == "SIGKILL"
    assert exited.kandev_fields["code"] == -9


async def test_a_failed_start_is_logged(
    tmp_path, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kandev.agents.acp_runtime")
    launch = launch_for(tmp_path, env={"SCRIPTED_AGENT_HANG": "session/new"})
    with anyio.fail_after(WAIT_SECONDS * 2), pytest.raises(AgentFailed):
        await AcpRuntime(start_timeout=2.0).start(launch, recorder)
    failed = next(
        r for r in caplog.records if getattr(r, "kandev_event", "") == "agent start failed"
    )
    assert failed.kandev_fields["reason"].startswith("agent did not start within 2 s")
    assert "\n" not in failed.getMessage()


async def test_a_prompt_refused_for_authentication_names_the_variables(
    tmp_path, start_agent: StartAgent, recorder: Recorder
) -> None:
    env = {"SCRIPTED_AGENT_AUTH": AUTH_VAR, AUTH_VAR: "sk-test"}
    handle = await start_agent(launch_for(tmp_path, env=env), recorder)

    with anyio.fail_after(WAIT_SECONDS), pytest.raises(AgentFailed) as failed:
        await handle.prompt("auth-required")
    assert str(failed.value) == (
        f"agent failed the prompt (set SCRIPTED_LEGACY_KEY or {AUTH_VAR} in the profile env, "
        "or log in with the agent's own command line first): Authentication required"
    )
