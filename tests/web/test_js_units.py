"""The overlay's pure JavaScript (arrival gate, rune count) under Node's own test runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import missing

JS_TESTS = sorted((Path(__file__).parent / "js").glob("*.test.mjs"))


def test_overlay_units_pass_under_node() -> None:
    node = shutil.which("node")
    if node is None:
        missing("Node.js")
    assert JS_TESTS
    run = subprocess.run(
        [node, "--test", *map(str, JS_TESTS)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# fail 0" in run.stdout and "# pass 4" in run.stdout, run.stdout
