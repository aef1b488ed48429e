"""Browser fixtures: Debian's Chromium driven by Playwright (never a downloaded browser),
against a real uvicorn on 127.0.0.1. Browser tests are plain (sync) functions: Playwright's
sync API runs its own loop, and the server runs in its own thread."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import missing

CHROMIUM = os.environ.get("KANDEV_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCRIPTED_AGENT = str(Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py")
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 375, "height": 812}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "img"
# The figures in docs/img are rewritten only on request (KANDEV_UPDATE_SCREENSHOTS=1), so a
# plain `make test` leaves the tree clean; otherwise they go to the test's tmp_path.
UPDATE_SCREENSHOTS = os.environ.get("KANDEV_UPDATE_SCREENSHOTS") == "1"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def pytest_collection_modifyitems(config, items) -> None:
    """Browser tests run last (a stable sort keeps every other order): Playwright's sync API
    keeps its event loop running while `browser` lives (a module), and an async test in that
    module after a browser test could not start its own loop ("Cannot run the event loop
    while another loop is running").
    """
    items.sort(key=lambda item: "browser" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    # Module-scoped, not session-scoped: Playwright's loop stops when a browser module's last
    # test is done, so under `pytest -n` (where a worker runs modules in any order) the async
    # tests a worker runs next can start their own loops. A launch costs well under a second.
    if not Path(CHROMIUM).is_file():
        missing(f"Chromium ({CHROMIUM})")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright for Python")
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)  # real agent processes on 2 shared cores
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def server(live_server_factory, sqlite_url):
    """A live Kandev (auth off, SQLite) on a free loopback port."""
    return live_server_factory(sqlite_url, clarification_progress_seconds=0.2)


@pytest.fixture
def rest(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def context(browser, server) -> Iterator:
    ctx = browser.new_context(base_url=server.url, viewport=DESKTOP)
    ctx.set_default_timeout(15_000)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    return context.new_page()


@pytest.fixture
def screenshot(tmp_path) -> Callable[..., Path]:
    """`screenshot(page, "board.png", full_page=False)`: taken on every run, written to
    docs/img only with KANDEV_UPDATE_SCREENSHOTS=1, and checked to be a non-empty PNG."""

    def take(page, name: str, **options) -> Path:
        folder = SCREENSHOTS if UPDATE_SCREENSHOTS else tmp_path / "screenshots"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        page.screenshot(path=str(path), **options)
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > len(PNG_SIGNATURE), path
        return path

    return take


class Board:
    """A workspace with the default workflow, made over REST."""

    def __init__(self, rest: httpx.Client, name: str = "Acme") -> None:
        self.rest = rest
        self.workspace = created(rest.post("/api/v1/workspaces", json={"name": name}))
        self.workflow = created(
            rest.post(
                "/api/v1/workflows",
                json={"workspace_id": self.workspace["id"], "name": "Development"},
            )
        )
        self.steps = {s["name"]: s for s in self.workflow["steps"]}

    def task(self, title: str, step: str | None = None, **extra) -> dict:
        body = {
            "workspace_id": self.workspace["id"],
            "workflow_id": self.workflow["id"],
            "title": title,
            **extra,
        }
        if step:
            body["workflow_step_id"] = self.steps[step]["id"]
        return created(self.rest.post("/api/v1/tasks", json=body))

    def profile(self, name: str = "scripted") -> dict:
        profiles = self.rest.get("/api/v1/agent-profiles").json()["agent_profiles"]
        for p in profiles:
            if p["name"] == name:
                return p
        return created(
            self.rest.post(
                "/api/v1/agent-profiles",
                json={"name": name, "command": [sys.executable, SCRIPTED_AGENT]},
            )
        )

    @property
    def url(self) -> str:
        return f"/?workspace={self.workspace['id']}&workflow={self.workflow['id']}"


def created(response: httpx.Response) -> dict:
    assert response.status_code in (200, 201), response.text
    return response.json()


@pytest.fixture
def board(rest) -> Board:
    return Board(rest)


async def board_on_repository(client: httpx.AsyncClient, repo: Path) -> dict[str, str]:
    """A workspace, a workflow and `repo` registered in it, over REST: the ids a task on the
    repository is created with."""
    ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
    wf = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    ).json()
    r = await client.post(f"/api/v1/workspaces/{ws['id']}/repositories", json={"path": str(repo)})
    assert r.status_code == 201, r.text
    return {"workspace_id": ws["id"], "workflow_id": wf["id"], "repository_id": r.json()["id"]}


# One script run reads every chip and the theme's attention colour (`--warn`), so the
# colours compared come from one and the same rendering.
_COLOURS_JS = """sels => {
    const probe = document.createElement("span");
    probe.style.color = "var(--warn)";
    document.body.append(probe);
    const warn = getComputedStyle(probe).color;
    probe.remove();
    const chips = sels.map((sel) => {
        const style = getComputedStyle(document.querySelector(sel));
        return [style.backgroundColor, style.color, style.boxShadow];
    });
    return { warn, chips };
}"""


def chip_colours(page, *selectors: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(the attention colour, [(background, text colour, ring) of each selector's element])."""
    found = page.evaluate(_COLOURS_JS, list(selectors))
    return found["warn"], [tuple(chip) for chip in found["chips"]]
