"""Imports point down: the layer table in README.md (the ```layers block, top row first) and
every `kafkasim.*` import in the package — at module level, under TYPE_CHECKING, inside
functions — going to the importer's own row or a lower one. Parsed with `ast`, so comments
and strings do not count."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "kafkasim"

# Known upward imports, each (importer, imported). Empty since the structure step removed the
# TYPE_CHECKING cycle of 13 broker modules (server <-> apis <-> controller/group); a pair added
# here that no longer occurs fails the test below, so the list cannot go stale.
KNOWN_OFFENDERS: frozenset[tuple[str, str]] = frozenset()


def layer_table(readme: str) -> list[list[str]]:
    """The rows of the ```layers block, top first; each row a list of dotted names."""
    m = re.search(r"^```layers\n(.*?)^```", readme, re.S | re.M)
    assert m, "README.md has no ```layers block"
    return [line.split() for line in m.group(1).splitlines() if line.strip()]


def rank_of(table: list[list[str]]) -> dict[str, int]:
    """Entry -> row number (0 = top)."""
    ranks: dict[str, int] = {}
    for i, row in enumerate(table):
        for entry in row:
            assert entry not in ranks, f"{entry} is in two rows of the layer table"
            ranks[entry] = i
    return ranks


def entry_for(module: str, ranks: dict[str, int]) -> str | None:
    """The longest table entry `module` is or lies under."""
    best = None
    for entry in ranks:
        if (module == entry or module.startswith(entry + ".")) and (best is None or len(entry) > len(best)):
            best = entry
    return best


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(f.relative_to(REPO).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def imports_of(module: str, source: str, is_package: bool, known: dict[str, Path]) -> list[tuple[str, int]]:
    """Every kafkasim module `module` imports (anywhere in its source), with its line."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source, filename=module)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "kafkasim"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "kafkasim":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"  # `from pkg import module` imports the module
                out.append((sub if sub in known else base, node.lineno))
    return out


@dataclass(frozen=True)
class Upward:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}, a higher layer"


def check_module(module: str, source: str, is_package: bool, ranks: dict[str, int],
                 known: dict[str, Path]) -> list[Upward]:
    src = entry_for(module, ranks)
    assert src is not None, f"{module} is in no row of README.md's layer table"
    found = []
    for target, line in imports_of(module, source, is_package, known):
        dst = entry_for(target, ranks)
        assert dst is not None, f"{module}:{line} imports {target}, which is in no row of the layer table"
        if ranks[dst] < ranks[src]:
            found.append(Upward(module, target, line))
    return found


def readme_ranks() -> dict[str, int]:
    return rank_of(layer_table((REPO / "README.md").read_text(encoding="utf-8")))


def upward_imports() -> list[Upward]:
    ranks, known = readme_ranks(), modules()
    found = []
    for module, path in known.items():
        if module != "kafkasim":  # the root package's own __init__ imports nothing
            found += check_module(module, path.read_text(encoding="utf-8"), path.name == "__init__.py", ranks, known)
    return found


def test_imports_point_down() -> None:
    bad = [u for u in upward_imports() if (u.importer, u.imported) not in KNOWN_OFFENDERS]
    assert not bad, "imports against README.md's layer table:\n  " + "\n  ".join(map(str, bad))


def test_known_offenders_still_offend() -> None:
    # An entry whose import is gone must leave the list, so the list only ever shrinks.
    still = {(u.importer, u.imported) for u in upward_imports()}
    assert KNOWN_OFFENDERS <= still, f"no longer upward, remove from KNOWN_OFFENDERS: {sorted(KNOWN_OFFENDERS - still)}"


def test_the_table_orders_the_layers_and_the_check_can_fail() -> None:
    ranks, known = readme_ranks(), modules()
    assert ranks["kafkasim.cli"] == 0 and ranks["kafkasim.config"] == max(ranks.values())
    assert entry_for("kafkasim.broker.replica_manager", ranks) == "kafkasim.broker"
    assert entry_for("kafkasim.broker.group.manager", ranks) == "kafkasim.broker.group"
    evil = (
        "from typing import TYPE_CHECKING\n"
        "from kafkasim.records.batch import LOG_OVERHEAD\n"      # down: fine
        "if TYPE_CHECKING:\n"
        "    from kafkasim.broker.partition import Partition\n"  # up, for types only: still up
        "def f():\n"
        "    from kafkasim.harness import runner\n"              # up, inside a function
        "    import kafkasim.client.cluster\n"                  # up, plain import
        "s = 'from kafkasim.cli import main'\n"                 # a string: not an import
    )
    found = check_module("kafkasim.storage.evil", evil, False, ranks, known)
    assert [(u.imported, u.line) for u in found] == [
        ("kafkasim.broker.partition", 4), ("kafkasim.harness.runner", 6), ("kafkasim.client.cluster", 7)]
    relative = check_module("kafkasim.records.evil", "from ..storage import log\n", False, ranks, known)
    assert [u.imported for u in relative] == ["kafkasim.storage.log"]
