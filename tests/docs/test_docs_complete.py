"""The docs name everything a user can set, receive or open.

- Every field of `kandev.config.Settings` is a row of docs/install.md's "Settings" table, by
  its environment name (`KANDEV_<FIELD>`, or its `KANDEV_*` alias: `data_dir` is
  `KANDEV_HOME`), and that table names nothing else.
- Every event type of the catalogue (`kandev.catalog.events.EVENT_TYPES`) is a row of
  docs/events.md's "Event types" table, which is the catalogue rendered: the test compares
  them, and `python -m tests.docs.test_docs_complete` rewrites the table. The catalogue is
  complete as far as the source can tell: no module spells an event type itself, and the
  pages' scripts listen only for catalogued types.
- Every GET route the web router adds to the app (pages and the fragments they fetch,
  `/static/vendor/{name}` included) appears in docs/web.md as a code span (`/tasks/{id}`;
  parameter names and `<name>` spelling aside). The `/static` mount (Kandev's own CSS and ES
  modules, under hashed URLs the templates write) is a mount, not a route, and is left out;
  form posts (POST) are not pages and are left out too.

A failure names what is missing or extra, and where it should be written.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from fastapi.routing import iter_route_contexts
from pydantic import AliasChoices

from kandev.catalog.events import EVENT_TYPES
from kandev.config import Settings
from tests.docs.doc_blocks import REPO

DOCS = REPO / "docs"
SRC = REPO / "src" / "kandev"
CATALOGUE = SRC / "catalog" / "events.py"
EVENTS_DOC = DOCS / "events.md"
TABLE_START = "<!-- event-types: generated from kandev.catalog.events.EVENT_TYPES -->"
TABLE_END = "<!-- /event-types -->"
EVENT_NAME = re.compile(r"""["'`]((?:task|session|workflow|workspace|stream)\.[a-z_.]+)["'`]""")


# --- settings ---------------------------------------------------------------------------


def setting_env_names() -> dict[str, str]:
    """Environment name → Settings field."""
    prefix = Settings.model_config.get("env_prefix", "")
    names = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        env = [c for c in choices if isinstance(c, str) and c.upper().startswith(prefix)]
        names[env[0].upper() if env else f"{prefix}{field_name}".upper()] = field_name
    return names


def section(path: Path, heading: str) -> str:
    """The text under `heading` (a markdown heading line) up to the next heading of its level."""
    lines = path.read_text().splitlines()
    level = heading.split(" ", 1)[0]
    start = lines.index(heading) + 1
    end = next(
        (i for i in range(start, len(lines)) if re.match(rf"^#{{1,{len(level)}}} ", lines[i])),
        len(lines),
    )
    return "\n".join(lines[start:end])


def test_every_setting_is_documented() -> None:
    table = section(DOCS / "install.md", "## Settings")
    documented = set(re.findall(r"^\|[^|\n]*\|\s*`(KANDEV_[A-Z0-9_]+)`", table, re.M))
    settings = setting_env_names()
    missing = [f"{env} (Settings.{settings[env]})" for env in sorted(set(settings) - documented)]
    extra = sorted(documented - set(settings))
    assert not missing, f"docs/install.md ## Settings has no row for: {', '.join(missing)}"
    assert not extra, f"docs/install.md ## Settings documents settings that do not exist: {extra}"


# --- event types ------------------------------------------------------------------------


def render_event_table() -> str:
    rows = [f"| `{name}` | {description} |" for name, description in EVENT_TYPES.items()]
    header = ["| type | when, and its payload |", "|---|---|"]
    return "\n".join([TABLE_START, *header, *rows, TABLE_END])


def documented_event_table(text: str) -> str:
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    assert start >= 0 and end > start, (
        f"docs/events.md has no event-type table between {TABLE_START!r} and {TABLE_END!r}"
    )
    return text[start : end + len(TABLE_END)]


def test_every_event_type_is_documented() -> None:
    table = documented_event_table(EVENTS_DOC.read_text())
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", table, re.M))
    missing = sorted(set(EVENT_TYPES) - set(rows))
    extra = sorted(set(rows) - set(EVENT_TYPES))
    stale = sorted(n for n in set(rows) & set(EVENT_TYPES) if rows[n] != EVENT_TYPES[n])
    regenerate = "run `python -m tests.docs.test_docs_complete` to rewrite the table"
    assert not missing, f"docs/events.md has no row for event types {missing}; {regenerate}"
    assert not extra, f"docs/events.md lists event types not in the catalogue {extra}"
    assert not stale, f"docs/events.md describes {stale} unlike the catalogue; {regenerate}"
    assert table == render_event_table(), (
        f"docs/events.md's table is not the catalogue rendered (order, layout); {regenerate}"
    )


def test_event_types_are_spelled_only_in_the_catalogue() -> None:
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        if path == CATALOGUE:
            continue
        where = path.relative_to(REPO)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in EVENT_TYPES:
                problems.append(f"{where}:{node.lineno}: {node.value!r}: import its constant")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("add", "publish")
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.JoinedStr | ast.Constant)
                and isinstance(getattr(node.args[0], "value", ""), str)
            ):
                problems.append(f"{where}:{node.lineno}: publishes a type not from the catalogue")
    listing = "\n".join(problems)
    assert not problems, f"event types spelled outside kandev.catalog.events:\n{listing}"


def test_pages_listen_only_for_catalogued_event_types() -> None:
    problems = []
    for path in sorted((SRC / "web" / "static" / "js").rglob("*.js")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for name in EVENT_NAME.findall(line):
                known = (
                    any(t.startswith(name) for t in EVENT_TYPES)
                    if name.endswith(".")
                    else name in EVENT_TYPES
                )
                if not known:
                    problems.append(f"{path.relative_to(REPO)}:{lineno}: {name!r}")
    assert not problems, "scripts name event types the server never sends:\n" + "\n".join(problems)


# --- page routes ------------------------------------------------------------------------


def page_routes(tmp_path: Path) -> list[str]:
    """The GET paths the app serves from the web router. FastAPI (0.137+) keeps an included
    router as one entry of `app.routes`; `iter_route_contexts` resolves them to the routes
    as served (prefixes applied)."""
    from kandev.app import create_app
    from kandev.web import router as web_router

    app = create_app(Settings(data_dir=tmp_path))
    web_routes = {id(r.original_route) for r in iter_route_contexts(web_router.routes)}
    return sorted(
        {
            route.path
            for route in iter_route_contexts(app.routes)
            if id(route.original_route) in web_routes and "GET" in (route.methods or ())
        }
    )


def normalize_path(path: str) -> str:
    return re.sub(r"\{[^}]*\}|<[^>]*>", "{}", path)


def documented_paths(markdown: str) -> set[str]:
    """Paths written in inline code spans (`/inbox`, `GET /tasks/{id}/card?x=1`), outside
    fenced listings."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)
    paths = set()
    for span in re.findall(r"`([^`\n]+)`", prose):
        for token in re.findall(r"(?:^|\s)(/[^\s?#,]*)", span):
            paths.add(normalize_path(token))
    return paths


def test_every_page_route_is_documented(tmp_path: Path) -> None:
    routes = page_routes(tmp_path)
    assert "/" in routes and "/tasks/{task_id}" in routes, routes  # the enumeration works
    documented = documented_paths((DOCS / "web.md").read_text())
    missing = [path for path in routes if normalize_path(path) not in documented]
    assert not missing, f"docs/web.md does not name these page routes (as `/path`): {missing}"


if __name__ == "__main__":
    text = EVENTS_DOC.read_text()
    EVENTS_DOC.write_text(text.replace(documented_event_table(text), render_event_table()))
    print(f"rewrote the event-type table of {EVENTS_DOC.relative_to(REPO)}", file=sys.stderr)
