"""A throwaway PostgreSQL server for the test session, started from Debian's binaries.

Uses KANDEV_TEST_POSTGRES_URL when set (an existing server). Otherwise runs initdb + pg_ctl
into a temp dir on a free loopback port (as the `postgres` user when we are root, because
initdb refuses root). Returns None when no PostgreSQL is installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class PgServer:
    admin_url: str  # postgresql://user@127.0.0.1:port/postgres
    data_dir: Path | None
    _as_user: list[str]
    _bin: Path | None

    def url_for(self, database: str) -> str:
        return self.admin_url.rsplit("/", 1)[0] + "/" + database

    def stop(self) -> None:
        if self.data_dir is None or self._bin is None:
            return
        subprocess.run(
            [
                *self._as_user,
                str(self._bin / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-m",
                "immediate",
                "stop",
            ],
            check=False,
            capture_output=True,
        )
        _remove_in_background(self.data_dir.parent)


def _remove_in_background(root: Path) -> None:
    """`rm -rf root`, left running after the tests. The cluster holds a copy of the catalogs
    for every test database (~450 in a full run: ~4 GB, ~140,000 files); removing it took
    30-110 s on CI's disk, all in the teardown of the run's last test. The server is already
    stopped, so nothing reads the directory any more: `sh` starts `rm` in its own session and
    returns at once, and `rm` finishes after pytest has exited (nothing is left as our child).
    """
    subprocess.run(
        ["sh", "-c", 'rm -rf -- "$1" </dev/null >/dev/null 2>&1 &', "sh", str(root)],
        check=False,
        start_new_session=True,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def start_pg_server() -> PgServer | None:
    existing = os.environ.get("KANDEV_TEST_POSTGRES_URL")
    if existing:
        return PgServer(existing, None, [], None)
    bindir = _pg_bin()
    if bindir is None:
        return None
    as_user: list[str] = []
    user = os.environ.get("USER") or "postgres"
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="kandev-pg-"))
    data = root / "data"
    if as_user:
        shutil.chown(root, "postgres")
    subprocess.run(
        [
            *as_user,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            user,
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200"
    )
    subprocess.run(
        [
            *as_user,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "-l",
            str(root / "log"),
            "start",
        ],
        check=True,
        capture_output=True,
    )
    return PgServer(f"postgresql://{user}@127.0.0.1:{port}/postgres", data, as_user, bindir)
