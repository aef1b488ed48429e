"""Issue 14: pages show an API error as a sentence ("Title must not be empty."), by one rule
for the templates (web/error_text.py) and the page scripts (static/js/error_text.js)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kandev.web.error_text import readable_error
from tests.conftest import missing

CASES = {
    "title: must not be empty": "Title must not be empty.",
    "ttl_hours: must be an integer": "Ttl hours must be an integer.",
    "command: program 'x' not found on PATH": "Command: program 'x' not found on PATH.",
    "workflow_step_id: no such step in the target workflow": (
        "Workflow step id: no such step in the target workflow."
    ),
    "answers[0].question_id: is not a question of this bundle": (
        "Answers[0].question id is not a question of this bundle."
    ),
    "invalid email or password": "Invalid email or password.",
    "Already a sentence.": "Already a sentence.",
    "  host not allowed ": "Host not allowed.",
    "": "",
}
JS_MODULE = Path(__file__).parents[2] / "src/kandev/web/static/js/error_text.js"


@pytest.mark.parametrize(("api", "page"), CASES.items())
def test_readable_error(api: str, page: str) -> None:
    assert readable_error(api) == page


def test_the_page_scripts_use_the_same_rule() -> None:
    node = shutil.which("node")
    if node is None:
        missing("Node.js")
    script = (
        f"import {{ readableError }} from {json.dumps(JS_MODULE.as_uri())};"
        f"console.log(JSON.stringify({json.dumps(list(CASES))}.map(readableError)));"
    )
    run = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == list(CASES.values())
