"""Repository records and their public JSON (CONTRACT §10)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kandev.clock import isoformat


@dataclass(frozen=True)
class Repository:
    id: str
    workspace_id: str
    name: str
    path: str
    default_branch: str
    setup_script: str
    copy_files: list[str]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Repository:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "name": self.name,
            "path": self.path,
            "default_branch": self.default_branch,
            "setup_script": self.setup_script,
            "copy_files": list(self.copy_files),
            "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at),
        }
