"""A task's changes and its worktree creation, against bare git on the same repository.

A real git repository in a temp dir (local only): 600 committed text files on `main`, a task
worktree made through Kandev, and in it 500 changed files, ~2 MiB of diff: 150 modified and
committed on the task branch, 100 modified and staged, 148 modified and unstaged, 100 new
untracked text files, one staged rename and one untracked binary; `main` moves on by one
commit, so the merge base is not its head.

- `changes`: ChangesService.changes (in process) and GET /api/v1/tasks/{id}/changes (a real
  `kandev serve` on 127.0.0.1), against
  - bare `git diff`: `git diff --find-renames --no-ext-diff --no-color <merge-base>` in the
    worktree plus `git ls-files --others --exclude-standard` (the untracked listing); the
    issue's baseline (it diffs no untracked content);
  - the same git work run directly: what the service runs (merge-base, a copy of the
    index, `add -A` into it, one `diff -z --raw -p --cached`), as plain subprocesses.
- worktree creation: WorktreeService.ensure_worktree of a new task against bare
  `git worktree add -b <branch> -- <path> refs/heads/main`.

Runs alternate between Kandev and the bare command (after a warm-up); p50/p90 and ratios.
Also the CPU time of each (user + system, of this process and the git processes it ran:
`getrusage`), which a busy shared machine inflates far less than wall time.

    python bench/bench_changes.py [--runs 15] [--worktrees 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # runnable as `python bench/bench_changes.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.common import kandev_server, percentile, print_json_line
from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.config import Settings
from kandev.repos.changes import DiffOutput, parse_changes
from kandev.repos.inputs import RepositoryCreate
from kandev.services import Services, build_services
from kandev.sessions import session_repository
from kandev.sessions.inputs import SessionCreate

GIT_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
IDENTITY = ["-c", "user.email=bench@example.com", "-c", "user.name=Bench"]
BASE_FILES = 600
BASE_LINES = 50  # ~2 KB a file; rewriting every line makes a ~4 KB diff
NEW_LINES = 100  # an untracked file of ~4 KB, a ~4 KB diff
COMMITTED, STAGED, UNSTAGED, UNTRACKED = 150, 100, 148, 100  # + a rename + a binary = 500


def git(cwd: Path | str, *args: str, env: dict[str, str] | None = None) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(cwd), "-c", "core.quotepath=off", *args],
        check=True,
        capture_output=True,
        env=env or GIT_ENV,
    )
    return done.stdout


def text(file: int, lines: int, word: str) -> str:
    return "".join(f"{word} {i:04d} of file {file:04d}: {'x' * 12}\n" for i in range(lines))


def base_path(n: int) -> str:
    return f"pkg{n // 50:02d}/mod_{n:04d}.py"


def make_repo(repo: Path) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for n in range(BASE_FILES):
        target = repo / base_path(n)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text(n, BASE_LINES, "line"))
    git(repo, "add", "-A")
    git(repo, *IDENTITY, "commit", "-q", "-m", "initial")


def make_changes(repo: Path, worktree: Path) -> None:
    """500 changed files in the task worktree; `main` moves on by one commit."""
    n = 0
    for _ in range(COMMITTED):
        (worktree / base_path(n)).write_text(text(n, BASE_LINES, "edit"))
        n += 1
    git(worktree, "add", "-A")
    git(worktree, *IDENTITY, "commit", "-q", "-m", "task work")
    for _ in range(STAGED):
        (worktree / base_path(n)).write_text(text(n, BASE_LINES, "stage"))
        n += 1
    git(worktree, "mv", base_path(n), "pkg00/renamed.py")
    n += 1
    git(worktree, "add", "-A")
    for _ in range(UNSTAGED):
        (worktree / base_path(n)).write_text(text(n, BASE_LINES, "dirty"))
        n += 1
    for i in range(UNTRACKED):
        target = worktree / f"new/file_{i:04d}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text(10_000 + i, NEW_LINES, "fresh"))
    (worktree / "new/blob.bin").write_bytes(random.Random(7).randbytes(8192))
    (repo / "MAIN.md").write_text("main moved on\n")
    git(repo, "add", "-A")
    git(repo, *IDENTITY, "commit", "-q", "-m", "main moves on")


# --- the bare side ------------------------------------------------------------------------


def bare_diff(worktree: Path, merge_base: str) -> int:
    """The issue's baseline: one `git diff` of the tracked work, plus the untracked listing."""
    patch = git(worktree, "diff", "--find-renames", "--no-ext-diff", "--no-color", merge_base)
    untracked = git(worktree, "ls-files", "-z", "--others", "--exclude-standard")
    return len(patch) + len(untracked)


def bare_same_work(repo: Path, worktree: Path, branch: str) -> DiffOutput:
    """What ChangesService runs, as plain subprocesses (no parsing)."""
    merge_base = git(repo, "merge-base", "refs/heads/main", f"refs/heads/{branch}").decode().strip()
    gitdir = (worktree / ".git").read_text().removeprefix("gitdir:").strip()
    folder = tempfile.mkdtemp(prefix="bench-index-")
    try:
        copy = os.path.join(folder, "index")
        shutil.copy2(Path(gitdir) / "index", copy)
        env = {**GIT_ENV, "GIT_INDEX_FILE": copy}
        git(worktree, "add", "-A", env=env)
        options = ["-z", "--raw", "-p", "--find-renames", "--no-ext-diff", "--no-color"]
        output = git(worktree, "diff", *options, "--cached", merge_base, env=env)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return DiffOutput.split(output)


# --- Kandev -------------------------------------------------------------------------------


async def new_task(services: Services, ws_id: str, flow_id: str, repo_id: str, title: str):
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws_id, workflow_id=flow_id, title=title, repository_id=repo_id)
    )
    created = await services.sessions.create_session(task.id, SessionCreate())
    async with services.db.read() as conn:
        session = await session_repository.get_session(conn, created["id"])
    assert session is not None
    return task, session


def cpu_seconds() -> float:
    """User + system CPU of this process (all its threads) and of its finished children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def row(name: str, kandev: list[float], bare: list[float]) -> tuple[str, float, float]:
    k50, k90 = percentile(kandev, 50) * 1000, percentile(kandev, 90) * 1000
    b50, b90 = percentile(bare, 50) * 1000, percentile(bare, 90) * 1000
    print(
        f"{name:<44} {k50:8.1f} {k90:8.1f} {b50:8.1f} {b90:8.1f} "
        f"{k50 / b50:6.2f}x {k90 / b90:6.2f}x"
    )
    return name, k50, b50


async def in_process(home: Path, root: Path, runs: int, worktrees: int) -> dict:
    repo = root / "project"
    make_repo(repo)
    settings = Settings(data_dir=home, database_url="")
    services = build_services(settings)
    await services.prepare()
    try:
        ws = await services.workspaces.create_workspace(WorkspaceCreate(name="Bench"))
        flow = await services.workflows.create_workflow(
            WorkflowCreate(workspace_id=ws.id, name="Bench")
        )
        repository = await services.repositories.create_repository(
            ws.id, RepositoryCreate(path=str(repo))
        )
        task, session = await new_task(services, ws.id, flow.id, repository.id, "Bench changes")
        worktree = await services.worktrees.ensure_worktree(task, session)
        task = await services.tasks.get_task(task.id)
        make_changes(repo, worktree)

        answer = await services.changes.changes(task.id)  # warm-up (stores the totals)
        merge_base = answer["merge_base"]
        same = bare_same_work(repo, worktree, task.branch)
        bare_diff(worktree, merge_base)
        patch_bytes = sum(len(f["diff"].encode()) for f in answer["files"])
        statuses: dict[str, int] = {}
        for f in answer["files"]:
            kind = "binary" if f["binary"] else f["status"]
            statuses[kind] = statuses.get(kind, 0) + 1
        print(
            f"work: {len(answer['files'])} files {statuses}, diff {patch_bytes / 1024:.0f} KiB "
            f"in the answer (raw patch {len(same.patch) / 1024:.0f} KiB), "
            f"+{answer['additions']} -{answer['deletions']}, truncated={answer['truncated']}"
        )

        service_t, bare_t, same_t, parse_t = [], [], [], []
        service_cpu, bare_cpu = [], []
        for _ in range(runs):
            start, cpu = time.perf_counter(), cpu_seconds()
            await services.changes.changes(task.id)
            service_t.append(time.perf_counter() - start)
            service_cpu.append(cpu_seconds() - cpu)
            start, cpu = time.perf_counter(), cpu_seconds()
            bare_diff(worktree, merge_base)
            bare_t.append(time.perf_counter() - start)
            bare_cpu.append(cpu_seconds() - cpu)
            start = time.perf_counter()
            same = bare_same_work(repo, worktree, task.branch)
            same_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            parse_changes(same)
            parse_t.append(time.perf_counter() - start)

        kandev_wt, bare_wt = [], []
        for i in range(worktrees + 1):  # the first pair is a warm-up
            t, s = await new_task(services, ws.id, flow.id, repository.id, f"Worktree {i}")
            start = time.perf_counter()
            await services.worktrees.ensure_worktree(t, s)
            elapsed_k = time.perf_counter() - start
            start = time.perf_counter()
            git(repo, "worktree", "add", "-q", "-b", f"bare/{i}", "--", str(root / f"bare-{i}"))
            elapsed_b = time.perf_counter() - start
            if i:
                kandev_wt.append(elapsed_k)
                bare_wt.append(elapsed_b)
    finally:
        await services.close()
    return {
        "task_id": task.id,
        "worktree": worktree,
        "merge_base": merge_base,
        "repo": repo,
        "branch": task.branch,
        "service": service_t,
        "bare": bare_t,
        "same": same_t,
        "parse": parse_t,
        "service_cpu": service_cpu,
        "bare_cpu": bare_cpu,
        "kandev_wt": kandev_wt,
        "bare_wt": bare_wt,
    }


def over_rest(home: Path, got: dict, runs: int) -> tuple[list[float], list[float]]:
    rest_t, bare_t = [], []
    with kandev_server(home) as (url, _), httpx.Client(base_url=url, timeout=60) as client:
        path = f"/api/v1/tasks/{got['task_id']}/changes"
        assert len(client.get(path).raise_for_status().json()["files"]) == 500  # warm-up
        for _ in range(runs):
            start = time.perf_counter()
            client.get(path).raise_for_status()
            rest_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            bare_diff(got["worktree"], got["merge_base"])
            bare_t.append(time.perf_counter() - start)
    return rest_t, bare_t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--worktrees", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kandev-bench-changes-") as tmp:
        root = Path(tmp)
        home = root / "home"
        got = asyncio.run(in_process(home, root, args.runs, args.worktrees))
        rest_t, rest_bare_t = over_rest(home, got, args.runs)
    print()
    print(
        f"{'':<44} {'p50 ms':>8} {'p90 ms':>8} {'bare p50':>8} {'bare p90':>8} "
        f"{'p50':>7} {'p90':>7}"
    )
    row("changes (service) vs bare git diff", got["service"], got["bare"])
    row("changes (REST) vs bare git diff", rest_t, rest_bare_t)
    row("changes (service) vs same git work, direct", got["service"], got["same"])
    row("same git work, direct vs bare git diff", got["same"], got["bare"])
    row("changes (service) CPU vs bare git diff CPU", got["service_cpu"], got["bare_cpu"])
    p = [v * 1000 for v in got["parse"]]
    print(f"{'  of which parse_changes (pure Python)':<44} {percentile(p, 50):8.1f}")
    row("worktree creation vs bare git worktree add", got["kandev_wt"], got["bare_wt"])
    ms = lambda values: round(percentile(values, 50) * 1000, 2)  # noqa: E731
    print_json_line(
        "changes",
        service_p50_ms=ms(got["service"]),
        rest_p50_ms=ms(rest_t),
        bare_diff_p50_ms=ms(got["bare"]),
        rest_bare_diff_p50_ms=ms(rest_bare_t),
        same_work_p50_ms=ms(got["same"]),
        parse_p50_ms=ms(got["parse"]),
        service_ratio=round(ms(got["service"]) / ms(got["bare"]), 2),
        rest_ratio=round(ms(rest_t) / ms(rest_bare_t), 2),
        worktree_p50_ms=ms(got["kandev_wt"]),
        bare_worktree_p50_ms=ms(got["bare_wt"]),
        worktree_ratio=round(ms(got["kandev_wt"]) / ms(got["bare_wt"]), 2),
        service_cpu_p50_ms=ms(got["service_cpu"]),
        bare_diff_cpu_p50_ms=ms(got["bare_cpu"]),
        service_cpu_ratio=round(ms(got["service_cpu"]) / ms(got["bare_cpu"]), 2),
    )


if __name__ == "__main__":
    main()
