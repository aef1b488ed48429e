"""A usage error of the real `kandev` process is one line on stderr and exit 2 (CONTRACT §12)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["task", "list"], "--workspace"),
        (["task", "list", "--workspace", "w", "--bogus"], "--bogus"),
        (["questions", "answer"], "pending_id"),
        # Checked before the server is asked (none answers at this URL).
        (["questions", "answer", "p"], "nothing to answer with: give --option"),
    ],
)
def test_usage_error_is_one_line_and_exit_2(args: list[str], names: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kandev", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "KANDEV_URL": "http://127.0.0.1:1"},
    )
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and names in lines[0]
    assert lines[0].endswith(" -h`)")  # says where to look
