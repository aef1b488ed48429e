"""Repositories and worktrees (CONTRACT §10): the git runner, worktree lifecycle, changes,
review, commit and merge."""
