"""The task page `/tasks/{id}` and the clarification overlay, in a real browser, with real
agent processes: the scripted ACP agent (tests/agents/scripted_agent.py) and the bundled demo
agent (profile `demo`, one question per prompt)."""

from __future__ import annotations

import json
import re
import sys

import pytest
from playwright.sync_api import expect

from tests.web.conftest import DESKTOP, SCRIPTED_AGENT, chip_colours

RESPOND = re.compile(r".*/api/v1/clarification/[^/]+/respond$")


def start(board, task: dict, prompt: str, profile: str = "scripted") -> dict:
    r = board.rest.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": board.profile(profile)["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    return r.json()


def messages(rest, session_id: str) -> list[dict]:
    r = rest.get(f"/api/v1/sessions/{session_id}/messages", params={"limit": 500})
    assert r.status_code == 200, r.text
    return r.json()["messages"]


def overlay(page):
    return page.get_by_role("region", name="Clarification needed")


def open_task(page, task: dict):
    page.goto(f"/tasks/{task['id']}")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")


def track_responds(page) -> list[dict]:
    sent: list[dict] = []
    page.on(
        "request",
        lambda r: sent.append(json.loads(r.post_data or "{}")) if RESPOND.match(r.url) else None,
    )
    return sent


# --- conversation and composer -----------------------------------------------------------


def test_conversation_renders_markdown_and_the_composer_sends_a_prompt(page, board) -> None:
    task = board.task("Echo")
    start(board, task, "echo hello **world**")
    open_task(page, task)
    agent = page.locator("#conversation .msg-agent .md")
    expect(agent.locator("strong")).to_have_text("world")
    expect(page.locator("#conversation .msg-user")).to_have_text(["echo hello **world**"])
    box = page.get_by_label("Message the agent")
    box.fill("echo again")
    box.press("Shift+Enter")
    expect(box).to_have_value("echo again\n")
    box.press("Backspace")
    box.press("Enter")
    expect(page.locator("#conversation .msg-user")).to_have_text(
        ["echo hello **world**", "echo again"]
    )
    expect(box).to_have_value("")
    expect(page.locator("#conversation .msg-agent .md").last).to_contain_text("again")


def test_tool_calls_are_collapsed_with_their_status(page, board) -> None:
    task = board.task("Tools")
    start(board, task, "tool")
    open_task(page, task)
    tool = page.locator("#conversation .msg-tool")
    expect(tool.locator(".chip")).to_have_text("completed")
    expect(tool).not_to_have_attribute("open", "")
    expect(tool.locator(".tool-body")).not_to_be_visible()
    expect(page.locator("#conversation .plan li")).to_have_count(2)


def test_task_page_shows_the_conversation_without_javascript(browser, server, board, page) -> None:
    task = board.task("No JS")
    session = start(board, task, "echo readable **text**")
    open_task(page, task)  # a live page tells when the reply is there
    expect(page.locator("#conversation .msg-agent strong")).to_have_text("text")
    ctx = browser.new_context(base_url=server.url, java_script_enabled=False, viewport=DESKTOP)
    try:
        page = ctx.new_page()
        page.goto(f"/tasks/{task['id']}?session={session['id']}")
        expect(page.locator("#conversation .msg-user")).to_have_text(["echo readable **text**"])
        expect(page.locator("#conversation .msg-agent strong")).to_have_text("text")
        expect(page.locator("body")).not_to_have_attribute("data-ready", "1")
        expect(page.locator("#stepper li")).to_have_count(4)
        expect(page.locator('#stepper [aria-current="step"]')).to_contain_text("Backlog")
    finally:
        ctx.close()


def test_an_event_between_render_and_stream_open_is_not_missed(page, board, rest) -> None:
    """The page renders the bus id it was read at; the first connection replays from it
    (?last_event_id=): a prompt and a move made in between still show."""
    task = board.task("Late stream")
    session = start(board, task, "echo one")
    open_task(page, task)
    expect(page.locator("#conversation .msg-agent .md")).to_contain_text("one")
    done: list[int] = []

    def late_stream(route) -> None:
        if not done:  # the page is rendered; its stream is not open yet
            r = rest.post(
                f"/api/v1/tasks/{task['id']}/move",
                json={
                    "workflow_id": board.workflow["id"],
                    "workflow_step_id": board.steps["Review"]["id"],
                },
            )
            done.append(r.status_code)
        route.continue_()

    page.route(re.compile(r".*/api/v1/events.*"), late_stream)
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(page.locator('#stepper [aria-current="step"]')).to_contain_text("Review")
    assert done == [200]
    assert session["id"] == page.locator("#task-panel").get_attribute("data-session-id")


def test_a_session_without_a_managed_agent_shows_how_to_connect_one(page, board, rest) -> None:
    task = board.task("External agent")
    r = rest.post(f"/api/v1/tasks/{task['id']}/sessions", json={})
    assert r.status_code == 201, r.text
    session = r.json()
    assert session["hint"], session
    open_task(page, task)
    hint = page.locator("#session-hint")
    expect(hint).to_have_text(session["hint"])
    expect(hint).to_contain_text(f"/api/v1/sessions/{session['id']}/agent-token")
    managed = start(board, board.task("Managed"), "echo hi")
    assert managed["hint"] is None
    page.goto(f"/tasks/{managed['task_id']}")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(page.locator("#session-hint")).to_have_count(0)


def test_stepper_moves_the_task(page, board, rest) -> None:
    task = board.task("Step me")
    open_task(page, task)
    page.locator("#stepper").get_by_role("button", name="3. Review").click()
    expect(page.locator('#stepper [aria-current="step"]')).to_contain_text("Review")
    assert (
        rest.get(f"/api/v1/tasks/{task['id']}").json()["workflow_step_id"]
        == (board.steps["Review"]["id"])
    )


def test_a_prompt_sent_while_a_turn_runs_is_shown_as_queued(page, board, rest) -> None:
    task = board.task("Queue")
    session = start(board, task, "slow")
    open_task(page, task)
    expect(page.locator("#conversation .msg-agent").first).to_contain_text("working")
    box = page.get_by_label("Message the agent")
    box.fill("echo later")
    box.press("Enter")
    expect(page.locator("#conversation .msg-queued")).to_have_text("echo later")
    page.get_by_role("button", name="Cancel turn").click()  # ends "slow"; the queue runs
    expect(page.locator("#conversation .msg-queued")).to_have_count(0)
    expect(page.locator("#conversation .msg-user").last).to_have_text("echo later")
    expect(page.locator("#conversation .msg-agent .md").last).to_contain_text("later")
    assert [m["content"] for m in messages(rest, session["id"]) if m["author_type"] == "user"] == [
        "slow",
        "echo later",
    ]


def test_a_failed_session_shows_its_error(page, board, rest) -> None:
    task = board.task("Crash")
    session = start(board, task, "crash")
    open_task(page, task)
    expect(page.locator("#session-error")).to_contain_text("Session failed:")
    expect(page.locator("#session-state")).to_have_text("FAILED")
    error = rest.get(f"/api/v1/sessions/{session['id']}").json()["error_message"]
    assert error and error in page.locator("#session-error").inner_text()


def test_stop_ends_the_session(page, board, rest) -> None:
    task = board.task("Stop")
    session = start(board, task, "slow")
    open_task(page, task)
    expect(page.locator("#conversation .msg-agent").first).to_contain_text("working")
    page.get_by_role("button", name="Stop session").click()
    expect(page.locator("#session-state")).to_have_text("CANCELLED")
    expect(page.get_by_label("Message the agent")).to_be_disabled()
    assert rest.get(f"/api/v1/sessions/{session['id']}").json()["state"] == "CANCELLED"


# --- the clarification overlay -----------------------------------------------------------


def test_single_question_happy_path(page, board, rest) -> None:
    task = board.task("Demo")
    session = start(board, task, "Refactor the parser", profile="demo")
    open_task(page, task)
    region = overlay(page)
    expect(region).to_be_visible()
    expect(region.get_by_text("How should I proceed with: Refactor the parser?")).to_be_visible()
    submit = region.get_by_role("button", name="Submit")
    expect(submit).to_be_disabled()
    options = region.locator(".option")
    first_label = options.first.locator(".opt-label").inner_text()
    button = region.get_by_role("button", name=re.compile("^" + re.escape(first_label)))
    # Label and description are separate rows of the option. Both boxes are read in one
    # script run: two separate reads can straddle a layout shift (the overlay settling, the
    # conversation growing) and compare positions from two different layouts.
    label_top, label_bottom, desc_top = options.first.evaluate(
        """o => {
            const l = o.querySelector('.opt-label').getBoundingClientRect();
            const d = o.querySelector('.opt-desc').getBoundingClientRect();
            return [l.top, l.bottom, d.top];
        }"""
    )
    assert label_top < desc_top and label_bottom <= desc_top + 1
    button.click()
    expect(button).to_have_attribute("aria-pressed", "true")
    expect(region.get_by_text("1 of 1 answered")).to_be_visible()
    submit.click()
    expect(region).to_be_hidden()
    expect(page.locator("#conversation .qa-answered .answer-label")).to_have_text([first_label])
    expect(page.locator("#conversation .msg-agent .md").last).to_contain_text(
        f'you chose "{first_label}"'
    )
    rows = [m for m in messages(rest, session["id"]) if m["type"] == "clarification_request"]
    assert [r["metadata"]["status"] for r in rows] == ["answered"]


def test_the_header_badge_is_the_agent_activity_not_the_step(page, board, rest) -> None:
    task = board.task("Activity")
    open_task(page, task)
    chip = page.locator("#task-state")
    expect(chip).to_have_text("Idle")
    expect(chip).to_have_attribute("title", re.compile("column is the workflow step"))
    start(board, task, "Refactor the parser", profile="demo")
    expect(overlay(page)).to_be_visible()
    # Live: the task is REVIEW with a question open, and still on Backlog.
    expect(chip).to_have_text("Agent waiting")
    expect(page.locator("#task-badge")).to_have_text("needs input")
    expect(page.locator("#stepper [aria-current=step]")).to_contain_text("Backlog")


def test_the_header_badge_colours_a_waiting_agent_apart_from_a_finished_one(page, board) -> None:
    """Live, in the header: "Agent waiting" in the attention colour, then, once answered
    and the turn is over, "Agent done" in a calm one (they were the same amber)."""
    task = board.task("Colours")
    open_task(page, task)
    chip = page.locator("#task-state")
    expect(chip).to_have_text("Idle")
    start(board, task, "Refactor the parser", profile="demo")
    expect(chip).to_have_text("Agent waiting")
    warn, [waiting] = chip_colours(page, "#task-state")
    assert waiting[1] == warn, waiting
    region = overlay(page)
    region.locator(".option").first.click()
    region.get_by_role("button", name="Submit").click()
    expect(region).to_be_hidden()
    expect(chip).to_have_text("Agent done")
    warn, [done] = chip_colours(page, "#task-state")
    assert done[1] != warn and done[0] != waiting[0], done


def test_multi_question_carousel_submit_gating_number_keys_and_arrows(page, board, rest) -> None:
    task = board.task("Carousel")
    session = start(board, task, "ask")
    open_task(page, task)
    region = overlay(page)
    expect(region.get_by_text("0 of 2 answered")).to_be_visible()
    expect(region.get_by_text("Question 1 of 2")).to_be_visible()
    expect(region.locator("[data-context]")).to_have_text("scripted agent asking")
    expect(region.locator("[data-context]")).to_have_count(1)
    submit = region.get_by_role("button", name="Submit")
    expect(submit).to_be_disabled()
    region.get_by_text("Which languages should the fix cover?").click()  # focus in the panel
    page.keyboard.press("1")
    page.keyboard.press("3")  # multi-select: Python and Go
    expect(region.get_by_role("button", name=re.compile("^Python"))).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(region.get_by_role("button", name=re.compile("^Go"))).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(region.get_by_text("1 of 2 answered")).to_be_visible()
    expect(submit).to_be_disabled()
    page.keyboard.press("ArrowRight")
    expect(region.get_by_text("Question 2 of 2")).to_be_visible()
    page.keyboard.press("ArrowLeft")
    expect(region.get_by_text("Question 1 of 2")).to_be_visible()
    expect(region.get_by_role("button", name=re.compile("^Go"))).to_have_attribute(
        "aria-pressed", "true"
    )  # going back keeps the answer
    region.get_by_role("button", name="Question 2").click()  # the stepper jumps
    page.keyboard.press("2")
    expect(region.get_by_text("2 of 2 answered")).to_be_visible()
    expect(submit).to_be_enabled()
    page.keyboard.press("ArrowRight")  # on the last step with all answered: submits
    expect(region).to_be_hidden()
    rows = [m for m in messages(rest, session["id"]) if m["type"] == "clarification_request"]
    assert [r["metadata"]["response"]["selected_options"] for r in rows] == [
        ["py", "go"],
        ["q2_opt2"],
    ]


def test_shortcuts_only_fire_with_focus_inside_the_task_panel(page, board) -> None:
    task = board.task("Scope")
    start(board, task, "ask")
    open_task(page, task)
    region = overlay(page)
    expect(region).to_be_visible()
    page.locator(".topbar .brand").focus()  # outside the task panel
    page.keyboard.press("1")
    expect(region.get_by_role("button", name=re.compile("^Python"))).to_have_attribute(
        "aria-pressed", "false"
    )


def test_escape_dismisses_locally_without_answering(page, board, rest) -> None:
    task = board.task("Escape")
    session = start(board, task, "ask")
    open_task(page, task)
    sent = track_responds(page)
    region = overlay(page)
    expect(region.get_by_text("0 of 2 answered")).to_be_visible()
    page.get_by_label("Message the agent").focus()  # Escape works from the composer too
    page.keyboard.press("Escape")
    expect(region.get_by_role("button", name="Submit")).to_have_count(0)
    toggle = region.get_by_role("button", name="Show questions")
    expect(toggle).to_be_visible()
    assert sent == []
    assert rest.get(f"/api/v1/sessions/{session['id']}").json()["pending_action"] == (
        "clarification"
    )
    toggle.click()
    region.get_by_role("button", name=re.compile("^Python")).click()
    region.get_by_role("button", name="Question 2").click()
    region.get_by_role("button", name=re.compile("^Yes")).click()
    region.get_by_role("button", name="Submit").click()
    expect(region).to_be_hidden()
    assert len(sent) == 1 and [a["question_id"] for a in sent[0]["answers"]] == ["lang", "q2"]


def test_skip_all_rejects_the_bundle(page, board, rest) -> None:
    task = board.task("Skip")
    session = start(board, task, "ask")
    open_task(page, task)
    sent = track_responds(page)
    region = overlay(page)
    region.get_by_role("button", name="Skip all").click()
    expect(region).to_be_hidden()
    expect(page.locator("#conversation .qa-rejected [data-answer]").first).to_contain_text(
        "Skipped"
    )
    assert sent == [{"rejected": True, "reject_reason": "User skipped"}]
    rows = [m for m in messages(rest, session["id"]) if m["type"] == "clarification_request"]
    assert {r["metadata"]["status"] for r in rows} == {"rejected"}


def test_multiline_custom_answer_and_mixed_options_and_text(page, board, rest) -> None:
    task = board.task("Mixed")
    session = start(board, task, "ask")
    open_task(page, task)
    region = overlay(page)
    region.get_by_role("button", name=re.compile("^JavaScript")).click()
    region.get_by_role("button", name="Question 2").click()
    box = region.get_by_role("textbox", name="Your answer")
    box.click()
    box.type("after lunch")
    box.press("Shift+Enter")
    box.type("and after tests")
    expect(box).to_have_value("after lunch\nand after tests")
    expect(region.locator(".custom")).to_have_class(re.compile("active"))
    expect(region.get_by_text("2 of 2 answered")).to_be_visible()
    region.get_by_role("button", name="Submit").click()
    expect(region).to_be_hidden()
    quote = page.locator("#conversation .qa-answered .answer-text")
    expect(quote).to_have_text("after lunch\nand after tests")
    rows = [m for m in messages(rest, session["id"]) if m["type"] == "clarification_request"]
    assert [r["metadata"]["response"] for r in rows] == [
        {"question_id": "lang", "selected_options": ["js"], "custom_text": ""},
        {
            "question_id": "q2",
            "selected_options": [],
            "custom_text": "after lunch\nand after tests",
        },
    ]


def test_enter_in_the_answer_box_goes_to_the_next_question(page, board) -> None:
    task = board.task("Enter")
    start(board, task, "ask")
    open_task(page, task)
    region = overlay(page)
    box = region.get_by_role("textbox", name="Your answer")
    box.fill("only Python, for now")
    box.press("Enter")
    expect(region.get_by_text("Question 2 of 2")).to_be_visible()
    expect(region.get_by_text("1 of 2 answered")).to_be_visible()
    region.get_by_role("button", name="Question 1").click()
    expect(region.get_by_role("textbox", name="Your answer")).to_have_value("only Python, for now")


def test_a_session_started_elsewhere_appears_live(page, board) -> None:
    task = board.task("Tabs")
    first = start(board, task, "echo one")
    open_task(page, task)
    expect(page.locator(f'[data-session-tab="{first["id"]}"]')).to_be_visible()
    second = start(board, task, "echo two")
    expect(page.locator(f'[data-session-tab="{second["id"]}"]')).to_be_visible()


def test_typing_deselects_the_option_and_enter_commits(page, board, rest) -> None:
    task = board.task("Typing")
    session = start(board, task, "Plan the release", profile="demo")
    open_task(page, task)
    region = overlay(page)
    first = region.locator(".option").first
    first.click()
    expect(first).to_have_attribute("aria-pressed", "true")
    box = region.get_by_role("textbox", name="Your answer")
    box.fill("Do it my way")
    expect(first).to_have_attribute("aria-pressed", "false")
    box.press("Enter")  # a single question: Enter submits
    expect(region).to_be_hidden()
    expect(page.locator("#conversation .msg-agent .md").last).to_contain_text(
        'you wrote "Do it my way"'
    )
    row = next(m for m in messages(rest, session["id"]) if m["type"] == "clarification_request")
    assert row["metadata"]["response"]["custom_text"] == "Do it my way"


@pytest.mark.parametrize("via", ["rest", "overlay"])
def test_a_text_only_answer_is_shown_as_a_written_answer(page, board, rest, via) -> None:
    """An answer with custom text and no option (`kandev questions answer ID --text …`, or
    typed in the overlay) reads "Written answer" and the text: never a ✓ with no label."""
    task = board.task("Written")
    session = start(board, task, "Plan the release", profile="demo")
    open_task(page, task)
    region = overlay(page)
    expect(region).to_be_visible()
    if via == "rest":
        row = next(m for m in messages(rest, session["id"]) if m["type"] == "clarification_request")
        r = rest.post(
            f"/api/v1/clarification/{row['metadata']['pending_id']}/respond",
            json={
                "answers": [{"question_id": row["metadata"]["question_id"], "custom_text": "use X"}]
            },
        )
        assert r.status_code == 200 and r.json()["claimed"] is True, r.text
    else:
        box = region.get_by_role("textbox", name="Your answer")
        box.fill("use X")
        box.press("Enter")
    expect(region).to_be_hidden()
    for _ in ("live", "reloaded"):
        answer = page.locator("#conversation .qa-answered [data-answer]")
        expect(answer.locator(".answer-kind")).to_have_text("Written answer")
        expect(answer.locator(".answer-text")).to_have_text("use X")
        expect(answer.locator(".answer-label")).to_have_count(0)
        page.reload()
        expect(page.locator("body")).to_have_attribute("data-ready", "1")


def test_lost_race_closes_the_overlay_and_shows_the_winners_answer(page, board, rest) -> None:
    """W3: the bundle is answered over REST first; this tab (with no live updates, so it
    cannot know) then submits: claimed:false, and the page shows the winner's answer."""
    task = board.task("Race")
    start(board, task, "ask")
    open_task(page, task)
    expect(overlay(page)).to_be_visible()
    page.route(re.compile(r".*/api/v1/events.*"), lambda route: route.abort())
    page.reload()
    region = overlay(page)
    expect(region).to_be_visible()
    pending_id = region.get_attribute("data-pending-id")
    winner = rest.post(
        f"/api/v1/clarification/{pending_id}/respond",
        json={
            "answers": [
                {"question_id": "lang", "selected_options": ["go"]},
                {"question_id": "q2", "custom_text": "decided over REST"},
            ]
        },
    )
    assert winner.status_code == 200 and winner.json()["claimed"] is True, winner.text
    results: list[dict] = []
    page.on("response", lambda r: results.append(r.json()) if RESPOND.match(r.url) else None)
    region.get_by_role("button", name=re.compile("^Python")).click()
    region.get_by_role("button", name="Question 2").click()
    region.get_by_role("button", name=re.compile("^Yes")).click()
    region.get_by_role("button", name="Submit").click()
    expect(region).to_be_hidden()
    answers = page.locator("#conversation .qa-answered [data-answer]")
    expect(answers).to_have_count(2)
    expect(answers.nth(0)).to_have_text("Go")
    expect(answers.nth(1)).to_contain_text("decided over REST")
    expect(page.locator("#conversation [data-answer]", has_text="Python")).to_have_count(0)
    expect(page.locator("#conversation [data-answer]", has_text="Yes")).to_have_count(0)
    assert results and results[0]["claimed"] is False


def test_a_409_closes_the_overlay(page, board) -> None:
    task = board.task("Gone")
    start(board, task, "ask")
    open_task(page, task)
    page.route(
        RESPOND,
        lambda route: route.fulfill(
            status=409, content_type="application/json", body='{"error": "not active"}'
        ),
    )
    region = overlay(page)
    region.get_by_role("button", name="Skip all").click()
    expect(region).to_be_hidden()


def test_a_failed_submit_keeps_the_overlay_open_for_a_retry(page, board) -> None:
    task = board.task("Retry")
    start(board, task, "ask")
    open_task(page, task)
    page.route(
        RESPOND,
        lambda route: route.fulfill(
            status=500, content_type="application/json", body='{"error": "database is busy"}'
        ),
    )
    region = overlay(page)
    region.get_by_role("button", name="Skip all").click()
    # The overlay shows the API error as a sentence (web/static/js/error_text.js).
    expect(region.get_by_role("alert")).to_have_text("Database is busy.")
    expect(region.get_by_role("button", name="Skip all")).to_be_enabled()


def test_w4a_two_thousand_emoji_are_accepted_and_the_next_one_is_refused(page, board, rest) -> None:
    task = board.task("Emoji")
    session = start(board, task, "Pick an emoji", profile="demo")
    open_task(page, task)
    region = overlay(page)
    box = region.get_by_role("textbox", name="Your answer")
    # No maxlength: it counts UTF-16 units; the overlay counts code points, as the server.
    assert box.get_attribute("maxlength") is None
    counter = region.locator("[data-rune-count]")
    box.fill("😀" * 1800)
    expect(counter).to_be_hidden()
    box.fill("😀" * 2000)  # 4000 UTF-16 units: maxlength=2000 would have cut this in half
    expect(counter).to_be_visible()
    expect(counter).to_contain_text("2000 / 2000")
    box.focus()
    page.keyboard.press("End")
    page.keyboard.insert_text("😀")  # the 2001st rune is refused, visibly
    assert box.evaluate("b => [...b.value].length") == 2000
    expect(counter).to_contain_text("limited to 2000")
    region.get_by_role("button", name="Submit").click()
    expect(region).to_be_hidden()
    row = next(m for m in messages(rest, session["id"]) if m["type"] == "clarification_request")
    assert row["metadata"]["response"]["custom_text"] == "😀" * 2000


def test_task_page_screenshot_with_the_overlay(page, board, screenshot) -> None:
    """docs/img/task-overlay.png (1440x900), used in the README and docs/web.md."""
    task = board.task(
        "Harden the upload endpoint",
        description="Reject oversized files early and **stream** the rest to disk.",
    )
    start(board, task, "tool")
    open_task(page, task)
    expect(page.locator("#conversation .msg-tool")).to_have_count(1)
    r = board.rest.post(
        f"/api/v1/sessions/{page.locator('#task-panel').get_attribute('data-session-id')}/prompt",
        json={"text": "ask"},
    )
    assert r.status_code == 202, r.text
    region = overlay(page)
    expect(region.get_by_text("0 of 2 answered")).to_be_visible()
    region.get_by_role("button", name=re.compile("^Python")).click()
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "task-overlay.png")


# --- layout under a long conversation ----------------------------------------------------

LAPTOPS = [{"width": 1280, "height": 900}, {"width": 1280, "height": 720}]
TURN = "echo Turn {}: checked the size limit, the streaming path and the error page."

# Every box in one script run: the overlay opening shortens the list, and two separate reads
# could compare positions from two different layouts.
_LAYOUT_JS = """sel => {
    const span = (el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; };
    const list = document.getElementById("conversation");
    const panel = document.querySelector(sel);
    let [top, bottom] = span(panel);
    if (list.contains(panel)) {  // a card in the list: what the list's scrolling shows of it
        const [listTop, listBottom] = span(list);
        [top, bottom] = [Math.max(top, listTop), Math.min(bottom, listBottom)];
    }
    return {
        viewport: innerHeight,
        chat: span(document.querySelector(".chat")),
        panel: [top, bottom],
        panelScroll: panel.scrollTop,
        parts: [...panel.querySelectorAll(
            ".clarify-bar, .qprompt, .options > .option, .perm-head, .perm-options button"
        )].map(span),
        list: span(list),
        listHidden: list.scrollHeight - list.scrollTop - list.clientHeight,
        composer: span(document.getElementById("composer")),
    };
}"""


def long_conversation(board, task: dict, last: str) -> dict:
    """A session with a dozen turns, then `last`: prompts sent while a turn runs queue and
    run in order."""
    session = start(board, task, TURN.format(1))
    for text in [*(TURN.format(n) for n in range(2, 13)), last]:
        r = board.rest.post(f"/api/v1/sessions/{session['id']}/prompt", json={"text": text})
        assert r.status_code == 202, r.text
    return session


_LIST_AT_END_JS = """() => {
    const list = document.getElementById("conversation");
    return list.scrollHeight - list.scrollTop - list.clientHeight <= 2;
}"""


def settled_layout(page, selector: str) -> dict:
    """The layout once the list has scrolled to its end (the page scrolls it as messages
    render: waited for as a condition, so a slow frame cannot be read half-way)."""
    page.wait_for_function(_LIST_AT_END_JS)
    return page.evaluate(_LAYOUT_JS, selector)


def assert_fully_shown(layout: dict, size: dict) -> None:
    """The overlay's bar, question and options (or a permission card's head and buttons) lie
    inside the visible box of the overlay (of the card, as far as the list shows it) and of
    the window; the list above shows its end; the
    composer is not cut off by the chat panel."""
    top, bottom = layout["panel"]
    assert layout["panelScroll"] == 0, (size, layout)
    assert layout["parts"], layout
    for part_top, part_bottom in layout["parts"]:
        assert top - 1 <= part_top and part_bottom <= bottom + 1, (size, layout)
        assert part_bottom <= layout["viewport"], (size, layout)
    list_top, list_bottom = layout["list"]
    assert list_bottom - list_top >= 60, (size, layout)  # about one message, never nothing
    assert layout["listHidden"] <= 2, (size, layout)  # scrolled to its end
    assert layout["composer"][1] <= layout["chat"][1] + 1, (size, layout)


def test_the_overlay_keeps_its_height_under_a_long_conversation(page, board) -> None:
    """A dozen turns, then a question: the overlay is as tall as its question needs (the
    message list above shrinks and scrolls), at 1280x900 and at a short 1280x720 (where the
    page grows rather than squeeze the question). It used to shrink with the list, to ~74 px:
    only "Clarification needed" and a cut-off line."""
    task = board.task("Long talk")
    long_conversation(board, task, "ask")
    for size in LAPTOPS:
        page.set_viewport_size(size)
        open_task(page, task)
        region = overlay(page)
        expect(region.get_by_text("0 of 2 answered")).to_be_visible()
        expect(region.locator(".option")).to_have_count(3)
        layout = settled_layout(page, "section.clarify")
        assert_fully_shown(layout, size)
        assert len(layout["parts"]) == 5, layout  # the bar, the question, three options


def test_a_permission_card_after_a_long_conversation_is_in_view(page, board) -> None:
    """A permission request is a card in the list (not a panel beside it): the list ends
    with it, whole, buttons and all, at laptop sizes."""
    task = board.task("Long talk, then a command")
    long_conversation(board, task, "permission execute make test")
    for size in LAPTOPS:
        page.set_viewport_size(size)
        open_task(page, task)
        card = page.locator('#conversation [data-type="permission_request"]')
        expect(card.get_by_role("button")).to_have_text(["Reject", "Allow"])
        layout = settled_layout(page, '#conversation [data-type="permission_request"]')
        assert_fully_shown(layout, size)
        assert len(layout["parts"]) == 3, layout  # the head, two buttons


@pytest.mark.parametrize("width", [375])
def test_task_page_fits_a_phone(browser, server, board, width) -> None:
    task = board.task("Phone")
    start(board, task, "ask")
    ctx = browser.new_context(base_url=server.url, viewport={"width": width, "height": 812})
    try:
        page = ctx.new_page()
        open_task(page, task)
        expect(overlay(page)).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
    finally:
        ctx.close()


def test_w1_with_auth_on_the_overlay_answers_with_the_session_cookie(
    browser, live_server_factory, sqlite_url
) -> None:
    """Auth on: the page and its POSTs carry the sign-in cookie (seed W1); signed out, the
    page sends the visitor to /login."""
    server = live_server_factory(sqlite_url, auth=True, clarification_progress_seconds=0.2)
    ctx = browser.new_context(base_url=server.url, viewport=DESKTOP)
    try:
        api = ctx.request  # shares the browser's cookie jar
        r = api.post(
            "/api/v1/auth/setup",
            data={"email": "admin@example.com", "password": "s3cret-password"},
        )
        assert r.status == 200, r.text()
        ws = api.post("/api/v1/workspaces", data={"name": "Secure"}).json()
        wf = api.post("/api/v1/workflows", data={"workspace_id": ws["id"], "name": "F"}).json()
        task = api.post(
            "/api/v1/tasks",
            data={"workspace_id": ws["id"], "workflow_id": wf["id"], "title": "Signed in"},
        ).json()
        profile = api.post(
            "/api/v1/agent-profiles",
            data={"name": "scripted", "command": [sys.executable, SCRIPTED_AGENT]},
        ).json()
        r = api.post(
            f"/api/v1/tasks/{task['id']}/sessions",
            data={"agent_profile_id": profile["id"], "prompt": "ask"},
        )
        assert r.status == 201, r.text()
        page = ctx.new_page()
        open_task(page, task)
        statuses: list[int] = []
        page.on(
            "response",
            lambda resp: statuses.append(resp.status) if RESPOND.match(resp.url) else None,
        )
        region = overlay(page)
        region.get_by_role("button", name="Skip all").click()
        expect(region).to_be_hidden()
        assert statuses == [200]
        signed_out = browser.new_context(base_url=server.url)
        try:
            other = signed_out.new_page()
            other.goto(f"/tasks/{task['id']}")
            expect(other).to_have_url(re.compile(r"/login\?next=%2Ftasks%2F"))
        finally:
            signed_out.close()
    finally:
        ctx.close()
