"""Permission requests in the browser (issue 11, CONTRACT §11): a real scripted ACP agent
asks `session/request_permission`; the request is a card in the task page's conversation and
an item in /inbox, with the tool call shown so a person can judge it and its options as
buttons; a click decides it and the agent continues with the chosen option."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from tests.web.conftest import DESKTOP
from tests.web.test_task_browser import messages, open_task, start

# A command with characters HTML must escape: it is shown as typed, never as markup.
COMMAND = "make test > out.txt && echo '<b>done</b>'"


def wait_for_request(rest, session_id: str) -> dict:
    """The session's permission_request message, once it is recorded."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for m in messages(rest, session_id):
            if m["type"] == "permission_request":
                return m
        time.sleep(0.1)  # noqa: sleep-ok (polls a condition, with a deadline)
    raise AssertionError("the agent never asked permission")


def agent_reply(page):
    return page.locator('#conversation .msg-agent[data-type="message"] .md').last


def test_task_page_card_is_decided_by_a_click_and_the_agent_continues(
    page, board, rest, screenshot
) -> None:
    task = board.task("Run the tests")
    session = start(board, task, f"permission execute {COMMAND}")
    open_task(page, task)
    card = page.locator('#conversation [data-type="permission_request"]')
    expect(card).to_have_attribute("data-status", "pending")
    expect(card.locator("[data-tool-title]")).to_have_text("Edit a file")
    expect(card.locator("[data-tool-kind]")).to_have_text("execute")
    expect(card.locator("[data-command]")).to_have_text(COMMAND)
    expect(card.locator("b")).to_have_count(0)  # escaped, not rendered
    buttons = card.get_by_role("button")
    expect(buttons).to_have_text(["Reject", "Allow"])
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")
    expect(page.locator("#task-badge")).to_have_text("needs input")
    screenshot(page, "task-permission.png")

    card.get_by_role("button", name="Allow").click()
    expect(card.locator("[data-decision]")).to_have_text("Allowed: Allow")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(agent_reply(page)).to_have_text("permission: yes")  # what the agent got
    expect(card).to_have_attribute("data-status", "allowed")  # the server's card, live
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "0")
    row = wait_for_request(rest, session["id"])
    assert row["metadata"]["status"] == "allowed"
    assert row["metadata"]["decision"]["option_id"] == "yes"
    assert row["metadata"]["decision"]["via"] == "rest"


def test_a_decision_made_elsewhere_updates_the_card_live(page, board, rest) -> None:
    task = board.task("Decided over REST")
    session = start(board, task, "permission execute ls -la")
    open_task(page, task)
    card = page.locator('#conversation [data-type="permission_request"]')
    expect(card.get_by_role("button", name="Reject")).to_be_visible()
    pending_id = wait_for_request(rest, session["id"])["metadata"]["pending_id"]
    r = rest.post(f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "no"})
    assert r.status_code == 200 and r.json()["claimed"] is True, r.text
    expect(card.locator("[data-decision]")).to_have_text("Rejected: Reject")
    expect(card).to_have_attribute("data-status", "rejected")
    expect(agent_reply(page)).to_have_text("permission: no")


def test_an_expired_request_renders_as_expired(page, board, rest) -> None:
    task = board.task("Stopped")
    session = start(board, task, "permission execute ls")
    open_task(page, task)
    card = page.locator('#conversation [data-type="permission_request"]')
    expect(card.get_by_role("button", name="Allow")).to_be_visible()
    r = rest.post(f"/api/v1/sessions/{session['id']}/stop", json={})
    assert r.status_code == 200, r.text
    expect(card.locator("[data-decision]")).to_have_text("Expired")
    expect(card.get_by_role("button")).to_have_count(0)


def test_inbox_lists_the_request_and_a_click_decides_it(page, board, rest, screenshot) -> None:
    task = board.task("Deploy the docs")
    session = start(board, task, "permission execute ./deploy.sh --prod")
    wait_for_request(rest, session["id"])
    page.goto("/inbox")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    item = page.locator('.inbox-item[data-kind="permission"]')
    expect(item).to_have_count(1)
    expect(item.locator(".task-link")).to_have_text("Deploy the docs")
    expect(item.locator("[data-workspace]")).to_have_text("Acme")
    expect(item.locator("[data-command]")).to_have_text("./deploy.sh --prod")
    expect(item.locator("[data-tool-kind]")).to_have_text("execute")
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")
    expect(page.locator("#inbox-total")).to_have_text("1")
    screenshot(page, "inbox-permission.png")

    item.get_by_role("button", name="Reject").click()
    expect(item).to_have_count(0)
    expect(page.locator("#inbox-empty")).to_be_visible()
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "0")
    open_task(page, task)
    expect(agent_reply(page)).to_have_text("permission: no")
    card = page.locator('#conversation [data-type="permission_request"]')
    expect(card.locator("[data-decision]")).to_have_text("Rejected: Reject")
    # The click posted to POST /api/v1/permissions/{id}/respond: recorded as "rest" (the
    # no-JavaScript form records "web").
    assert wait_for_request(rest, session["id"])["metadata"]["decision"]["via"] == "rest"


def test_inbox_orders_permissions_beside_questions_and_a_late_click_is_told_the_winner(
    page, board, rest
) -> None:
    first = board.task("Asks permission")
    asked = start(board, first, "permission execute ls")
    pending_id = wait_for_request(rest, asked["id"])["metadata"]["pending_id"]
    second = board.task("Asks a question")
    start(board, second, "ask")
    page.goto("/inbox")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    items = page.locator("#inbox-list > .inbox-item")
    expect(items).to_have_count(2)
    assert [items.nth(i).get_attribute("data-kind") for i in range(2)] == [
        "permission",
        "question",
    ]  # oldest first, whatever the kind
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "2")
    # Someone decides over REST while the page is open: the item leaves live.
    r = rest.post(f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"})
    assert r.status_code == 200, r.text
    expect(page.locator('.inbox-item[data-kind="permission"]')).to_have_count(0)
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")


def test_without_javascript_the_card_is_a_form_on_both_pages(browser, server, board, rest) -> None:
    task = board.task("No JS permission")
    session = start(board, task, "permission execute ls -la")
    wait_for_request(rest, session["id"])
    ctx = browser.new_context(base_url=server.url, java_script_enabled=False, viewport=DESKTOP)
    try:
        page = ctx.new_page()
        page.goto("/inbox")
        item = page.locator('.inbox-item[data-kind="permission"]')
        expect(item.locator("[data-command]")).to_have_text("ls -la")
        item.get_by_role("button", name="Allow").click()
        expect(page).to_have_url(server.url + "/inbox")
        expect(page.locator('.inbox-item[data-kind="permission"]')).to_have_count(0)
        row = wait_for_request(rest, session["id"])
        assert row["metadata"]["status"] == "allowed"
        assert row["metadata"]["decision"]["via"] == "web"

        second = start(board, task, "permission execute pwd")
        wait_for_request(rest, second["id"])
        page.goto(f"/tasks/{task['id']}?session={second['id']}")
        card = page.locator('#conversation [data-type="permission_request"]')
        card.get_by_role("button", name="Reject").click()
        expect(page).to_have_url(f"{server.url}/tasks/{task['id']}?session={second['id']}")
        expect(card.locator("[data-decision]")).to_have_text("Rejected: Reject")
    finally:
        ctx.close()
