"""The ACP runtime is built when the first agent starts: a started server has not imported the
ACP SDK (~0.3 s of a server's start), and the first start builds it once, off the event loop,
with the server's settings (real scripted agents, tests/agents/scripted_agent.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import anyio

from kandev.agents.acp_runtime import AcpRuntime
from kandev.agents.deferred_runtime import DeferredRuntime
from kandev.agents.runtime import AgentRuntime
from kandev.config import Settings
from kandev.services import build_services
from tests.agents.conftest import WAIT_SECONDS, Recorder
from tests.agents.test_acp_runtime import launch_for

SERVED_PROBE = """
import sys
from starlette.testclient import TestClient
from kandev.app import create_app
from kandev.config import Settings

app = create_app(Settings(data_dir=sys.argv[1]))
with TestClient(app, base_url="http://127.0.0.1:8420") as client:  # lifespan runs
    assert client.get("/health").status_code == 200
    print(sorted(m for m in sys.modules if m == "acp" or m.startswith("acp.")))
"""


def test_a_started_server_has_not_imported_the_acp_sdk(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVED_PROBE, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_concurrent_first_starts_build_one_runtime_off_the_loop(tmp_path) -> None:
    builds: list[int] = []  # the thread of each build

    def build() -> AgentRuntime:
        builds.append(threading.get_ident())
        return AcpRuntime(init_timeout=10.0, stop_grace=2.0)

    runtime = DeferredRuntime(build)
    assert runtime.built is None
    recorders = [Recorder(), Recorder()]
    launches = [launch_for(tmp_path, session_id=f"sess-{i}") for i in range(2)]
    with anyio.fail_after(WAIT_SECONDS * 2):
        handles = await asyncio.gather(
            *(runtime.start(launch, rec) for launch, rec in zip(launches, recorders, strict=True))
        )
    try:
        assert len(builds) == 1 and builds[0] != threading.get_ident()
        built = runtime.built
        assert isinstance(built, AcpRuntime)
        third = await runtime.start(launch_for(tmp_path, session_id="sess-2"), Recorder())
        handles.append(third)
        assert len(builds) == 1 and runtime.built is built  # later starts reuse it
        with anyio.fail_after(WAIT_SECONDS):
            assert [await h.prompt("echo hi") for h in handles] == ["end_turn"] * 3
    finally:
        for handle in handles:
            await handle.stop()


async def test_the_servers_runtime_is_built_with_its_settings(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path / "home", agent_start_timeout=7.5)
    services = build_services(settings)
    await services.prepare_storage()  # the ledger records the agent's process
    try:
        runtime = services.orchestrator.runtime
        assert isinstance(runtime, DeferredRuntime) and runtime.built is None
        with anyio.fail_after(WAIT_SECONDS * 2):
            handle = await runtime.start(launch_for(tmp_path), Recorder())
        try:
            built = runtime.built
            assert isinstance(built, AcpRuntime)
            assert built.start_timeout == 7.5
            assert built.ledger is not None  # survivors of a session are reaped first
            assert type(built.permission_policy).__name__ == "DecidingPolicy"
        finally:
            await handle.stop()
    finally:
        await services.db.dispose()
