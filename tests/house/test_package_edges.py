"""Package edges point one way (issue: the house). Every import between the top-level
packages of src/kandev — at module level and inside functions; `if TYPE_CHECKING:` blocks
excepted — must go from a higher layer to a strictly lower one, so no cycle can form."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import kandev

SRC = Path(kandev.__file__).parent

# Lowest first. A package may import only packages of lower layers.
LAYERS: list[tuple[str, ...]] = [
    (
        "catalog",
        "errors",
        "clock",
        "ids",
        "faults",
        "config",
        "log_fields",
        "heap",
        "keyed_locks",
    ),  # leaves
    ("db",),
    ("events", "auth"),
    ("access",),  # the scoping rules
    ("board",),  # workspaces, workflows, tasks, agent profiles; board access
    ("agents",),  # agent runtimes and processes
    ("sessions",),  # sessions, turns, messages, the orchestrator; session access
    ("clarification",),
    ("pending", "moves", "repos", "permissions"),  # …; agent permission requests
    ("streams",),  # the caller's event stream
    ("services",),  # the composition root
    ("perimeter",),
    ("api", "mcp"),
    ("web",),
    ("app",),
    ("startup", "cli_http"),
    ("cli_mcp",),  # the terminal's MCP tool calls, over cli_http
    ("cli_admin", "cli_board", "cli_questions", "cli_sessions"),
    ("cli_permissions",),  # over cli_questions' MCP client
    ("cli",),
    ("__main__",),
]
LAYER_OF = {package: index for index, names in enumerate(LAYERS) for package in names}


def top_level(module: str) -> str | None:
    """'kandev.board.tasks' -> 'board'; the root package itself -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "kandev" and len(parts) > 1 else None


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    return skipped


def imported_modules(path: Path) -> list[tuple[int, str]]:
    return imports_in(path.read_text(), ("kandev", *path.relative_to(SRC).parent.parts))


def imports_in(text: str, package: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in `text`, a module of `package`."""
    tree = ast.parse(text)
    skipped = _type_checking_nodes(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join((*base, node.module) if node.module else base)
            else:
                module = node.module or ""
            if module == "kandev":  # `from kandev import x`: x may be a package or a name
                found += [
                    (node.lineno, f"kandev.{a.name}") for a in node.names if _is_module(a.name)
                ]
            else:
                found.append((node.lineno, module))
    return found


def _is_module(name: str) -> bool:
    return (SRC / name).is_dir() or (SRC / f"{name}.py").is_file()


def source_files() -> list[Path]:
    return [p for p in SRC.rglob("*.py") if "migrations" not in p.relative_to(SRC).parts]


def package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def package_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in source_files():
        source = package_of(path)
        for line, module in imported_modules(path):
            target = top_level(module)
            if target is None or target == source or (source == "__init__"):
                continue
            edges[(source, target)].append(f"{path.relative_to(SRC)}:{line}")
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {package_of(p) for p in source_files()} - {"__init__"}
    assert packages - LAYER_OF.keys() == set(), "add new packages to LAYERS"
    assert LAYER_OF.keys() - packages == set(), "LAYERS names a package that does not exist"


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{source} -> {target} ({', '.join(places[:3])})"
        for (source, target), places in sorted(package_edges().items())
        if LAYER_OF[target] >= LAYER_OF[source]
    ]
    assert upward == []


def test_the_root_package_imports_nothing_of_its_own() -> None:
    root = SRC / "__init__.py"
    assert [m for _, m in imported_modules(root) if m.startswith("kandev")] == []


def test_the_walker_sees_function_level_and_relative_imports() -> None:
    # The layer test can only fail if the walker finds these: a guard for the guard.
    probe = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kandev.web import x\n"
        "def f():\n    from kandev.sessions import y\n"
        "from ..api import z\n"
        "from . import tasks\n"
        "from kandev import board\n"
    )
    modules = sorted(m for _, m in imports_in(probe, ("kandev", "board")))
    assert modules == ["kandev.api", "kandev.board", "kandev.board", "kandev.sessions", "typing"]
