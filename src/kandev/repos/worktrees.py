"""Task worktrees: one git worktree per task, on its own branch, in the data dir.

The first session of a task on a repository creates `<data_dir>/worktrees/<task_id>` on a
new branch `kandev/<slug>-<6 hex>` from the task's base branch, copies the repository's
`copy_files` into it and runs its `setup_script` there (output recorded in the conversation;
a failure is reported, not fatal). Later sessions reuse it; a worktree that went missing is
recreated from its branch. Deleting the task removes the worktree, and the branch when it
holds nothing that is not in the base.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from kandev.agents.runtime import AgentFailed
from kandev.board import task_repository
from kandev.board.events import TASK_UPDATED, add_task_event, pending_events
from kandev.board.models import Task
from kandev.clock import Clock
from kandev.config import Settings
from kandev.db.engine import Database
from kandev.errors import KandevError
from kandev.repos import repository_sql
from kandev.repos.git import REVIEW_REF_PREFIX, GitRunner, same_path
from kandev.repos.models import Repository
from kandev.sessions.models import Session
from kandev.sessions.recorder import SessionRecorder

log = logging.getLogger(__name__)
SETUP_TIMEOUT_SECONDS = 600.0
SETUP_OUTPUT_LIMIT = 64 * 1024  # what the conversation keeps of a setup script's output (tail)
SETUP_MESSAGE_TYPE = "setup_script"
SETUP_STREAM_SECONDS = 0.5  # how often the running script's message shows new output
SLUG_LENGTH = 40


def branch_slug(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:SLUG_LENGTH].strip("-")
    return slug or "task"


def new_branch_name(title: str) -> str:
    return f"kandev/{branch_slug(title)}-{secrets.token_hex(3)}"


def _clear_directory(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)


async def _path_exists(path: str) -> bool:
    return await asyncio.to_thread(os.path.exists, path)


def _copy_into(repo: Path, worktree: Path, relative: str) -> str | None:
    """Copy one repository-relative file or directory; a reason when it was not copied."""
    source = (repo / relative).resolve()
    root = repo.resolve()
    if source != root and root not in source.parents:
        return f"{relative}: outside the repository"
    if not source.exists():
        return f"{relative}: not found"
    target = worktree / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
    else:
        shutil.copy2(source, target)
    return None


class WorktreeService:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        git: GitRunner,
        settings: Settings,
        recorder: SessionRecorder,
    ) -> None:
        self.db = db
        self.clock = clock
        self.git = git
        self.settings = settings
        self.recorder = recorder  # SessionRecorder: setup output goes into the conversation

    def worktree_dir(self, task_id: str) -> Path:
        return self.settings.data_dir / "worktrees" / task_id

    async def ensure_worktree(self, task: Task, session: Session) -> Path:
        """The task's worktree (created or recreated as needed): the agent's cwd.
        Raises AgentFailed with a readable reason."""
        try:
            created, path, repository = await self._ensure(task.id)
        except KandevError as exc:
            raise AgentFailed(f"the task's worktree could not be prepared: {exc.message}") from None
        if created:
            await self._prepare(repository, path, session)
        return path

    async def _ensure(self, task_id: str) -> tuple[bool, Path, Repository]:
        async with self.db.read() as conn:
            task = await task_repository.get_task(conn, task_id)
            repository = (
                await repository_sql.get_repository(conn, task.repository_id)
                if task is not None
                else None
            )
        if task is None:
            raise AgentFailed("the session's task no longer exists")
        if repository is None:
            raise AgentFailed("the task's repository is no longer registered")
        repo = repository.path
        async with self.git.lock(repo):
            async with self.db.read() as conn:  # fresh: another session may have made it
                current = await task_repository.get_task(conn, task_id)
            assert current is not None
            if current.worktree_path and await self._is_worktree(Path(current.worktree_path)):
                return False, Path(current.worktree_path), repository
            path = Path(current.worktree_path) if current.worktree_path else None
            path = path or self.worktree_dir(task_id)
            # A leftover directory that is no worktree (any more) makes way for the new one.
            await asyncio.to_thread(_clear_directory, path)
            await self.git.run(repo, "worktree", "prune")
            if current.branch and await self.git.branch_exists(repo, current.branch):
                # Recreated from its branch: what was committed there is all there is.
                await self.git.run(repo, "worktree", "add", "--", str(path), current.branch)
                return False, path, repository
            branch = current.branch or new_branch_name(current.title)
            base = current.base_branch or repository.default_branch
            await self.git.run(
                repo, "worktree", "add", "-b", branch, "--", str(path), f"refs/heads/{base}"
            )
            events = pending_events(self.recorder.bus)
            async with self.db.write() as conn:
                await repository_sql.set_task_worktree(
                    conn, task_id, branch=branch, worktree_path=str(path), now=self.clock.now()
                )
                updated = await task_repository.get_task(conn, task_id)
                assert updated is not None
                await add_task_event(
                    conn, events, TASK_UPDATED, updated, self.recorder.describer
                )  # branch, worktree
            events.publish()
            return True, path, repository

    async def _is_worktree(self, path: Path) -> bool:
        if not await asyncio.to_thread(path.is_dir):
            return False
        result = await self.git.run(path, "rev-parse", "--show-toplevel", check=False)
        return result.returncode == 0 and await asyncio.to_thread(same_path, result.text, path)

    async def _prepare(self, repository: Repository, path: Path, session: Session) -> None:
        notes: list[str] = []
        for relative in repository.copy_files:
            try:
                reason = await asyncio.to_thread(_copy_into, Path(repository.path), path, relative)
            except OSError as exc:
                reason = f"{relative}: {exc}"
            if reason:
                notes.append(f"copy_files: {reason}")
        if notes:
            await self._say(session, "\n".join(notes), {"status": "warning"})
        if repository.setup_script.strip():
            await self.run_setup_script(repository.setup_script, path, session)

    async def run_setup_script(self, script: str, cwd: Path, session: Session) -> None:
        """The user's setup script, run as a file (`sh FILE`) in the worktree. Its output
        (stdout and stderr together) streams into one system message, which ends saying
        whether the script succeeded. Never raises: a failing script is reported."""
        fd, script_path = tempfile.mkstemp(prefix="kandev-setup-", suffix=".sh")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(script)
            message = await self._say(session, "setup script running", {"status": "running"})
            status, output = await self._run_script(script_path, cwd, message)
        finally:
            os.unlink(script_path)
        ok = status == 0
        head = "setup script finished" if ok else f"setup script failed ({status_text(status)})"
        await self.recorder.update_message(
            message,
            content=f"{head}\n{output}".rstrip(),
            metadata={"status": "ok" if ok else "failed", "exit": status},
        )

    async def _run_script(
        self, script_path: str, cwd: Path, message: Any
    ) -> tuple[int | None, str]:
        proc = await asyncio.create_subprocess_exec(
            "sh",
            script_path,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        output = bytearray()
        loop = asyncio.get_running_loop()
        shown_at = loop.time()
        try:
            async with asyncio.timeout(SETUP_TIMEOUT_SECONDS):
                while chunk := await proc.stdout.read(4096):
                    output += chunk
                    if len(output) > SETUP_OUTPUT_LIMIT:  # keep the tail: errors come last
                        del output[: len(output) - SETUP_OUTPUT_LIMIT]
                    if loop.time() - shown_at >= SETUP_STREAM_SECONDS:
                        shown_at = loop.time()
                        message = await self.recorder.update_message(
                            message,
                            content="setup script running\n" + _decode(output),
                            metadata={"status": "running"},
                        )
                await proc.wait()
        except TimeoutError:
            _kill_group(proc)
            await proc.wait()
            return None, _decode(output)
        except BaseException:
            if proc.returncode is None:
                _kill_group(proc)
                await proc.wait()
            raise
        return proc.returncode, _decode(output)

    async def _say(self, session: Session, content: str, metadata: dict[str, Any]) -> Any:
        return await self.recorder.add_message(
            session,
            None,
            type=SETUP_MESSAGE_TYPE,
            content=content,
            metadata=metadata,
            author_type="system",
        )

    async def remove_for_task(self, task: Task) -> None:
        """After the task is deleted: its worktree goes, and its branch too when every commit
        on it is in the base. Failures are logged (the task is gone either way)."""
        if not task.repository_id or not (task.worktree_path or task.branch):
            return
        async with self.db.read() as conn:
            repository = await repository_sql.get_repository(conn, task.repository_id)
        if repository is None:
            return
        repo = repository.path
        try:
            async with self.git.lock(repo):
                if task.worktree_path and await _path_exists(task.worktree_path):
                    await self.git.run(
                        repo, "worktree", "remove", "--force", "--", task.worktree_path
                    )
                await self.git.run(repo, "worktree", "prune")
                await self._remove_review_refs(repo, task.id)
                if task.branch and await self.git.branch_exists(repo, task.branch):
                    base = task.base_branch or repository.default_branch
                    ahead = await self.git.run(
                        repo, "rev-list", "--count", f"refs/heads/{base}..refs/heads/{task.branch}"
                    )
                    if ahead.text == "0":
                        await self.git.run(repo, "branch", "-D", "--", task.branch)
        except KandevError:
            log.exception("cleaning up the worktree of task %s failed", task.id)

    async def _remove_review_refs(self, repo: str, task_id: str) -> None:
        """The refs that kept the task's review snapshots alive (ChangesService)."""
        listed = await self.git.run(
            repo, "for-each-ref", "--format=%(refname)", f"{REVIEW_REF_PREFIX}/{task_id}/"
        )
        for ref in listed.text.splitlines():
            await self.git.run(repo, "update-ref", "-d", ref)


def _decode(output: bytes | bytearray) -> str:
    return bytes(output).decode("utf-8", errors="replace")


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """The script and whatever it started (its own session, so its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def status_text(status: int | None) -> str:
    return "timed out" if status is None else f"exit {status}"
