"""The web UI in a real browser (Debian's Chromium through Playwright), against `kandev serve`.

- Board time to interactive with N tasks (default 1,000): from navigation start to the board
  script having wired drag and drop and the event stream (`body[data-ready]`), plus
  DOMContentLoaded and the HTML response time; against the same board's JSON over REST
  (GET /api/v1/tasks?workflow_id=…), the bare cost of the data.
- SSE-to-DOM latency of a card move: the page itself POSTs a move with a plain fetch (board.js
  does not see it); a MutationObserver notes when the card lands in the new column (placed
  from the event's task JSON) and when its fresh server-rendered fragment is swapped in; also
  from the event reaching the page's handler to that fresh card. Against the bare REST move
  round trip from the same page.

    python -m bench.bench_web [--tasks 1000] [--loads 5] [--moves 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import kandev_server, percentile, print_json_line

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

MOVE_AND_WAIT = """
async ([taskId, workflowId, stepId]) => {
  if (window.__kandevEventAt) delete window.__kandevEventAt[taskId];
  const original = document.getElementById(`task-${taskId}`);
  const t0 = performance.now();
  let placedAt = null;
  const fresh = new Promise((resolve) => {
    const check = () => {
      const card = document.getElementById(`task-${taskId}`);
      if (!card || card.parentElement.dataset.stepId !== stepId) return;
      placedAt ??= performance.now();
      if (card !== original) resolve(performance.now()); // the fragment was swapped in
    };
    const observer = new MutationObserver(check);
    observer.observe(document.getElementById("board"), { childList: true, subtree: true });
    setTimeout(() => observer.disconnect(), 30000);
  });
  const res = await fetch(`/api/v1/tasks/${taskId}/move`, {
    method: "POST", credentials: "include", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ workflow_id: workflowId, workflow_step_id: stepId }),
  });
  const t1 = performance.now();
  if (!res.ok) throw new Error(`move failed: ${res.status}`);
  const t2 = await fresh;
  const eventAt = window.__kandevEventAt[taskId];
  return { rest: t1 - t0, placed: placedAt - t0, fresh: t2 - t0,
           event: eventAt - t0, event_to_fresh: t2 - eventAt };
}
"""


def make_board(url: str, tasks: int) -> tuple[dict, dict, list[dict]]:
    with httpx.Client(base_url=url, timeout=60) as c:
        ws = c.post("/api/v1/workspaces", json={"name": "Bench"}).json()
        wf = c.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "Bench"}).json()
        steps = wf["steps"]
        made = []
        for i in range(tasks):
            r = c.post(
                "/api/v1/tasks",
                json={
                    "workspace_id": ws["id"],
                    "workflow_id": wf["id"],
                    "workflow_step_id": steps[i % len(steps)]["id"],
                    "title": f"Task {i:04d}: tidy the module and add tests",
                    "description": "A short description so cards have two lines of text.",
                },
            )
            r.raise_for_status()
            made.append(r.json())
    return ws, wf, made


def ms(values: list[float]) -> str:
    return (
        f"p50 {percentile(values, 50):8.1f} ms  p95 {percentile(values, 95):8.1f} ms  "
        f"mean {statistics.fmean(values):8.1f} ms  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--moves", type=int, default=30)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, kandev_server(Path(tmp) / "home") as (url, _):
        started = time.perf_counter()
        ws, wf, tasks = make_board(url, args.tasks)
        print(
            f"board: {args.tasks} tasks in {len(wf['steps'])} columns "
            f"(made in {time.perf_counter() - started:.1f} s)"
        )
        board_url = f"{url}/?workspace={ws['id']}&workflow={wf['id']}"
        rest_times = []
        with httpx.Client(base_url=url, timeout=60) as c:
            for _ in range(args.loads):
                t0 = time.perf_counter()
                c.get("/api/v1/tasks", params={"workflow_id": wf["id"]}).raise_for_status()
                rest_times.append((time.perf_counter() - t0) * 1000)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(board_url)  # warm-up (caches the static files, as a returning user)
            tti, dcl, html = [], [], []
            for _ in range(args.loads):
                page.goto(board_url)
                page.wait_for_selector("body[data-ready='1']", state="attached")
                nav = page.evaluate(
                    "(() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return {dcl: n.domContentLoadedEventEnd, html: n.responseEnd,"
                    " ready: window.__kandevReadyAt}; })()"
                )
                tti.append(nav["ready"])
                dcl.append(nav["dcl"])
                html.append(nav["html"])
            cards = page.locator(".card").count()
            assert cards == args.tasks, cards
            page.wait_for_selector("#live-status[data-state='live']")
            placed, fresh, handler, events, rest = [], [], [], [], []
            steps = [s["id"] for s in wf["steps"]]
            for i in range(args.moves):
                task = tasks[i]
                target = steps[(steps.index(task["workflow_step_id"]) + 1 + i) % len(steps)]
                if target == task["workflow_step_id"]:
                    target = steps[(steps.index(target) + 1) % len(steps)]
                result = page.evaluate(MOVE_AND_WAIT, [task["id"], wf["id"], target])
                task["workflow_step_id"] = target
                placed.append(result["placed"])
                fresh.append(result["fresh"])
                events.append(result["event"])
                handler.append(result["event_to_fresh"])
                rest.append(result["rest"])
            browser.close()
        print(f"board JSON over REST (bare data)      {ms(rest_times)}")
        print(f"board HTML received                   {ms(html)}")
        print(f"board DOMContentLoaded                {ms(dcl)}")
        print(f"board time to interactive             {ms(tti)}")
        tti_ratio = percentile(tti, 50) / percentile(rest_times, 50)
        print(f"  ratio TTI / REST JSON (p50)          {tti_ratio:8.1f}x")
        print(f"card move: REST round trip from page  {ms(rest)}")
        print(f"card move: POST → event in the page   {ms(events)}")
        print(f"card move: POST → card in new column  {ms(placed)}")
        print(f"card move: POST → fresh card rendered {ms(fresh)}")
        print(f"card move: event → fresh card (DOM)   {ms(handler)}")
        move_ratio = percentile(fresh, 50) / percentile(rest, 50)
        print(f"  ratio fresh card / REST move (p50)   {move_ratio:8.1f}x")
        print_json_line(
            "web",
            tasks=args.tasks,
            tti_p50_ms=round(percentile(tti, 50), 1),
            dcl_p50_ms=round(percentile(dcl, 50), 1),
            rest_json_p50_ms=round(percentile(rest_times, 50), 1),
            move_to_event_p50_ms=round(percentile(events, 50), 1),
            move_to_placed_p50_ms=round(percentile(placed, 50), 1),
            move_to_fresh_p50_ms=round(percentile(fresh, 50), 1),
            move_to_fresh_p95_ms=round(percentile(fresh, 95), 1),
            event_to_fresh_p50_ms=round(percentile(handler, 50), 1),
            rest_move_p50_ms=round(percentile(rest, 50), 1),
        )


if __name__ == "__main__":
    main()
