"""Rule 1 of ARCHITECTURE.md, enforced: nothing outside kafkasim/runtime/ touches the clock,
sockets, threads, randomness, ZooKeeper or files directly — everything goes through the runtime
object. Checked with `ast` (not grep) so comments, strings and `fs.open(...)` calls on the
runtime's filesystem do not count, while `import time as t` or `from os import fsync` do.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "kafkasim"
SEAM = "kafkasim/runtime/"

# Modules whose import bypasses the seam (time, network, threads, randomness, processes, ZK).
# pathlib/shutil/tempfile are side doors to the disk.
FORBIDDEN_MODULES = frozenset({
    "time", "socket", "random", "threading", "asyncio", "kazoo", "selectors", "subprocess",
    "multiprocessing", "pathlib", "shutil", "tempfile", "concurrent",
})
# os functions that do file I/O or read disk state; the rest of os (os.path.join, os.sep) is pure.
FORBIDDEN_OS_CALLS = frozenset({
    "open", "read", "write", "pread", "pwrite", "fsync", "fdatasync", "sendfile", "ftruncate",
    "truncate", "replace", "rename", "remove", "unlink", "listdir", "scandir", "makedirs", "mkdir",
    "rmdir", "stat", "fstat",
})


@dataclass(frozen=True)
class Allow:
    prefix: str             # a module path (file) or a folder ending in "/"
    kinds: frozenset[str]   # which violation kinds are allowed there
    reason: str


# Kept explicit and short: each entry says why it may step outside the seam.
ALLOW = (
    Allow("kafkasim/cli.py", frozenset({"open", "os", "import:pathlib"}),
          "reads the scenario TOML and writes reports; runs no broker code itself"),
    Allow("kafkasim/harness/", frozenset({"open", "os", "import:pathlib"}),
          "loads scenario TOML and writes run.json/trace.jsonl; the world it runs is seam-only"),
    Allow("kafkasim/harness/host.py", frozenset({"import:time", "import:subprocess", "import:multiprocessing",
                                                 "import:concurrent", "import:tempfile"}),
          "the host as the harness sees it: wall clock, git version, sweep worker processes, scratch dirs"),
    Allow("kafkasim/report/", frozenset({"open", "os", "import:pathlib", "import:shutil", "import:tempfile"}),
          "reads report trees and writes tables/HTML with PySpark; never part of a run"),
    Allow("kafkasim/protocol/codegen.py", frozenset({"open", "os", "import:pathlib", "import:subprocess"}),
          "build-time generator: reads Kafka's jars (and may call Maven), writes generated modules"),
)


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    kind: str   # "import:<module>" | "open" | "os" | "dynamic-import:<module>"
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.detail}"


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def check_source(source: str, path: str) -> list[Violation]:
    """Every seam bypass in one module's source (path is only used in messages)."""
    tree = ast.parse(source, filename=path)
    found: list[Violation] = []

    def add(node: ast.AST, kind: str, detail: str) -> None:
        found.append(Violation(path, getattr(node, "lineno", 0), kind, detail))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _top(alias.name) in FORBIDDEN_MODULES:
                    add(node, f"import:{_top(alias.name)}", f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = _top(node.module)
            if top in FORBIDDEN_MODULES:
                add(node, f"import:{top}", f"from {node.module} import ...")
            elif top == "os":
                for alias in node.names:
                    if alias.name in FORBIDDEN_OS_CALLS or alias.name == "*":
                        add(node, "os", f"from os import {alias.name}")
            elif top == "builtins" or top == "io":
                for alias in node.names:
                    if alias.name == "open":
                        add(node, "open", f"from {top} import open")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "open":
                add(node, "open", "builtin open()")
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                owner, attr = func.value.id, func.attr
                if owner == "os" and attr in FORBIDDEN_OS_CALLS:
                    add(node, "os", f"os.{attr}()")
                elif owner in ("io", "builtins") and attr == "open":
                    add(node, "open", f"{owner}.open()")
                elif owner == "importlib" and attr == "import_module":
                    _dynamic(node, add)
            elif isinstance(func, ast.Name) and func.id in ("__import__", "import_module"):
                _dynamic(node, add)
    return found


def _dynamic(node: ast.Call, add: "object") -> None:
    """`__import__("socket")` / `importlib.import_module("time")` with a literal name."""
    if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        top = _top(node.args[0].value)
        if top in FORBIDDEN_MODULES:
            add(node, f"dynamic-import:{top}", f"dynamic import of {node.args[0].value}")  # type: ignore[operator]


def allowed(v: Violation) -> bool:
    kind = v.kind.replace("dynamic-import:", "import:")
    return any(v.path.startswith(a.prefix) and kind in a.kinds for a in ALLOW)


def scan_package() -> list[Violation]:
    out: list[Violation] = []
    for file in sorted(PACKAGE.rglob("*.py")):
        rel = file.relative_to(REPO).as_posix()
        if rel.startswith(SEAM):
            continue
        out += [v for v in check_source(file.read_text(encoding="utf-8"), rel) if not allowed(v)]
    return out


# ---------------------------------------------------------------- the guard
def test_nothing_outside_the_runtime_bypasses_the_seam() -> None:
    violations = scan_package()
    assert not violations, (
        "code outside kafkasim/runtime/ bypasses the runtime seam (ARCHITECTURE.md rule 1); "
        "use the NodeRuntime handed in at construction:\n  " + "\n  ".join(map(str, violations)))


def test_the_scan_covers_the_package() -> None:
    # A scan that silently sees no files would always pass.
    files = [f for f in PACKAGE.rglob("*.py") if not f.relative_to(REPO).as_posix().startswith(SEAM)]
    assert len(files) >= 5


def test_allow_list_entries_are_scoped_and_give_reasons() -> None:
    for a in ALLOW:
        # Never the whole package and never the broker's own layers (rule 2: one broker).
        assert a.prefix.startswith("kafkasim/") and a.prefix != "kafkasim/", a.prefix
        assert not a.prefix.startswith(("kafkasim/broker", "kafkasim/storage", "kafkasim/cluster",
                                        "kafkasim/client", "kafkasim/records")), a.prefix
        assert len(a.reason) > 20 and a.kinds and "import:asyncio" not in a.kinds


# ---------------------------------------------------------------- the guard can fail
BAD_SOURCES = {
    "import time\n": "import:time",
    "import socket as s\n": "import:socket",
    "from asyncio import sleep\n": "import:asyncio",
    "from kazoo.client import KazooClient\n": "import:kazoo",
    "import random, json\n": "import:random",
    "import threading\n": "import:threading",
    "import selectors\n": "import:selectors",
    "import subprocess\n": "import:subprocess",
    "import multiprocessing.pool\n": "import:multiprocessing",
    "def f():\n    import time\n    return time.time()\n": "import:time",  # nested imports too
    "with open('x', 'wb') as f:\n    f.write(b'')\n": "open",
    "import os\nfd = os.open('x', os.O_RDWR)\n": "os",
    "import os\nos.fsync(3)\n": "os",
    "import os\nos.pwrite(3, b'', 0)\n": "os",
    "import os\nos.read(3, 10)\n": "os",
    "from os import fsync\n": "os",
    "import io\nio.open('x')\n": "open",
    "__import__('socket')\n": "dynamic-import:socket",
    "import importlib\nimportlib.import_module('time')\n": "dynamic-import:time",
}


def test_checker_catches_each_kind_of_bypass() -> None:
    for source, kind in BAD_SOURCES.items():
        kinds = {v.kind for v in check_source(source, "kafkasim/broker/evil.py")}
        assert kind in kinds, f"not caught: {source!r} (found {kinds})"


def test_checker_passes_seam_code_and_pure_os_use() -> None:
    good = (
        "import os.path\n"
        "from kafkasim.runtime.api import NodeRuntime, Cancelled\n"
        "async def f(rt: NodeRuntime):\n"
        "    h = rt.fs.open(os.path.join('a', 'b'))  # the runtime's fs, not the OS\n"
        "    await rt.sleep(1)\n"
        "    s = 'import time; open(x)'  # strings are not code\n"
        "    return h\n"
    )
    assert check_source(good, "kafkasim/broker/good.py") == []


def test_allow_list_is_scoped_to_its_paths_and_kinds() -> None:
    v_open = check_source("open('scenario.toml')\n", "kafkasim/harness/loader.py")[0]
    assert allowed(v_open)
    v_broker = check_source("open('scenario.toml')\n", "kafkasim/broker/loader.py")[0]
    assert not allowed(v_broker)
    v_sock = check_source("import socket\n", "kafkasim/harness/loader.py")[0]
    assert not allowed(v_sock)  # the harness may read files, not open sockets
