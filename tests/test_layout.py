"""The tests mirror the package: tests/<package>/... tests kafkasim/<package>/... (tests/serve
tests kafkasim/serve.py, the broker served on real sockets), and every test module declares
exactly one kind as its pytest marker (`pytestmark = pytest.mark.<kind>`), so `-m sim`,
`-m "not real"` and the like select by kind whatever the folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
KINDS = {"unit", "property", "sim", "contract", "real", "spark"}
# Top-level tests guard the whole tree (imports, the seam, lint, this layout), not one package.
TREE_GATES = {"test_gates.py", "test_layers.py", "test_seam_guard.py", "test_layout.py"}
# Suites about the whole broker against Apache Kafka itself (tests/conformance: the same requests
# to both, compared field by field), not about one package.
WHOLE_BROKER_SUITES = {"conformance"}


def module_files() -> list[Path]:
    return sorted(p for p in (REPO / "tests").rglob("test_*.py") if "resources" not in p.parts)


def test_every_test_module_declares_one_kind() -> None:
    bad = []
    for path in module_files():
        kinds = re.findall(r"^pytestmark = pytest\.mark\.(\w+)$", path.read_text(), re.M)
        if len(kinds) != 1 or kinds[0] not in KINDS:
            bad.append(f"{path.relative_to(REPO)}: {kinds or 'no pytestmark'}")
    assert not bad, "each test module needs exactly one of " + ", ".join(sorted(KINDS)) + ":\n  " + "\n  ".join(bad)


def test_folders_mirror_the_package() -> None:
    bad = []
    for path in module_files():
        rel = path.relative_to(REPO / "tests")
        if len(rel.parts) == 1:
            if rel.name not in TREE_GATES:
                bad.append(str(rel))
            continue
        if rel.parts[0] in WHOLE_BROKER_SUITES:
            continue
        if not _mirrors(rel.parts[:-1]):
            bad.append(f"{rel}: no kafkasim/{Path(*rel.parts[:-1])}")
    assert not bad, "tests outside the package's mirror:\n  " + "\n  ".join(bad)


def _mirrors(folders: tuple[str, ...]) -> bool:
    """tests/a/b/ mirrors kafkasim/a/b/; below a module (tests/serve/clients/ under
    kafkasim/serve.py) sub-folders group that module's suites."""
    here = REPO / "kafkasim"
    for name in folders:
        if (here / name).is_dir():
            here = here / name
        else:
            return (here / name).with_suffix(".py").is_file()
    return True


def test_the_layout_check_can_fail() -> None:
    assert _mirrors(("broker", "group")) and _mirrors(("serve", "clients"))
    assert not _mirrors(("unit",)) and not _mirrors(("sim",)) and not _mirrors(("broker", "nothing"))
