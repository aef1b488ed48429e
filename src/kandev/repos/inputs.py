"""Validated inputs for repositories, changes, review, commit and merge."""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from kandev.board.inputs import Input, Name

BranchName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
SetupScript = Annotated[str, StringConstraints(max_length=100_000)]


def _absolute(value: str) -> str:
    if not posixpath.isabs(value):
        raise ValueError("must be an absolute path")
    return value


RepositoryPath = Annotated[
    str, StringConstraints(min_length=1, max_length=4096), AfterValidator(_absolute)
]


def _inside_repository(value: str) -> str:
    """A relative path that stays inside the repository: no absolute path, no `..`."""
    if not value or value.startswith("/") or "\\" in value:
        raise ValueError("must be a relative path inside the repository")
    normal = posixpath.normpath(value)
    if normal == ".." or normal.startswith("../") or "/../" in f"/{value}/" or normal == ".":
        raise ValueError("must stay inside the repository (no '..')")
    return normal


CopyFile = Annotated[
    str, StringConstraints(min_length=1, max_length=4096), AfterValidator(_inside_repository)
]
CopyFiles = list[CopyFile]


class RepositoryCreate(Input):
    path: RepositoryPath
    name: Name | None = None
    default_branch: BranchName | None = None
    setup_script: SetupScript = ""
    copy_files: CopyFiles = Field(default_factory=list, max_length=100)


class RepositoryUpdate(Input):
    """A PATCH: fields left out (or null) stay as they are. The path is fixed."""

    name: Name | None = None
    default_branch: BranchName | None = None
    setup_script: SetupScript | None = None
    copy_files: CopyFiles | None = Field(default=None, max_length=100)


ReviewBody = Annotated[str, StringConstraints(min_length=1, max_length=20_000)]


class ReviewComment(Input):
    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    line: int = Field(ge=0, le=10_000_000)
    body: ReviewBody


class ReviewCreate(Input):
    comments: list[ReviewComment] = Field(min_length=1, max_length=200)
    message: Annotated[str, StringConstraints(max_length=20_000)] = ""


class CommitCreate(Input):
    message: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000)
    ]


class MergeCreate(Input):
    strategy: Literal["merge", "squash"] = "merge"
    message: Annotated[str, StringConstraints(max_length=20_000)] = ""
