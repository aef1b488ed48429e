"""The git runner: the real `git` binary as a subprocess, argv lists only (never a shell).

Every call names its repository with `-C`, has a timeout, never prompts
(GIT_TERMINAL_PROMPT=0) and speaks the C locale. Callers serialize the operations of one
repository with `lock(path)` (one asyncio.Lock per repository path): the worktrees of a
repository share its object store, refs and lock files.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kandev.errors import KandevError, Unavailable

GIT_TIMEOUT_SECONDS = 60.0
# Refs that keep the commits of review snapshots alive: <prefix>/<task id>/<reviewer key>.
REVIEW_REF_PREFIX = "refs/kandev/reviews"
GIT_MISSING = "git is not installed (no `git` on PATH); install git to use repositories"


class GitUnavailable(Unavailable):
    """No git binary: nothing that needs git can work (503)."""


class GitFailed(KandevError):
    """A git command exited non-zero (or timed out); `stderr` says why."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {returncode}"
        super().__init__(f"git {args[0] if args else ''} failed: {detail}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace").strip()


def same_path(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


class GitRunner:
    def __init__(self, timeout: float = GIT_TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, repo_path: str | Path) -> asyncio.Lock:
        """The one lock of a repository (by its real path)."""
        key = os.path.realpath(repo_path)
        return self._locks.setdefault(key, asyncio.Lock())

    @staticmethod
    def binary() -> str:
        git = shutil.which("git")
        if git is None:
            raise GitUnavailable(GIT_MISSING)
        return git

    async def run(
        self,
        cwd: str | Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        timeout: float | None = None,
    ) -> GitResult:
        argv = [self.binary(), "-C", str(cwd), "-c", "core.quotepath=off", *args]
        full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=full_env,
            )
        except FileNotFoundError:
            raise GitUnavailable(GIT_MISSING) from None
        try:
            async with asyncio.timeout(timeout or self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise GitFailed(args, -1, "timed out") from None
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        assert proc.returncode is not None
        result = GitResult(proc.returncode, out, err)
        if check and result.returncode != 0:
            raise GitFailed(args, result.returncode, err.decode("utf-8", errors="replace"))
        return result

    async def is_repository(self, path: str | Path) -> bool:
        """The top of a work tree (or a bare repository) of its own."""
        result = await self.run(path, "rev-parse", "--show-toplevel", check=False)
        if result.returncode != 0:
            bare = await self.run(path, "rev-parse", "--is-bare-repository", check=False)
            return bare.returncode == 0 and bare.text == "true"
        return await asyncio.to_thread(same_path, result.text, path)

    async def branch_exists(self, repo: str | Path, branch: str) -> bool:
        if not branch or branch.startswith("-"):
            return False
        result = await self.run(
            repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False
        )
        return result.returncode == 0

    async def default_branch(self, repo: str | Path) -> str:
        """The branch the checkout has (HEAD), else init.defaultBranch, else 'main'."""
        head = await self.run(repo, "symbolic-ref", "--short", "-q", "HEAD", check=False)
        if head.returncode == 0 and head.text:
            return head.text
        configured = await self.run(repo, "config", "init.defaultBranch", check=False)
        return configured.text if configured.returncode == 0 and configured.text else "main"

    async def identity_args(self, repo: str | Path) -> list[str]:
        """`-c user.*` for a commit when the user has no identity configured."""
        email = await self.run(repo, "config", "user.email", check=False)
        if email.returncode == 0 and email.text:
            return []
        return ["-c", "user.name=Kandev", "-c", "user.email=kandev@localhost"]
