"""Real git repositories in temp dirs for repository tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.email=test@example.com", "-c", "user.name=Test"]


def git(repo: Path | str, *args: str) -> str:
    done = subprocess.run(
        [*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """`git init -b main` with one commit of `files` (default: a README)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in (files or {"README.md": "# demo\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def checkout_state(repo: Path) -> tuple[str, str, str]:
    """What a user sees of their checkout: status, HEAD commit, branch list."""
    return (
        git(repo, "status", "--porcelain"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"),
    )
