"""What a task changed, and what to do with it: changes, review, commit, merge, overlaps.

Changes are everything on the task branch and in its worktree (committed, staged, unstaged,
untracked) against the merge base with the base branch. They are read through a throwaway
index (a copy of the worktree's, `git add -A` into it via GIT_INDEX_FILE), so the real index
is never touched. Git work on one repository is serialized (GitRunner.lock).

"Since my last review" diffs the worktree against a snapshot of it: when a person marks a
file reviewed or sends review comments, the throwaway index's tree (`write-tree`) becomes a
commit (`commit-tree`, no parent) kept alive by `refs/kandev/reviews/<task>/<reviewer>`, and
its id is stored per task and reviewer (task_review_snapshots).

Merges are computed with `git merge-tree --write-tree` (no checkout touched) and land with
`update-ref`, or, when the repository's own checkout has the base branch checked out, with
`git merge --ff-only` to the new commit so that working tree ends as `git merge` leaves it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kandev.auth.identity import current_identity
from kandev.board import task_repository
from kandev.board.events import TASK_UPDATED, TaskDescriber, add_task_event, pending_events
from kandev.board.models import Task
from kandev.catalog.events import SESSION_TURN_COMPLETED, TASK_CHANGES_UPDATED, TASK_CREATED
from kandev.db.engine import Database
from kandev.errors import Conflict, KandevError, ValidationFailed
from kandev.events.bus import EventBus
from kandev.events.publisher import task_owner_id
from kandev.repos import repository_sql
from kandev.repos.git import REVIEW_REF_PREFIX, GitFailed, GitRunner
from kandev.repos.inputs import CommitCreate, MergeCreate, ReviewCreate
from kandev.repos.models import Repository
from kandev.repos.service import RepositoryService
from kandev.sessions import session_repository
from kandev.sessions.service import SessionService

log = logging.getLogger(__name__)
# How many tasks' "on a repository?" the turn follower remembers.
_KNOWN_TASKS_MAX = 10_000
FILE_DIFF_CAP = 256 * 1024
TOTAL_DIFF_CAP = 2 * 1024 * 1024
MAX_FILES = 500
SINCE_LAST_REVIEW = "last_review"  # GET …/changes?since=last_review
# Snapshot commits are Kandev's own bookkeeping objects, never on a branch: a fixed identity.
SNAPSHOT_IDENTITY = ["-c", "user.name=Kandev", "-c", "user.email=kandev@localhost"]
STATUS_BY_LETTER = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "modified",
    "U": "unmerged",
}


class MergeConflict(Conflict):
    def __init__(self, conflicts: list[str]) -> None:
        super().__init__(f"the merge has conflicts in {len(conflicts)} file(s)")
        self.conflicts = conflicts


@dataclass(frozen=True)
class DiffOutput:
    """One `git diff -z --raw [-p]`: the raw entries (NUL-separated) and the patch."""

    raw: bytes
    patch: bytes = b""

    @classmethod
    def split(cls, output: bytes) -> DiffOutput:
        """`--raw -p -z` output: raw entries, an empty NUL-terminated line, the patch (paths
        are never empty, so the first NUL NUL is that line)."""
        end = output.find(b"\0\0")
        if end < 0:
            return cls(output)
        return cls(output[: end + 1], output[end + 2 :])


def _tokens(raw: bytes) -> list[str]:
    return [t.decode("utf-8", errors="replace") for t in raw.split(b"\0")]


def _split_patch(patch: bytes) -> list[bytes]:
    if not patch:
        return []
    chunks = (b"\n" + patch).split(b"\ndiff --git ")
    # Each file's text ends with its newline, wherever the file is in the patch (a file's
    # fingerprint must not change when another file sorts after it).
    return [b"diff --git " + c + b"\n" for c in chunks[1:-1]] + [b"diff --git " + chunks[-1]]


def raw_entries(raw: bytes) -> list[tuple[str, str, str | None]]:
    """(status letter, path, old path) per `--raw -z` entry: `:modes oids STATUS\0path\0`,
    two paths for a rename or a copy."""
    tokens = _tokens(raw)
    entries: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith(":"):
        letter = tokens[i].rsplit(" ", 1)[-1][:1]
        if letter in "RC":
            entries.append((letter, tokens[i + 2], tokens[i + 1]))
            i += 3
        else:
            entries.append((letter, tokens[i + 1], None))
            i += 2
    return entries


def patch_counts(chunk: bytes) -> tuple[int, int, bool]:
    """(additions, deletions, binary) of one file's patch: its `+`/`-` lines after the first
    hunk header (the `---`/`+++` headers come before it); no hunk and a "Binary files" line:
    binary (what `--numstat` counts, without a second diff pass)."""
    hunks = chunk.find(b"\n@@")
    if hunks < 0:
        return 0, 0, b"\nBinary files " in chunk or b"\nGIT binary patch" in chunk
    return chunk.count(b"\n+", hunks), chunk.count(b"\n-", hunks), False


def _cut(chunk: bytes, cap: int) -> bytes:
    cut = chunk[:cap]
    newline = cut.rfind(b"\n")
    return cut[: newline + 1] if newline > 0 else cut


def parse_changes(output: DiffOutput) -> dict[str, Any]:
    """The `files` of a changes answer, capped (pure; runs in a worker thread). One pass:
    the raw entries give status and paths, the patch (in the same order) each file's diff,
    and its `+`/`-` lines the counts."""
    entries = raw_entries(output.raw)
    patches = _split_patch(output.patch)
    files: list[dict[str, Any]] = []
    total = 0
    truncated = len(entries) > MAX_FILES
    index = 0  # into patches: an unmerged entry has no `diff --git` of its own
    for letter, path, old_path in entries[:MAX_FILES]:
        chunk = b""
        if letter != "U":
            chunk = patches[index] if index < len(patches) else b""
            index += 1
        added, deleted, binary = patch_counts(chunk)
        file_truncated = False
        if len(chunk) > FILE_DIFF_CAP:
            chunk, file_truncated = _cut(chunk, FILE_DIFF_CAP), True
        if total + len(chunk) > TOTAL_DIFF_CAP:
            chunk, file_truncated = b"", True
        total += len(chunk)
        truncated = truncated or file_truncated
        files.append(
            {
                "path": path,
                "old_path": old_path,
                "status": STATUS_BY_LETTER.get(letter, "modified"),
                "additions": added,
                "deletions": deleted,
                "binary": binary,
                "truncated": file_truncated,
                "diff": chunk.decode("utf-8", errors="replace"),
            }
        )
    return {
        "files": files,
        "additions": sum(f["additions"] for f in files),
        "deletions": sum(f["deletions"] for f in files),
        "truncated": truncated,
    }


def _index_file(worktree: Path) -> Path | None:
    """The index of a worktree without asking git: `.git/index` in a main checkout, or in
    a linked worktree the `index` of the folder its `.git` file names (`gitdir: …`). None
    when `.git` is neither (git is asked then)."""
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return dot_git / "index"
    try:
        line = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    folder = Path(line.removeprefix("gitdir:").strip())
    return (folder if folder.is_absolute() else worktree / folder) / "index"


def _copy_index(worktree: Path, index_path: Path | None) -> str | None:
    """A throwaway copy of the worktree's index (`index_path`, or the one `.git` names; None
    when it names none): the copy's path, in a fresh temp folder."""
    index_path = index_path or _index_file(worktree)
    if index_path is None:
        return None
    folder = tempfile.mkdtemp(prefix="kandev-index-")
    copy = os.path.join(folder, "index")
    if index_path.exists():
        # copy2 keeps the index's mtime, so git's racy-entry check sees a file edited (same
        # size) in the second the index was written as changed.
        shutil.copy2(index_path, copy)
    return copy


def file_fingerprint(changed: dict[str, Any]) -> str:
    """What a "reviewed" mark remembers of a file: its status, old path and diff."""
    key = json.dumps([changed["status"], changed["old_path"], changed["diff"]])
    return hashlib.sha256(key.encode()).hexdigest()


def check_since(since: str | None) -> str | None:
    """`since` of a changes read: absent, or "last_review" (400 naming `since` otherwise)."""
    if since in (None, "", SINCE_LAST_REVIEW):
        return since or None
    raise ValidationFailed("since", f"must be {SINCE_LAST_REVIEW!r} (or absent), not {since!r}")


def reviewer_id() -> str:
    """Whose review it is: the caller's user id ('' for an internal caller)."""
    identity = current_identity()
    return identity.user_id if identity is not None else ""


def review_ref(task_id: str, reviewer: str) -> str:
    """The ref that keeps a reviewer's snapshot commit alive (user ids need not be ref-safe)."""
    return f"{REVIEW_REF_PREFIX}/{task_id}/{hashlib.sha256(reviewer.encode()).hexdigest()[:16]}"


def review_prompt(review: ReviewCreate) -> str:
    lines = ["Review comments on your changes:", ""]
    for number, comment in enumerate(review.comments, 1):
        lines.append(f"{number}. {comment.path}:{comment.line}")
        lines.extend(f"   {text}" for text in comment.body.splitlines())
    if review.message.strip():
        lines += ["", review.message.strip()]
    return "\n".join(lines)


class ChangesService:
    def __init__(
        self,
        db: Database,
        git: GitRunner,
        repositories: RepositoryService,
        bus: EventBus,
        sessions: SessionService,
        describer: TaskDescriber,
    ) -> None:
        self.describer = describer  # the task JSON of `task.updated` when its totals change
        self.db = db
        self.git = git
        self.repositories = repositories
        self.bus = bus
        self.sessions = sessions  # review comments go to the agent through the prompt path
        self._fingerprints: dict[str, str] = {}

    # --- reading ------------------------------------------------------------------------

    async def changes(self, task_id: str, since: str | None = None) -> dict[str, Any]:
        """The task's changes; with `since="last_review"`, those since the caller's last
        review (`last_review` says which; null: no review yet, and the changes are all of
        them)."""
        since = check_since(since)
        task, repository = await self.repositories.task_repository(task_id)
        if since is None:
            return await self._changes(task, repository)
        return await self._changes_since_review(task, repository)

    def _empty_answer(self, task: Task) -> dict[str, Any]:
        return {
            "branch": task.branch or None,
            "base_branch": task.base_branch or None,
            "merge_base": None,
            "files": [],
            "additions": 0,
            "deletions": 0,
            "truncated": False,
        }

    async def _changes(self, task: Task, repository: Repository) -> dict[str, Any]:
        """The changes against the merge base (and the task row's totals kept up to date)."""
        answer, _ = await self._read_changes(task, repository)
        return answer

    async def _read_changes(
        self, task: Task, repository: Repository, *, snapshot: bool = False
    ) -> tuple[dict[str, Any], str]:
        """The changes, and with `snapshot` the commit of the worktree as read (not yet kept:
        `_keep_review`), else ""."""
        answer = self._empty_answer(task)
        if not task.branch:
            return answer, ""  # no session yet: nothing changed
        async with self.git.lock(repository.path):
            merge_base, output, commit = await self._diff(
                task, repository, patch=True, snapshot=snapshot
            )
        answer["merge_base"] = merge_base
        answer.update(await asyncio.to_thread(parse_changes, output))
        if (task.additions, task.deletions) != (answer["additions"], answer["deletions"]):
            await self._store_totals(task.id, answer["additions"], answer["deletions"])
        return answer, commit

    async def _last_review(self, task_id: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            found = await repository_sql.review_snapshot(conn, task_id, reviewer_id())
        if found is None:
            return None
        commit, reviewed_at = found
        return {"commit": commit, "reviewed_at": reviewed_at.isoformat()}

    async def _changes_since_review(
        self, task: Task, repository: Repository, full: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """What changed in the worktree since the caller's last review; before any review,
        all the changes (`full` when already read), with `last_review: null`."""
        last_review = await self._last_review(task.id) if task.branch else None
        if last_review is None:
            answer = full if full is not None else await self._changes(task, repository)
        else:
            answer = self._empty_answer(task)
            try:
                async with self.git.lock(repository.path):
                    merge_base, output, _ = await self._diff(
                        task, repository, patch=True, against=last_review["commit"]
                    )
            except GitFailed as exc:
                raise Conflict(
                    "the snapshot of your last review is gone from the repository; "
                    "mark a file reviewed to take a new one"
                ) from exc
            answer["merge_base"] = merge_base
            answer.update(await asyncio.to_thread(parse_changes, output))
        answer["since"] = SINCE_LAST_REVIEW
        answer["last_review"] = last_review
        return answer

    async def _keep_review(self, task: Task, repository: Repository, commit: str) -> None:
        """`commit` (a snapshot of the worktree) becomes the caller's last review: its ref
        keeps it alive, its row says so."""
        reviewer = reviewer_id()
        async with self.git.lock(repository.path):
            await self.git.run(repository.path, "update-ref", review_ref(task.id, reviewer), commit)
        async with self.db.write() as conn:
            await repository_sql.set_review_snapshot(
                conn, task.id, reviewer, commit, self.repositories.clock.now()
            )

    async def record_review(self, task: Task, repository: Repository) -> None:
        """The worktree as it is now becomes the caller's review snapshot."""
        if not task.branch:
            return
        async with self.git.lock(repository.path):
            _, _, commit = await self._diff(task, repository, patch=None, snapshot=True)
        await self._keep_review(task, repository, commit)

    async def _store_totals(self, task_id: str, additions: int, deletions: int) -> None:
        """The task row keeps the last totals (the board's cards show them without git);
        when they changed, `task.updated` says so."""
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            changed = await repository_sql.set_task_totals(
                conn, task_id, additions=additions, deletions=deletions
            )
            task = await task_repository.get_task(conn, task_id) if changed else None
            if task is not None:
                await add_task_event(conn, events, TASK_UPDATED, task, self.describer)
        events.publish()

    async def _merge_base(self, repository: Repository, task: Task) -> str:
        base = task.base_branch or repository.default_branch
        result = await self.git.run(
            repository.path,
            "merge-base",
            f"refs/heads/{base}",
            f"refs/heads/{task.branch}",
            check=False,
        )
        if result.returncode != 0:
            raise Conflict(f"no merge base between {base!r} and {task.branch!r}")
        return result.text

    async def _diff(
        self,
        task: Task,
        repository: Repository,
        *,
        patch: bool | None,
        against: str | None = None,
        snapshot: bool = False,
    ) -> tuple[str, DiffOutput, str]:
        """Under the repository lock: the merge base, the diff against it (or against the
        commit `against`; no diff when `patch` is None), and, with `snapshot`, a commit of
        the worktree as diffed ("" otherwise; written, not yet referenced)."""
        worktree = Path(task.worktree_path) if task.worktree_path else None
        output = DiffOutput(b"")
        commit = ""
        if worktree is None or not worktree.is_dir():
            merge_base = await self._merge_base(repository, task)
            # No worktree (yet, or any more): what the branch holds.
            branch = f"refs/heads/{task.branch}"
            if patch is not None:
                output = await self._run_diff(
                    repository.path, [against or merge_base, branch], None, patch
                )
            if snapshot:
                commit = (await self.git.run(repository.path, "rev-parse", branch)).text
            return merge_base, output, commit
        async with self._snapshot_index(worktree) as env:
            # Independent: the merge base reads refs, `add -A` writes the throwaway index.
            found, added = await asyncio.gather(
                self._merge_base(repository, task),
                self.git.run(worktree, "add", "-A", env=env),
                return_exceptions=True,
            )
            for outcome in (found, added):
                if isinstance(outcome, BaseException):
                    raise outcome
            assert isinstance(found, str)
            merge_base = found
            if patch is not None:
                spec = ["--cached", against or merge_base]
                # Into a file beside the throwaway index: read in one go, not through a pipe
                # in a few hundred small reads on the event loop.
                into = os.path.join(os.path.dirname(env["GIT_INDEX_FILE"]), "diff")
                output = await self._run_diff(worktree, spec, env, patch, into=into)
            if snapshot:
                commit = await self._snapshot_commit(worktree, env, task.id)
        return merge_base, output, commit

    async def _snapshot_commit(self, worktree: Path, env: dict[str, str], task_id: str) -> str:
        """A parentless commit of the (throwaway) index's tree."""
        tree = (await self.git.run(worktree, "write-tree", env=env)).text
        message = f"kandev: the worktree of task {task_id} as last reviewed"
        made = await self.git.run(worktree, *SNAPSHOT_IDENTITY, "commit-tree", tree, "-m", message)
        return made.text

    async def _run_diff(
        self,
        cwd: str | Path,
        spec: list[str],
        env: dict[str, str] | None,
        patch: bool,
        *,
        into: str | None = None,
    ) -> DiffOutput:
        """One git process: the raw entries, and with `patch` the patch after them; written
        to the file `into` (then read) when given."""
        formats = ["--raw", "-p"] if patch else ["--raw"]
        options = ["-z", *formats, "--find-renames", "--no-ext-diff", "--no-color"]
        if into is not None:
            options.append(f"--output={into}")
        result = await self.git.run(cwd, "diff", *options, *spec, env=env)
        raw = result.stdout if into is None else await asyncio.to_thread(Path(into).read_bytes)
        return DiffOutput.split(raw) if patch else DiffOutput(raw)

    @asynccontextmanager
    async def _snapshot_index(self, worktree: Path) -> AsyncIterator[dict[str, str]]:
        """GIT_INDEX_FILE pointing at a throwaway copy of the worktree's index (found and
        copied in one worker-thread hop; git is asked where it is only when `.git` says not)."""
        copy = await asyncio.to_thread(_copy_index, worktree, None)
        if copy is None:
            index = (await self.git.run(worktree, "rev-parse", "--git-path", "index")).text
            index_path = Path(index) if os.path.isabs(index) else worktree / index
            copy = await asyncio.to_thread(_copy_index, worktree, index_path)
        assert copy is not None
        try:
            yield {"GIT_INDEX_FILE": copy}
        finally:
            shutil.rmtree(os.path.dirname(copy), ignore_errors=True)

    async def _changed_paths(self, task: Task, repository: Repository) -> set[str]:
        if not task.branch:
            return set()
        async with self.git.lock(repository.path):
            _, output, _ = await self._diff(task, repository, patch=False)
        paths: set[str] = set()
        for _, path, old_path in raw_entries(output.raw):
            paths.add(path)
            if old_path is not None:
                paths.add(old_path)
        return paths

    async def overlaps(self, task_id: str) -> dict[str, Any]:
        """Other open tasks of the same repository whose changes touch the same files."""
        task, repository = await self.repositories.task_repository(task_id)
        mine = await self._changed_paths(task, repository)
        found = await self._overlaps(task, repository, mine)
        return {"overlaps": found, "total": len(found)}

    async def _overlaps(
        self, task: Task, repository: Repository, mine: set[str]
    ) -> list[dict[str, Any]]:
        if not mine:
            return []
        async with self.db.read() as conn:
            others = [
                await task_repository.get_task(conn, row["id"])
                for row in await repository_sql.open_task_rows_on(conn, repository.id)
                if row["id"] != task.id
            ]
        found = []
        for other in others:
            if other is None or not mine:
                continue
            try:
                shared = mine & await self._changed_paths(other, repository)
            except KandevError:
                continue  # its branch is gone or unrelated: it overlaps nothing
            if shared:
                found.append(
                    {
                        "task_id": other.id,
                        "title": other.title,
                        "branch": other.branch,
                        "files": sorted(shared),
                    }
                )
        return found

    # --- the task page's Changes panel -----------------------------------------------------

    async def review_panel(self, task_id: str, since: str | None = None) -> dict[str, Any]:
        """The changes, each file with its `fingerprint` (of its diff against the merge
        base), `reviewed`: "" (not marked), "reviewed", or "stale" (marked, and its diff
        changed since), and `markable` (among the task's changes). With
        `since="last_review"` the files and diffs are those since the caller's last review
        (`last_review`; null: none yet, all the changes shown); marks and overlaps always
        read the whole changes."""
        since = check_since(since)
        task, repository = await self.repositories.task_repository(task_id)
        full = await self._changes(task, repository)
        async with self.db.read() as conn:
            marks = await repository_sql.reviewed_marks(conn, task.id)
        states: dict[str, str] = {}
        for f in full["files"]:
            f["fingerprint"] = file_fingerprint(f)
            mark = marks.get(f["path"])
            states[f["path"]] = (
                "" if mark is None else "reviewed" if mark == f["fingerprint"] else "stale"
            )
        answer = full
        answer["since"], answer["last_review"] = None, None
        if since is not None:
            answer = await self._changes_since_review(task, repository, full)
        for f in answer["files"]:
            f.setdefault("fingerprint", "")
            f["reviewed"] = states.get(f["path"], "")
            f["markable"] = f["path"] in states
        answer["reviewed_files"] = sum(1 for f in answer["files"] if f["reviewed"] == "reviewed")
        mine = {f["path"] for f in full["files"]} | {
            f["old_path"] for f in full["files"] if f["old_path"]
        }
        answer["overlaps"] = await self._overlaps(task, repository, mine)
        return answer

    async def commit_panel(self, task_id: str, data: CommitCreate) -> dict[str, Any]:
        """`commit`, then the panel: its `result` (the commit), or its `failure` (the error;
        nothing was committed)."""
        return await self._act_then_panel(task_id, self.commit(task_id, data))

    async def merge_panel(self, task_id: str, data: MergeCreate) -> dict[str, Any]:
        """`merge`, then the panel: its `result` (the merge), or its `failure` (the error,
        a MergeConflict with its paths; the repository is untouched)."""
        return await self._act_then_panel(task_id, self.merge(task_id, data))

    async def _act_then_panel(
        self, task_id: str, action: Coroutine[Any, Any, dict[str, Any]]
    ) -> dict[str, Any]:
        result: dict[str, Any] | None = None
        failure: KandevError | None = None
        try:
            result = await action
        except KandevError as exc:
            failure = exc
        panel = await self.review_panel(task_id)
        panel["result"] = result
        panel["failure"] = failure
        return panel

    async def mark_reviewed(
        self, task_id: str, path: str, reviewed: bool, since: str | None = None
    ) -> dict[str, Any]:
        """Mark one changed file reviewed at its current diff (or clear the mark); the panel
        as it is then (`since` as for review_panel). Marking is a review: the worktree as
        read becomes the caller's review snapshot."""
        since = check_since(since)
        task, repository = await self.repositories.task_repository(task_id)
        changes, snapshot = await self._read_changes(task, repository, snapshot=reviewed)
        found = next((f for f in changes["files"] if f["path"] == path), None)
        if found is None and reviewed:
            raise Conflict(f"{path!r} is not among the task's changed files")
        if snapshot:
            await self._keep_review(task, repository, snapshot)
        async with self.db.write() as conn:
            fingerprint = file_fingerprint(found) if reviewed and found is not None else None
            await repository_sql.set_reviewed_mark(conn, task.id, path, fingerprint)
        return await self.review_panel(task_id, since)

    # --- acting -------------------------------------------------------------------------

    async def review(self, task_id: str, review: ReviewCreate) -> dict[str, Any]:
        """The comments as one prompt to the task's primary session. Sending them is a
        review: the worktree as it is becomes the caller's review snapshot."""
        task, repository = await self.repositories.task_repository(task_id)
        async with self.db.read() as conn:
            sessions = await session_repository.list_task_sessions(conn, task.id)
        primary = next((s for s in sessions if s.is_primary), None)
        if primary is None:
            raise Conflict("the task has no session to review; start one first")
        try:
            await self.record_review(task, repository)
        except KandevError as exc:  # the comments matter more than the snapshot
            log.info("no review snapshot of task %s: %s", task.id, exc.message)
        result = await self.sessions.prompt(primary.id, review_prompt(review))
        return {"session_id": result.session_id, "turn_id": result.turn_id, "queued": result.queued}

    async def commit(self, task_id: str, data: CommitCreate) -> dict[str, Any]:
        task, repository = await self.repositories.task_repository(task_id)
        worktree = Path(task.worktree_path) if task.worktree_path else None
        if worktree is None or not worktree.is_dir():
            raise Conflict("the task has no worktree; start a session first")
        async with self.git.lock(repository.path):
            await self.git.run(worktree, "add", "-A")
            staged = await self.git.run(worktree, "diff", "--cached", "--quiet", check=False)
            if staged.returncode == 0:
                raise Conflict("nothing to commit")
            identity = await self.git.identity_args(worktree)
            await self.git.run(
                worktree, *identity, "commit", "-q", "--no-verify", "-m", data.message
            )
            commit = (await self.git.run(worktree, "rev-parse", "HEAD")).text
            listed = await self.git.run(
                worktree, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--root", commit
            )
        files = [p for p in _tokens(listed.stdout) if p]
        await self._announce(task_id)
        return {"commit": commit, "files": files}

    async def merge(self, task_id: str, data: MergeCreate) -> dict[str, Any]:
        task, repository = await self.repositories.task_repository(task_id)
        if not task.branch:
            raise Conflict("the task has no branch yet; start a session first")
        repo = repository.path
        base = task.base_branch or repository.default_branch
        base_ref = f"refs/heads/{base}"
        async with self.git.lock(repo):
            base_oid = (await self.git.run(repo, "rev-parse", "--verify", base_ref)).text
            branch_ref = f"refs/heads/{task.branch}"
            branch_oid = (await self.git.run(repo, "rev-parse", "--verify", branch_ref)).text
            merged = await self.git.run(
                repo, "merge-base", "--is-ancestor", branch_oid, base_oid, check=False
            )
            if merged.returncode == 0:
                raise Conflict(await self._nothing_to_merge(task, base))
            result = await self.git.run(
                repo,
                "merge-tree",
                "--write-tree",
                "-z",
                "--name-only",
                base_oid,
                branch_oid,
                check=False,
            )
            tokens = _tokens(result.stdout)
            if result.returncode == 1:
                conflicts = sorted({t for t in tokens[1 : tokens.index("", 1)] if t})
                raise MergeConflict(conflicts)
            if result.returncode != 0:
                raise Conflict(f"the merge could not be computed: {result.stderr.decode().strip()}")
            tree = tokens[0]
            base_tree = (await self.git.run(repo, "rev-parse", f"{base_oid}^{{tree}}")).text
            if tree == base_tree:
                # A squash already landed (or the same change reached the base another way):
                # a commit now would change no file.
                raise Conflict(f"nothing to merge: {base!r} already has every change of the branch")
            head = await self.git.run(repo, "symbolic-ref", "-q", "HEAD", check=False)
            checked_out = head.returncode == 0 and head.text == base_ref
            if checked_out:
                dirty = await self.git.run(repo, "status", "--porcelain", "--untracked-files=no")
                if dirty.text:
                    raise Conflict(
                        f"the repository's checkout of {base!r} has uncommitted changes; "
                        "commit or stash them first"
                    )
            squash = data.strategy == "squash"
            message = data.message.strip() or (
                f"{task.title} (squashed from {task.branch})"
                if squash
                else f"Merge branch '{task.branch}' into {base}"
            )
            parents = ["-p", base_oid] + ([] if squash else ["-p", branch_oid])
            identity = await self.git.identity_args(repo)
            commit = (
                await self.git.run(repo, *identity, "commit-tree", tree, *parents, "-m", message)
            ).text
            if checked_out:
                moved = await self.git.run(repo, "merge", "--ff-only", "-q", commit, check=False)
                if moved.returncode != 0:
                    raise Conflict(
                        "the merge would overwrite files in the repository's checkout: "
                        + moved.stderr.decode(errors="replace").strip()
                    )
            else:
                await self.git.run(repo, "update-ref", base_ref, commit, base_oid)
        await self._announce(task_id)
        return {"commit": commit, "strategy": data.strategy, "base_branch": base}

    async def _nothing_to_merge(self, task: Task, base: str) -> str:
        """Why a branch with no commit of its own has nothing to merge; when the worktree
        holds uncommitted changes, the step that is missing: commit them first."""
        message = f"nothing to merge: {base!r} already has every commit of the branch"
        worktree = Path(task.worktree_path) if task.worktree_path else None
        if worktree is not None and worktree.is_dir():
            status = await self.git.run(worktree, "status", "--porcelain", check=False)
            if status.returncode == 0 and status.text:
                message += "; the task's changes are not committed yet: commit them first"
        return message

    async def _announce(self, task_id: str) -> None:
        """After a commit or a merge: `task.changes_updated`, even when the files read the
        same (a commit moves them from the worktree onto the branch). The commit or merge is
        done either way: a failure to read the changes afterwards is only logged."""
        try:
            await self.publish_if_changed(task_id, always=True)
        except KandevError as exc:
            log.info("changes of task %s not read: %s", task_id, exc.message)

    # --- events -------------------------------------------------------------------------

    async def publish_if_changed(self, task_id: str, *, always: bool = False) -> bool:
        """After a turn: `task.changes_updated` when the task's changes differ from what was
        last seen (the first look compares with "no changes"); `always` after a commit or
        a merge."""
        async with self.db.read() as conn:
            task = await task_repository.get_task(conn, task_id)
            repository = (
                await repository_sql.get_repository(conn, task.repository_id)
                if task is not None and task.repository_id
                else None
            )
            owner_id = await task_owner_id(conn, task_id) if repository is not None else ""
        if task is None or repository is None:
            return False
        changes = await self._changes(task, repository)
        summary = {
            "branch": changes["branch"],
            "base_branch": changes["base_branch"],
            "merge_base": changes["merge_base"],
            "additions": changes["additions"],
            "deletions": changes["deletions"],
            "truncated": changes["truncated"],
            "files": [
                {k: f[k] for k in ("path", "old_path", "status", "additions", "deletions")}
                for f in changes["files"]
            ],
        }
        diffs = [(f["path"], f["diff"]) for f in changes["files"]]
        fingerprint = hashlib.sha256(
            json.dumps([summary["files"], diffs], sort_keys=True).encode()
        ).hexdigest()
        empty = hashlib.sha256(json.dumps([[], []]).encode()).hexdigest()
        if not always and self._fingerprints.get(task_id, empty) == fingerprint:
            return False
        self._fingerprints[task_id] = fingerprint
        self.bus.publish(
            TASK_CHANGES_UPDATED,
            {"task_id": task_id, "changes": summary},
            task_id=task_id,
            owner_id=owner_id,
        )
        return True

    async def follow_turns(self) -> None:
        """Background: after each agent turn of a task on a repository, look at its changes."""
        stream = self.bus.subscribe()
        # Whether each task is on a repository, as its own events say (every turn's start
        # announces its task): a turn of a task known to be on none reads nothing here.
        on_repository: dict[str, bool] = {}
        try:
            while True:
                event = await stream.next()
                if event is None or not event.task_id:
                    continue
                if event.type in (TASK_CREATED, TASK_UPDATED):
                    if len(on_repository) >= _KNOWN_TASKS_MAX:
                        on_repository.clear()  # bounded; unknown tasks are simply read
                    task = event.data.get("task") or {}
                    on_repository[event.task_id] = bool(task.get("repository_id"))
                    continue
                if event.type != SESSION_TURN_COMPLETED:
                    continue
                if on_repository.get(event.task_id) is False:
                    continue
                try:
                    await self.publish_if_changed(event.task_id)
                except KandevError as exc:
                    log.info("changes of task %s not read: %s", event.task_id, exc.message)
                except Exception:
                    log.exception("reading the changes of task %s failed", event.task_id)
        finally:
            stream.close()
