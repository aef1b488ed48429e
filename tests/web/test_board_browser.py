"""The board `/` in a real browser: columns, cards, drag and drop, live updates."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from kandev.web.render import ACTIVITY_LABELS, activity_class
from tests.repos.git_helpers import make_repo
from tests.web.conftest import DESKTOP, PHONE, chip_colours, created


def test_board_shows_one_column_per_step_and_cards_in_position_order(page, board) -> None:
    board.task("Write the parser")
    board.task("Fix the login bug")
    board.task("Ship v1", step="Review")
    page.goto(board.url)
    columns = page.locator(".column h2")
    expect(columns).to_have_text(["Backlog", "In Progress", "Review", "Done"])
    backlog = page.locator(f'.cards[data-step-id="{board.steps["Backlog"]["id"]}"] .card-title')
    expect(backlog).to_have_text(["Write the parser", "Fix the login bug"])
    review = page.locator(".column", has=page.get_by_role("heading", name="Review"))
    expect(review.locator("[data-count]")).to_have_text("1")
    # The badge is the agent's activity, not a second column name (issue 14 trial).
    expect(review.locator(".chip-state")).to_have_text("Idle")
    expect(review.locator(".chip-state")).to_have_attribute(
        "title", re.compile("column is the workflow step")
    )
    expect(page.locator("body")).to_have_attribute("data-ready", "1")


def test_board_renders_with_javascript_disabled(browser, server, board) -> None:
    board.task("Readable without JS", step="In Progress")
    ctx = browser.new_context(base_url=server.url, java_script_enabled=False, viewport=DESKTOP)
    try:
        page = ctx.new_page()
        page.goto(board.url)
        expect(page.locator(".column h2")).to_have_count(4)
        column = page.locator(".column", has=page.get_by_role("heading", name="In Progress"))
        expect(column.locator(".card-title")).to_have_text(["Readable without JS"])
        expect(page.locator("body")).not_to_have_attribute("data-ready", "1")  # JS really off
    finally:
        ctx.close()


def test_empty_state_creates_a_workspace_with_the_default_workflow(page, rest) -> None:
    page.goto("/")
    expect(page.get_by_role("heading", name="Welcome to Kandev")).to_be_visible()
    page.get_by_label("Workspace name").fill("First project")
    page.get_by_role("button", name="Create workspace").click()
    expect(page.locator(".column h2")).to_have_text(["Backlog", "In Progress", "Review", "Done"])
    names = [w["name"] for w in rest.get("/api/v1/workspaces").json()["workspaces"]]
    assert names == ["First project"]


def test_new_task_form_creates_the_task_on_the_chosen_step(page, board, rest) -> None:
    page.goto(board.url)
    page.locator("summary", has_text="New task").click()
    form = page.locator("#new-task-form")
    form.get_by_label("Title").fill("Made in the browser")
    form.get_by_label("Step").select_option(label="Review")
    form.get_by_role("button", name="Create task").click()
    review = page.locator(".column", has=page.get_by_role("heading", name="Review"))
    expect(review.locator(".card-title")).to_have_text(["Made in the browser"])
    tasks = rest.get("/api/v1/tasks", params={"workflow_id": board.workflow["id"]}).json()
    assert [(t["title"], t["workflow_step_id"]) for t in tasks["tasks"]] == [
        ("Made in the browser", board.steps["Review"]["id"])
    ]


def test_drag_to_another_step_moves_the_task_and_a_second_tab_sees_it_live(
    browser, server, page, board, rest
) -> None:
    task = board.task("Drag me")
    board.task("Already there", step="Review")
    other = browser.new_context(base_url=server.url, viewport=DESKTOP)
    try:
        watcher = other.new_page()
        watcher.goto(board.url)
        expect(watcher.locator("#live-status")).to_have_attribute("data-state", "live")
        page.goto(board.url)
        expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
        review_step = board.steps["Review"]["id"]
        page.locator(f"#task-{task['id']}").drag_to(
            page.locator(f'.cards[data-step-id="{review_step}"]'),
            target_position={"x": 40, "y": 8},  # above the card already there
        )
        review_cards = f'.cards[data-step-id="{review_step}"] .card-title'
        expect(page.locator(review_cards)).to_have_text(["Drag me", "Already there"])
        expect(page.locator(".card.moving")).to_have_count(0)  # the POST has answered
        moved = rest.get(f"/api/v1/tasks/{task['id']}").json()
        assert moved["workflow_step_id"] == review_step
        expect(watcher.locator(review_cards)).to_have_text(["Drag me", "Already there"])
        backlog = watcher.locator(".column", has=watcher.get_by_role("heading", name="Backlog"))
        expect(backlog.locator("[data-count]")).to_have_text("0")
    finally:
        other.close()


def test_reorder_within_a_column(page, board, rest) -> None:
    first = board.task("First")
    board.task("Second")
    third = board.task("Third")
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    page.locator(f"#task-{third['id']}").drag_to(
        page.locator(f"#task-{first['id']}"), target_position={"x": 30, "y": 2}
    )
    backlog = f'.cards[data-step-id="{board.steps["Backlog"]["id"]}"] .card-title'
    expect(page.locator(backlog)).to_have_text(["Third", "First", "Second"])
    expect(page.locator(".card.moving")).to_have_count(0)
    tasks = rest.get("/api/v1/tasks", params={"workflow_id": board.workflow["id"]}).json()
    order = [t["title"] for t in sorted(tasks["tasks"], key=lambda t: t["position"])]
    assert order == ["Third", "First", "Second"]


def test_a_rejected_move_snaps_back_with_the_reason(page, board) -> None:
    task = board.task("Stay put")
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    # The server refuses a move to a step of another workflow: simulate it by routing.
    page.route(
        re.compile(r".*/api/v1/tasks/.*/move$"),
        lambda route: route.fulfill(
            status=409, content_type="application/json", body='{"error": "WIP limit reached"}'
        ),
    )
    done = board.steps["Done"]["id"]
    page.locator(f"#task-{task['id']}").drag_to(page.locator(f'.cards[data-step-id="{done}"]'))
    expect(page.locator(".toast")).to_contain_text("WIP limit reached")
    backlog = f'.cards[data-step-id="{board.steps["Backlog"]["id"]}"] .card-title'
    expect(page.locator(backlog)).to_have_text(["Stay put"])
    expect(page.locator(f'.cards[data-step-id="{done}"] .card')).to_have_count(0)


def test_cards_move_live_when_moved_over_rest(page, board, rest) -> None:
    task = board.task("Moved over REST")
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    r = rest.post(
        f"/api/v1/tasks/{task['id']}/move",
        json={"workflow_id": board.workflow["id"], "workflow_step_id": board.steps["Done"]["id"]},
    )
    assert r.status_code == 200, r.text
    done = page.locator(f'.cards[data-step-id="{board.steps["Done"]["id"]}"]')
    expect(done.locator(f"#task-{task['id']}")).to_be_visible()
    backlog = page.locator(".column", has=page.get_by_role("heading", name="Backlog"))
    expect(backlog.locator("[data-count]")).to_have_text("0")
    # The column it left says what to do with it; the one it reached no longer does.
    expect(backlog.locator("[data-empty-hint]")).to_be_visible()
    expect(backlog.locator("[data-empty-hint]")).to_have_text(
        "No tasks — drag a card here or create one"
    )
    column = page.locator(".column", has=page.get_by_role("heading", name="Done"))
    expect(column.locator("[data-empty-hint]")).to_be_hidden()


def test_an_empty_column_shows_a_hint_until_a_card_arrives(page, board) -> None:
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    hints = page.locator(".column [data-empty-hint]")
    expect(hints).to_have_count(4)
    for i in range(4):
        expect(hints.nth(i)).to_be_visible()
    board.task("Fills Backlog")
    backlog = page.locator(".column", has=page.get_by_role("heading", name="Backlog"))
    expect(backlog.locator(".card")).to_have_count(1)
    expect(backlog.locator("[data-empty-hint]")).to_be_hidden()


def test_cards_appear_live_when_created_over_rest(page, board) -> None:
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    task = board.task("Made over REST")
    backlog = page.locator(".column", has=page.get_by_role("heading", name="Backlog"))
    expect(backlog.locator(f"#task-{task['id']} .card-title")).to_have_text("Made over REST")
    expect(backlog.locator("[data-count]")).to_have_text("1")


def test_cards_disappear_live_when_deleted_over_rest(page, board, rest) -> None:
    gone = board.task("Delete me")
    kept = board.task("Keep me")
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    expect(page.locator(".card")).to_have_count(2)
    r = rest.delete(f"/api/v1/tasks/{gone['id']}")
    assert r.status_code == 204, r.text
    expect(page.locator(f"#task-{gone['id']}")).to_have_count(0)
    expect(page.locator(f"#task-{kept['id']}")).to_be_visible()
    backlog = page.locator(".column", has=page.get_by_role("heading", name="Backlog"))
    expect(backlog.locator("[data-count]")).to_have_text("1")
    expect(page.locator("#board-total")).to_have_text("1")


def test_steps_renamed_added_and_deleted_over_rest_show_live(page, board, rest) -> None:
    task = board.task("Stays in its column", step="In Progress")
    wf = board.workflow["id"]
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    headings = page.locator(".column h2")
    r = rest.patch(
        f"/api/v1/workflows/{wf}/steps/{board.steps['Review']['id']}", json={"name": "QA"}
    )
    assert r.status_code == 200, r.text
    expect(headings).to_have_text(["Backlog", "In Progress", "QA", "Done"])
    r = rest.post(f"/api/v1/workflows/{wf}/steps", json={"name": "Blocked"})
    assert r.status_code == 201, r.text
    blocked_id = r.json()["id"]
    expect(headings).to_have_text(["Backlog", "In Progress", "QA", "Done", "Blocked"])
    r = rest.delete(f"/api/v1/workflows/{wf}/steps/{board.steps['Done']['id']}")
    assert r.status_code == 204, r.text
    expect(headings).to_have_text(["Backlog", "In Progress", "QA", "Blocked"])
    column = page.locator(".column", has=page.get_by_role("heading", name="In Progress"))
    expect(column.locator(f"#task-{task['id']} .card-title")).to_have_text("Stays in its column")
    page.locator("summary", has_text="New task").click()
    steps = page.locator('#new-task-form select[name="workflow_step_id"] option')
    expect(steps).to_have_text(["Backlog", "In Progress", "QA", "Blocked"])
    moved = board.task("Moved into the new step")  # the new columns are live too
    r = rest.post(
        f"/api/v1/tasks/{moved['id']}/move",
        json={"workflow_id": wf, "workflow_step_id": blocked_id},
    )
    assert r.status_code == 200, r.text
    blocked = page.locator(".column", has=page.get_by_role("heading", name="Blocked"))
    expect(blocked.locator(f"#task-{moved['id']}")).to_be_visible()
    expect(blocked.locator("[data-count]")).to_have_text("1")


@pytest.mark.parametrize("what", ["workflow", "workspace"])
def test_deleting_the_shown_board_over_rest_shows_a_notice(page, board, rest, what) -> None:
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    target = board.workflow if what == "workflow" else board.workspace
    r = rest.delete(f"/api/v1/{what}s/{target['id']}")
    assert r.status_code == 204, r.text
    notice = page.locator("#board-gone")
    expect(notice).to_contain_text(f"This {what} was deleted.")
    link = notice.get_by_role("link", name="Open the board")
    expect(link).to_have_attribute("href", "/")


def test_an_event_between_render_and_stream_open_is_not_missed(page, board) -> None:
    """The page renders the bus id it was read at; the first connection replays from it
    (?last_event_id=), so a card created in between still appears."""
    made: list[dict] = []

    def late_stream(route) -> None:
        if not made:  # the page is rendered; its stream is not open yet
            made.append(board.task("Created before the stream opened"))
        route.continue_()

    page.route(re.compile(r".*/api/v1/events.*"), late_stream)
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    assert made
    expect(page.locator(f"#task-{made[0]['id']} .card-title")).to_have_text(
        "Created before the stream opened"
    )


def test_question_puts_a_needs_input_badge_on_the_card_live(page, board, rest) -> None:
    task = board.task("Ask me")
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    card = page.locator(f"#task-{task['id']}")
    expect(card.locator("[data-badge=needs-input]")).to_have_count(0)
    profile = board.profile()
    r = rest.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": profile["id"], "prompt": "ask"},
    )
    assert r.status_code == 201, r.text
    expect(card.locator("[data-badge=needs-input]")).to_have_text("needs input")
    assert rest.get(f"/api/v1/tasks/{task['id']}").json()["task_pending_action"] == "clarification"
    # The card still sits in Backlog; its badge says what the agent does, never "Review".
    assert card.get_attribute("data-step-id") == board.steps["Backlog"]["id"]
    expect(card.locator(".chip-state")).to_have_text("Agent waiting")


def test_a_waiting_card_stands_out_from_a_finished_one(page, board, rest) -> None:
    """ "Agent waiting" (the human is needed) has the attention colour; "Agent done" (the
    turn ended) a calm one — they used to be the same amber (user trial)."""
    waiting, done = board.task("Needs me"), board.task("Finished")
    profile = board.profile()
    for task, prompt in ((waiting, "ask"), (done, "echo all done")):
        r = rest.post(
            f"/api/v1/tasks/{task['id']}/sessions",
            json={"agent_profile_id": profile["id"], "prompt": prompt},
        )
        assert r.status_code == 201, r.text
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    waiting_chip = f"#task-{waiting['id']} .chip-state"
    done_chip = f"#task-{done['id']} .chip-state"
    expect(page.locator(waiting_chip)).to_have_text("Agent waiting")
    expect(page.locator(done_chip)).to_have_text("Agent done")
    warn, (waiting_colours, done_colours) = chip_colours(page, waiting_chip, done_chip)
    assert waiting_colours[1] == warn, waiting_colours
    assert done_colours[1] != warn and done_colours[0] != waiting_colours[0], done_colours


def test_every_activity_badge_has_a_colour_of_its_own(page, board) -> None:
    """Each label the badge can show (web/render.py) gets its own colours, and only
    "Agent waiting" uses the attention colour."""
    classes = [activity_class(state) for state in ACTIVITY_LABELS]
    waiting = activity_class("REVIEW", "clarification")  # Agent waiting, whatever the state
    classes.append(waiting)
    page.goto(board.url)
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    page.evaluate(
        """classes => {
            const row = document.createElement("div");
            row.id = "palette";
            for (const cls of classes) {
                const chip = document.createElement("span");
                chip.className = `chip chip-state ${cls}`;
                chip.dataset.probe = cls;
                chip.textContent = cls;
                row.append(chip);
            }
            document.querySelector("main, body").append(row);
        }""",
        classes,
    )
    warn, colours = chip_colours(page, *(f'#palette [data-probe="{c}"]' for c in classes))
    assert len(set(colours)) == len(classes), dict(zip(classes, colours, strict=True))
    attention = [c for c, (_, text, _) in zip(classes, colours, strict=True) if text == warn]
    assert attention == [waiting]


def test_board_screenshots(browser, server, board, rest, screenshot) -> None:
    """docs/img/board.png (1440x900) and board-mobile.png (375 px): kept in the README."""
    made = {}
    for title, step in [
        ("Add OAuth sign-in", "Backlog"),
        ("Rate-limit the public API", "Backlog"),
        ("Migrate jobs to the new queue", "In Progress"),
        ("Fix flaky upload test", "Review"),
        ("Dark mode for settings", "Done"),
    ]:
        made[title] = board.task(title, step=step, description="Small, scoped change with tests.")
    profile = board.profile()
    for title, prompt in (
        ("Migrate jobs to the new queue", "slow"),
        ("Fix flaky upload test", "ask"),
    ):
        r = rest.post(
            f"/api/v1/tasks/{made[title]['id']}/sessions",
            json={"agent_profile_id": profile["id"], "prompt": prompt},
        )
        assert r.status_code == 201, r.text
    for name, viewport in (("board.png", DESKTOP), ("board-mobile.png", PHONE)):
        ctx = browser.new_context(base_url=server.url, viewport=viewport)
        try:
            page = ctx.new_page()
            page.goto(board.url)
            expect(page.locator(".card")).to_have_count(5)
            running = page.locator(f"#task-{made['Migrate jobs to the new queue']['id']}")
            expect(running.locator(".spinner")).to_have_count(1)
            asking = page.locator(f"#task-{made['Fix flaky upload test']['id']}")
            expect(asking.locator("[data-badge=needs-input]")).to_be_visible()
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"] + 1, f"horizontal scroll at {viewport}"
            screenshot(page, name, full_page=name == "board-mobile.png")
        finally:
            ctx.close()


def test_new_task_form_offers_the_workspace_repositories(
    page, board, rest, tmp_path, screenshot
) -> None:
    """No repository in the workspace: no Repository field. With one: an optional select,
    none by default; the task made with it chosen is on that repository."""
    page.goto(board.url)
    page.locator("summary", has_text="New task").click()
    form = page.locator("#new-task-form")
    expect(form.get_by_label("Title")).to_be_visible()
    expect(form.locator('select[name="repository_id"]')).to_have_count(0)

    repo = make_repo(tmp_path / "shop")
    registered = created(
        rest.post(
            f"/api/v1/workspaces/{board.workspace['id']}/repositories",
            json={"path": str(repo), "name": "shop"},
        )
    )
    page.reload()
    page.locator("summary", has_text="New task").click()
    select = form.get_by_label("Repository")
    expect(select).to_have_value("")  # none by default
    expect(select.locator("option")).to_have_text(["None (no worktree)", "shop (main)"])
    screenshot(page, "board-new-task-repository.png")
    form.get_by_label("Title").fill("Plain card")
    form.get_by_role("button", name="Create task").click()
    backlog = page.locator(".column", has=page.get_by_role("heading", name="Backlog"))
    expect(backlog.locator(".card-title")).to_have_text(["Plain card"])

    page.locator("summary", has_text="New task").click()
    form.get_by_label("Title").fill("On the repository")
    form.get_by_label("Repository").select_option(label="shop (main)")
    form.get_by_role("button", name="Create task").click()
    expect(backlog.locator(".card-title")).to_have_count(2)
    tasks = rest.get("/api/v1/tasks", params={"workflow_id": board.workflow["id"]}).json()
    on_repo = {t["title"]: (t["repository_id"], t["base_branch"]) for t in tasks["tasks"]}
    assert on_repo == {"Plain card": (None, None), "On the repository": (registered["id"], "main")}


def test_new_task_with_a_profile_and_prompt_starts_the_agent(page, board, rest) -> None:
    page.goto(board.url)
    page.locator("summary", has_text="New task").click()
    form = page.locator("#new-task-form")
    form.get_by_label("Title").fill("Ask the demo agent")
    form.get_by_label("Agent profile").select_option(label="demo")
    form.get_by_label("First prompt").fill("Tidy the README")
    form.get_by_label("Open the task after creating it").check()
    form.get_by_role("button", name="Create task").click()
    expect(page).to_have_url(re.compile(r"/tasks/[^/?]+$"))
    region = page.get_by_role("region", name="Clarification needed")
    expect(region.get_by_text("How should I proceed with: Tidy the README?")).to_be_visible()
    task_id = page.url.rsplit("/", 1)[-1]
    sessions = rest.get(f"/api/v1/tasks/{task_id}/sessions").json()["sessions"]
    assert [s["agent_profile_id"] for s in sessions] == [board.profile("demo")["id"]]


def test_a_card_whose_fragment_ran_ahead_of_its_move_event_still_moves(page, board, rest) -> None:
    # A card's fragment rendered after a move can be swapped in before the move's event
    # arrives: the card then says it is in the new step while it sits in the old column.
    # Placement goes by where the card is, so the event (and the next fragment) still move it.
    moved = board.task("Runs ahead of its event")
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    done = board.steps["Done"]["id"]
    card = page.locator(f"#task-{moved['id']}")
    card.evaluate("(card, step) => { card.dataset.stepId = step; }", done)
    r = rest.post(
        f"/api/v1/tasks/{moved['id']}/move",
        json={"workflow_id": board.workflow["id"], "workflow_step_id": done},
    )
    assert r.status_code == 200, r.text
    column = page.locator(".column", has=page.get_by_role("heading", name="Done"))
    expect(column.locator(f"#task-{moved['id']}")).to_be_visible()
    expect(column.locator("[data-count]")).to_have_text("1")
