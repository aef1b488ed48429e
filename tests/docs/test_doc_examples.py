"""Every example in README.md and docs/ runs as written, against a real `kandev serve`.

How a file's examples run:

- One fresh `kandev serve` (auth off, its own data dir, a free loopback port) per markdown file.
- The file's runnable blocks, in order, become **one** bash script run with
  `bash -euo pipefail`, so a later block sees the variables an earlier one set (`$WS`,
  `$TASK`), as a reader typing them into one terminal would. A `python` block is fed to the
  venv's python from inside that script (a quoted heredoc): it shares the exported
  environment, not the shell variables.
- The environment is the reader's after `make run`: the working directory is the clone,
  `.venv/bin` first on `PATH`, `KANDEV_URL` the test server, `KANDEV_HOME` its data dir (for
  the offline `kandev user|token` commands), `HOME` a scratch directory, and
  `KANDEV_USER_PASSWORD` what the reader would type at the hidden password prompt.
- The documented default address (`localhost:8420`, `127.0.0.1:8420`) is rewritten to the test
  server's, so examples may spell it out literally.
- Blocks that cannot run here carry `<!-- doc-test: skip (reason) -->` right before their
  fence; `test_every_example_is_run_or_marked` fails for an unmarked one that is not run, so a
  new example cannot go untested silently.

A failure names the block (file:line) whose commands failed, with that block's output.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_harness import ServeProcess
from tests.docs.doc_blocks import REPO, SHELL_LANGS, Block, all_blocks, doc_files, parse_blocks

MARK = "::doc-block::"
DEFAULT_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1):8420\b")
FILE_TIMEOUT = 240.0


def runnable_blocks(path: Path) -> list[Block]:
    return [b for b in parse_blocks(path) if b.runnable and b.skip_reason is None]


FILES_WITH_EXAMPLES = [p for p in doc_files() if runnable_blocks(p)]


def test_every_example_is_run_or_marked() -> None:
    problems = []
    for block in all_blocks():
        if block.marker is None:
            continue
        if not block.runnable:
            problems.append(f"{block.where}: a doc-test marker on a ```{block.lang} block")
        elif block.skip_reason is None:
            problems.append(
                f"{block.where}: unknown marker {block.marker!r};"
                " write <!-- doc-test: skip (the reason) -->"
            )
    assert not problems, "\n".join(problems)
    # Every runnable block is either skipped with a reason or run by test_examples_run.
    run = {b.where for p in FILES_WITH_EXAMPLES for b in runnable_blocks(p)}
    for block in all_blocks():
        if block.runnable:
            assert block.where in run or block.skip_reason, block.where


def test_the_parser_sees_markers_and_indented_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- doc-test: skip (needs an API key) -->\n```sh\ncurl x\n```\n\n"
        "1. a step:\n\n   ```python\n   print(1)\n   ```\n\n```json\n{}\n```\n\n"
        "```console\n$ kandev --help\nUsage: …\n$ echo a \\\n  b\nA B\n```\n"
    )
    blocks = parse_blocks(page)
    assert [(b.line, b.lang, b.skip_reason) for b in blocks] == [
        (4, "sh", "needs an API key"),
        (10, "python", None),
        (14, "json", None),
        (18, "console", None),
    ]
    assert blocks[1].code == "print(1)\n"
    assert blocks[3].script() == "kandev --help\necho a \\\n  b\n"


def script_for(blocks: list[Block], port: int) -> str:
    parts = [f"cd {shlex.quote(str(REPO))}"]
    for n, block in enumerate(blocks):
        code = DEFAULT_ADDRESS.sub(f"127.0.0.1:{port}", block.script())
        parts.append(f"echo {shlex.quote(f'{MARK} {block.where}')}")
        if block.lang in SHELL_LANGS:
            parts.append(code)
        else:
            eof = f"DOC_TEST_PYTHON_{n}"
            parts.append(f"{shlex.quote(sys.executable)} - <<'{eof}'\n{code}{eof}")
    parts.append(f"echo {shlex.quote(f'{MARK} end')}")
    return "\n".join(parts) + "\n"


def split_output(output: str) -> list[tuple[str, str]]:
    """[(where, that block's output)] in order, from the markers the script echoes."""
    sections: list[tuple[str, str]] = []
    for line in output.splitlines(keepends=True):
        if MARK in line:  # a block's output need not end with a newline
            before, _, where = line.partition(MARK)
            if sections and before:
                sections[-1] = (sections[-1][0], sections[-1][1] + before + "\n")
            sections.append((where.strip(), ""))
        elif sections:
            where, text = sections[-1]
            sections[-1] = (where, text + line)
    return sections


@pytest.fixture
def doc_server(tmp_path: Path) -> Iterator[ServeProcess]:
    served = ServeProcess(tmp_path / "kandev-home")
    yield served
    served.stop()


@pytest.mark.timeout(FILE_TIMEOUT + 60)
@pytest.mark.parametrize(
    "path", FILES_WITH_EXAMPLES, ids=[str(p.relative_to(REPO)) for p in FILES_WITH_EXAMPLES]
)
def test_examples_run(path: Path, doc_server: ServeProcess, tmp_path: Path) -> None:
    if shutil.which("jq") is None:
        pytest.fail("the examples use jq (see docs/install.md): apt-get install jq")
    blocks = runnable_blocks(path)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("KANDEV_") or k == "KANDEV_TEST_REQUIRE_ALL"
    }
    env.update(
        PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        KANDEV_URL=doc_server.url,
        KANDEV_HOME=str(doc_server.home),
        KANDEV_USER_PASSWORD="doc-example-password",
    )
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script_for(blocks, doc_server.port)],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a timeout kills whatever the examples started, too
    )
    try:
        output, _ = proc.communicate(timeout=FILE_TIMEOUT)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        timed_out = True
    sections = split_output(output)
    finished = bool(sections) and sections[-1][0] == "end"
    if proc.returncode == 0 and finished:
        return
    where, text = sections[-1] if sections else (str(path.relative_to(REPO)), output)
    why = f"timed out after {FILE_TIMEOUT:.0f} s" if timed_out else f"exit {proc.returncode}"
    pytest.fail(f"{where}: the example failed ({why}); its output:\n{text}", pytrace=False)


LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def test_links_point_inside_the_repository() -> None:
    """A user's clone has only the repository: every relative link resolves inside it."""
    broken = []
    for path in doc_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in LINK.finditer(line):
                target = match["target"].split("#", 1)[0]
                if not target or re.match(r"^[a-z]+:", target):
                    continue  # an anchor on the same page, or a URL
                resolved = (path.parent / target).resolve()
                if not resolved.is_relative_to(REPO) or not resolved.exists():
                    broken.append(f"{path.relative_to(REPO)}:{n}: {match['target']}")
    text = "\n".join(line for p in doc_files() for line in p.read_text().splitlines())
    assert "../shared" not in text, "a path outside the repository"
    assert "CONTRACT" not in text, "the contract is not in a user's clone: link docs/ instead"
    assert not broken, "\n".join(broken)
