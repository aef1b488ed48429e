"""CONTRACT §8 "An acknowledged answer is never lost", with real crashes, on both databases.

Each case SIGKILLs a real `kandev serve` around an answer to a question its (real ACP)
agent asked, restarts it on the same data, and counts what the agent received (tests/
answer_fault.py). Once `respond` returned `claimed: true` the agent gets the answer exactly
once: in its tool call, or as a resumed turn after the restart. Killed inside `respond`
(injected faults), it was never acknowledged: the agent still gets it after the restart —
exactly once when the kill came before the result was written to the agent, at least once
when it came after that write but before the delivered mark (the server cannot know
whether the agent read it; docs/questions.md "Delivery guarantees").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.answer_fault import TrialResult, run_trial
from tests.conftest import _create_pg_database, missing
from tests.pg_server import PgServer
from tests.preloaded_serve import PreloadedServe


@pytest.fixture(scope="module")
def launcher() -> Iterator[PreloadedServe]:
    """Every server of this module is forked from one interpreter that has imported kandev
    (tests/preloaded_serve.py): a fresh `python -m kandev serve` spends seconds importing
    before it serves, twice per trial."""
    zygote = PreloadedServe()
    yield zygote
    zygote.close()


@pytest.fixture
async def serve_database(database_kind: str, pg_server: PgServer | None) -> str:
    """'' (SQLite in the data dir) or a fresh PostgreSQL database URL for `kandev serve`."""
    if database_kind == "sqlite":
        return ""
    if pg_server is None:
        missing("PostgreSQL")
    return await _create_pg_database(pg_server)


def assert_acknowledged_exactly_once(result: TrialResult) -> None:
    assert result.claimed is True
    assert result.deliveries == 1, result
    assert result.delivered_via and all(
        v in ("tool_call", "resume_turn") for v in result.delivered_via
    )


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.1], ids=["0ms", "20ms", "100ms"])
async def test_kill_after_respond_returned_live_waiter(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe, delay: float
) -> None:
    result = await run_trial(
        tmp_path / "home", database_url=serve_database, launcher=launcher, delay=delay
    )
    assert_acknowledged_exactly_once(result)
    # The agent was waiting: respond returned only after its tool result was sent.
    assert result.via_tool_call == 1
    assert set(result.delivered_via) == {"tool_call"}
    assert set(result.statuses) == {"answered"}


async def test_kill_after_respond_returned_detached(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe
) -> None:
    result = await run_trial(
        tmp_path / "home", database_url=serve_database, launcher=launcher, abandon=True
    )
    assert_acknowledged_exactly_once(result)
    assert result.via_resume == 1
    assert set(result.delivered_via) == {"resume_turn"}


async def test_kill_after_a_rejection_returned(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe
) -> None:
    result = await run_trial(
        tmp_path / "home", database_url=serve_database, launcher=launcher, reject=True
    )
    assert_acknowledged_exactly_once(result)
    assert set(result.statuses) == {"rejected"}


async def test_killed_after_the_claim_committed_delivered_once_after_restart(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe
) -> None:
    result = await run_trial(
        tmp_path / "home", database_url=serve_database, launcher=launcher, fault="after_claim"
    )
    assert result.claimed is None  # respond never answered: not acknowledged
    # Nothing had been written to the agent: exactly one delivery, as a resumed turn.
    assert (result.via_tool_call, result.via_resume) == (0, 1), result
    assert set(result.delivered_via) == {"resume_turn"}


async def test_killed_after_the_claim_committed_rejection_resumes_once(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe
) -> None:
    result = await run_trial(
        tmp_path / "home",
        database_url=serve_database,
        launcher=launcher,
        fault="after_claim",
        reject=True,
    )
    assert (result.via_tool_call, result.via_resume) == (0, 1), result
    assert set(result.statuses) == {"rejected"}


async def test_killed_between_flush_and_delivered_mark_delivered_at_least_once(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe
) -> None:
    result = await run_trial(
        tmp_path / "home", database_url=serve_database, launcher=launcher, fault="after_flush"
    )
    assert result.claimed is None
    # The result was on the agent's socket, the mark not written: resumed after the restart
    # (the agent may also have read its tool result before it died with the server).
    assert result.via_resume == 1, result
    assert result.via_tool_call <= 1
    assert set(result.delivered_via) == {"resume_turn"}


async def test_killed_after_the_resume_prompt_was_written_detached(
    tmp_path: Path, serve_database: str, launcher: PreloadedServe
) -> None:
    result = await run_trial(
        tmp_path / "home",
        database_url=serve_database,
        launcher=launcher,
        fault="after_resume_sent",
        abandon=True,
    )
    assert result.claimed is None
    assert result.via_tool_call == 0
    assert 1 <= result.via_resume <= 2, result
    assert set(result.delivered_via) == {"resume_turn"}
