"""docs/development.md's layout is drawn from the code: it names every top-level package and
module of src/kandev, in the order of the layers the edge test enforces, and nothing else."""

from __future__ import annotations

from pathlib import Path

from tests.house.test_package_edges import LAYER_OF

DOC = Path(__file__).resolve().parents[2] / "docs" / "development.md"


def layout_block() -> str:
    text = DOC.read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def named_packages(block: str) -> list[str]:
    """The layout's second column (from column 12), in order; `cli*.py` stands for the cli
    modules, `clock.py ids.py` names two."""
    names: list[str] = []
    for line in block.splitlines():
        if line.startswith(("tests/", "bench/")):
            break  # the source tree ends here
        column = line[12:]
        if not column or column[0] == " ":
            continue
        for token in column.split("  ", 1)[0].split():
            names.append(token.removesuffix("/").removesuffix(".py"))
    return names


def expand(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        if name.endswith("*"):
            prefix = name[:-1]
            matching = [p for p in LAYER_OF if p == prefix or p.startswith(prefix + "_")]
            out += sorted(matching, key=lambda p: (LAYER_OF[p], p))
        else:
            out.append(name)
    return out


def test_the_layout_names_every_package_and_nothing_else() -> None:
    named = expand(named_packages(layout_block()))
    assert set(LAYER_OF) - set(named) == set(), "docs/development.md's layout misses these"
    assert [n for n in named if n not in LAYER_OF] == [], "the layout names what is not there"


def test_the_layout_lists_the_packages_bottom_up() -> None:
    named = [n for n in expand(named_packages(layout_block())) if n in LAYER_OF]
    layers = [LAYER_OF[n] for n in named]
    assert layers == sorted(layers), list(zip(named, layers, strict=True))
