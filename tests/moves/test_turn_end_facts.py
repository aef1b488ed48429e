"""The turn end's moves facts read in the turn end's view statement (issue: performance):
the same facts as the statement of their own, in every state that decides what a turn end
does — on both databases."""

from __future__ import annotations

from kandev.catalog.states import TASK_REVIEW
from kandev.moves import repository as moves_repo
from kandev.moves.models import ACTOR_AGENT
from kandev.pending.describe import PendingDescriber
from kandev.services import Services
from tests.moves.helpers import add_session, live_turn, make_board, set_task


async def _both(services: Services, session_id: str, task_id: str):  # type: ignore[no-untyped-def]
    columns = (services.moves.turn_end_columns,)
    async with services.db.write() as conn:
        view = await PendingDescriber().view_of_session_task(
            conn, session_id, task_changing_to=TASK_REVIEW, columns=columns
        )
        read = await moves_repo.turn_end_facts(conn, session_id, task_id)
    return moves_repo.turn_end_facts_of(view.extra(session_id)), read


async def test_the_views_facts_are_the_facts_of_their_own_statement(services: Services) -> None:
    board = await make_board(services, step="Work")  # a step with turn-complete automation
    session_id = await add_session(services, board.task.id, state="RUNNING")
    in_view, read = await _both(services, session_id, board.task.id)
    assert in_view == read
    assert in_view is not None and not in_view.has_pending_move
    assert in_view.step_name == "Work" and in_view.step_events["on_turn_complete"]

    live_turn(services, session_id)  # a move during the turn is deferred: a pending move
    await services.moves.move(board.request("Review", actor=ACTOR_AGENT))
    in_view, read = await _both(services, session_id, board.task.id)
    assert in_view == read and in_view is not None and in_view.has_pending_move

    await set_task(services, board.task.id, workflow_step_id="gone-step")  # no such step
    in_view, read = await _both(services, session_id, board.task.id)
    assert in_view == read and in_view is not None
    assert (in_view.step_name, in_view.step_events) == (None, {})


async def test_a_view_read_without_the_columns_has_no_facts(services: Services) -> None:
    board = await make_board(services)
    session_id = await add_session(services, board.task.id)
    async with services.db.read() as conn:
        view = await PendingDescriber().view_of_session_task(conn, session_id)
    assert view.extra(session_id) is None
    assert moves_repo.turn_end_facts_of(view.extra(session_id)) is None  # then it reads them
    assert moves_repo.turn_end_facts_of(None) is None
