"""What every domain service holds: the database, time, ids and the access rules."""

from __future__ import annotations

from kandev.board.access import BoardAccess
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.ids import IdFactory


class ScopedService:
    access: BoardAccess

    def __init__(self, db: Database, clock: Clock, new_id: IdFactory, access: BoardAccess) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id
        self.access = access
