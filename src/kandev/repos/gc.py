"""Worktree garbage collection: `kandev gc` and the server's periodic sweep.

Under `<data_dir>/worktrees/` every directory is named after its task. One whose task no
longer exists is removed: a git worktree with `git worktree remove --force` in its own
repository (found from the worktree itself, so a repository deleted from Kandev is no
obstacle), and its local branch too when every commit on it is on another branch; a
directory git does not know (any more) is deleted outright. Directories of existing tasks
are never touched, archived ones included. Each removal holds its repository's git lock and
checks again, under it, that the task is still gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kandev.config import Settings
from kandev.db.engine import Database
from kandev.errors import KandevError
from kandev.repos import repository_sql
from kandev.repos.git import GitRunner, same_path

log = logging.getLogger(__name__)
TASK_BRANCH_PREFIX = "kandev/"


def human_bytes(size: int) -> str:
    """1536 → '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def disk_usage(path: Path) -> int:
    """Bytes under a directory (files and links themselves; links are not followed)."""
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


@dataclass(frozen=True)
class Removal:
    path: str
    task_id: str
    kind: str  # "worktree" (git knew it) or "directory" (git did not)
    bytes: int
    repository: str | None = None
    branch: str | None = None
    branch_deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "task_id": self.task_id,
            "kind": self.kind,
            "bytes": self.bytes,
            "repository": self.repository,
            "branch": self.branch,
            "branch_deleted": self.branch_deleted,
        }


@dataclass
class GcReport:
    dry_run: bool
    removed: list[Removal] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.removed)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": [r.to_json() for r in self.removed],
            "bytes": self.bytes,
            "reclaimed": human_bytes(self.bytes),
            "errors": self.errors,
        }


class WorktreeCollector:
    def __init__(self, db: Database, git: GitRunner, settings: Settings) -> None:
        self.db = db
        self.git = git  # the server's runner: its per-repository locks serialize with sessions
        self.settings = settings
        self.swept = asyncio.Event()  # set after each periodic sweep (tests wait on it)
        self.sweeping = False  # the periodic sweep is running

    @property
    def root(self) -> Path:
        return self.settings.data_dir / "worktrees"

    async def _task_exists(self, task_id: str) -> bool:
        async with self.db.read() as conn:
            return await repository_sql.task_exists(conn, task_id)

    async def collect(self, *, dry_run: bool = False) -> GcReport:
        """Remove (or, with dry_run, only list) what deleted tasks left behind."""
        report = GcReport(dry_run=dry_run)
        async with self.db.read() as conn:
            known = await repository_sql.task_ids(conn)
            registered = await repository_sql.repository_paths(conn)
        entries = await asyncio.to_thread(_directories, self.root)
        for entry in entries:
            if entry.name in known:
                continue
            try:
                removal = await self._collect_one(entry, dry_run)
            except (KandevError, OSError) as exc:
                report.errors.append(f"{entry}: {getattr(exc, 'message', exc)}")
                continue
            if removal is not None:
                report.removed.append(removal)
        if not dry_run:  # stale admin entries of worktrees deleted by hand
            for path in sorted(registered):
                if await asyncio.to_thread(os.path.isdir, path):
                    async with self.git.lock(path):
                        await self.git.run(path, "worktree", "prune", check=False)
        return report

    async def _owning_repository(self, entry: Path) -> str | None:
        """The main checkout of a worktree git still knows, or None."""
        if not await asyncio.to_thread((entry / ".git").is_file):
            return None
        top = await self.git.run(entry, "rev-parse", "--show-toplevel", check=False)
        if top.returncode != 0 or not await asyncio.to_thread(same_path, top.text, entry):
            return None
        common = await self.git.run(
            entry, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False
        )
        if common.returncode != 0 or not common.text:
            return None
        common_dir = Path(common.text)
        repo = common_dir.parent if common_dir.name == ".git" else common_dir  # bare: itself
        listed = await self.git.run(repo, "worktree", "list", "--porcelain", "-z", check=False)
        prefix = "worktree "
        paths = [t[len(prefix) :] for t in listed.text.split("\0") if t.startswith(prefix)]
        known = [p for p in paths if await asyncio.to_thread(same_path, p, entry)]
        return str(repo) if known else None

    async def _collect_one(self, entry: Path, dry_run: bool) -> Removal | None:
        repo = await self._owning_repository(entry)
        if repo is None:
            size = await asyncio.to_thread(disk_usage, entry)
            if await self._task_exists(entry.name):
                return None  # made for a task created since the listing
            if not dry_run:
                await asyncio.to_thread(shutil.rmtree, entry)
            return Removal(str(entry), entry.name, "directory", size)
        async with self.git.lock(repo):
            if await self._task_exists(entry.name):
                return None
            head = await self.git.run(entry, "symbolic-ref", "--short", "-q", "HEAD", check=False)
            branch = head.text if head.returncode == 0 and head.text else None
            size = await asyncio.to_thread(disk_usage, entry)
            deletable = branch is not None and await self._branch_is_spare(repo, branch)
            if not dry_run:
                await self.git.run(repo, "worktree", "remove", "--force", "--", str(entry))
                await self.git.run(repo, "worktree", "prune")
                if deletable and branch is not None:
                    await self.git.run(repo, "branch", "-D", "--", branch)
        return Removal(str(entry), entry.name, "worktree", size, repo, branch, deletable)

    async def _branch_is_spare(self, repo: str, branch: str) -> bool:
        """A task branch no task names, with every commit on some other local branch."""
        if not branch.startswith(TASK_BRANCH_PREFIX):
            return False  # not one Kandev made: the user's
        async with self.db.read() as conn:
            if await repository_sql.branch_in_use(conn, branch):
                return False
        unmerged = await self.git.run(
            repo,
            "rev-list",
            "--count",
            f"refs/heads/{branch}",
            "--not",
            f"--exclude={branch}",  # --branches patterns leave out refs/heads/
            "--branches",
            check=False,
        )
        return unmerged.returncode == 0 and unmerged.text == "0"

    async def sweep_forever(self, interval: float) -> None:
        """The server's periodic sweep: `collect()` every `interval` seconds until cancelled
        (the server's shutdown cancels it). A failing sweep is logged; the next one runs."""
        self.sweeping = True
        try:
            while True:
                await asyncio.sleep(interval)
                try:
                    report = await self.collect()
                except Exception:
                    log.exception("the worktree sweep failed")
                else:
                    if report.removed:
                        log.info(
                            "worktree sweep removed %d worktree(s), %s reclaimed",
                            len(report.removed),
                            human_bytes(report.bytes),
                        )
                self.swept.set()
        finally:
            self.sweeping = False


def _directories(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
