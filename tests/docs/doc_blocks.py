"""The fenced code examples of README.md and docs/*.md, as the docs test runs them.

A block is an example when its fence says `sh`, `bash`, `console` or `python`; other fences
(`json`, `nginx`, plain ```) are listings and are not run. An example that cannot run here is
marked in the markdown by an HTML comment on the line right before its fence:

    <!-- doc-test: skip (needs an Anthropic API key) -->

and the reason in parentheses is required. Every other example runs.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGS = {"sh", "bash", "console"}
RUNNABLE_LANGS = SHELL_LANGS | {"python"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
_SKIP = re.compile(r"^skip\s*\((?P<reason>[^)]*\S[^)]*)\)$")


@dataclass(frozen=True)
class Block:
    path: Path  # the markdown file
    line: int  # 1-based line of the opening fence
    lang: str  # the fence's first word, lower case ("" for a plain fence)
    code: str  # the block's text, dedented to the fence's indentation
    marker: str | None  # the body of a `<!-- doc-test: … -->` right before the fence

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE_LANGS

    @property
    def skip_reason(self) -> str | None:
        if self.marker is None:
            return None
        match = _SKIP.match(self.marker)
        return match["reason"].strip() if match else None

    def script(self) -> str:
        """What runs: the code, or for `console` only the `$ ` command lines (and their
        backslash continuations); the output lines shown in between are not checked."""
        if self.lang != "console":
            return self.code
        commands: list[str] = []
        continuing = False
        for line in self.code.splitlines():
            if continuing or line.startswith("$ "):
                commands.append(line[2:] if line.startswith("$ ") and not continuing else line)
                continuing = line.endswith("\\")
        return "\n".join(commands) + "\n"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def parse_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        info = opening["info"].strip().split()
        lang = info[0].lower() if info else ""
        marker = None
        if i > 0:
            found = _MARKER.match(lines[i - 1])
            marker = found["body"] if found else None
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = lines[j].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            body.append(lines[j])
            j += 1
        code = textwrap.dedent("\n".join(body)) + "\n"
        if indent:
            code = textwrap.dedent(code)
        blocks.append(Block(path, i + 1, lang, code, marker))
        i = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in parse_blocks(path)]
