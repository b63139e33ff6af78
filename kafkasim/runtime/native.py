"""The native build: the simulator's hot modules compiled by mypyc, used when present and fresh.

`python real/build_native.py` compiles the modules its COMPILED list names with mypyc (the
same source, type-checked, turned into C: no second implementation) into `build/native/`, and
writes `build/native/manifest.json` with the SHA-256 of every compiled source. On the first
import of a listed module this finder decides, once per process, whether the process runs native:

- `KAFKASIM_NATIVE=0`: never (pure Python, as without a build);
- unset or `auto`: when the build exists and every listed source still has the hash the build was
  made from (an edited source silently running its old compiled code would be worse than slow);
- `KAFKASIM_NATIVE=1`: must; a missing or stale build raises ImportError naming the first stale
  module and the command that rebuilds it.

It is all or nothing: the compiled modules call each other directly in C, so a process never mixes
a compiled module with the pure copy of another listed one. A compiled module behaves as its source
does (mypyc keeps Python's semantics for typed code), so a seed gives the same trace hash either
way; `tests/runtime/test_native.py` checks that in separate processes. The test suite itself runs pure
(tests/conftest.py sets KAFKASIM_NATIVE=0 unless the environment chose), since a few tests
monkeypatch functions that compiled callers bind directly.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]             # the checkout (editable install)
# KAFKASIM_NATIVE_DIR: another build directory (real/build_native.py --out), e.g. one per Python.
BUILD_DIR = Path(os.environ.get("KAFKASIM_NATIVE_DIR") or ROOT / "build" / "native")
MANIFEST = BUILD_DIR / "manifest.json"
REBUILD = "python3 real/build_native.py"


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stale_reason(manifest: dict[str, Any]) -> str | None:
    """Why the build cannot be used (None: it can): a source changed since, or a file is gone."""
    if manifest.get("python") != sys.implementation.cache_tag:
        return f"built for {manifest.get('python')}, this is {sys.implementation.cache_tag}"
    modules = manifest.get("modules")
    if not isinstance(modules, dict):
        return "the manifest lists no modules"
    for entry in modules.values():
        src = ROOT / entry["source"]
        if not src.exists() or source_hash(src) != entry["sha256"]:
            return f"{entry['source']} changed since the build"
        if not (BUILD_DIR / entry["library"]).exists():
            return f"{entry['library']} is missing"
    return None


class NativeFinder(importlib.abc.MetaPathFinder):
    """Finds a listed module's compiled library in build/native (and mypyc's shared library)."""

    def __init__(self) -> None:
        self.listed: dict[str, str] | None = None  # module name -> library path, from the manifest
        self.decided: bool | None = None        # None until the first listed module is imported

    def _listed(self) -> dict[str, str]:
        if self.listed is None:
            self.listed = {}
            if MANIFEST.exists():
                manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
                self.listed = {name: e["library"] for name, e in manifest.get("modules", {}).items()}
                self.listed.update(manifest.get("shared", {}))
        return self.listed

    def _decide(self) -> bool:
        want = os.environ.get("KAFKASIM_NATIVE", "auto")
        if want == "0":
            return False
        reason = f"no build ({REBUILD})"
        if MANIFEST.exists():
            reason = stale_reason(json.loads(MANIFEST.read_text(encoding="utf-8"))) or ""
            if not reason:
                return True
        if want == "1":
            raise ImportError(f"KAFKASIM_NATIVE=1 but the native build cannot be used: {reason}; "
                              f"rebuild with {REBUILD}")
        return False

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("kafkasim.") and not fullname.endswith("__mypyc"):
            return None
        library = self._listed().get(fullname)
        if library is None and not (self.decided is None and os.environ.get("KAFKASIM_NATIVE") == "1"):
            return None
        if self.decided is None:
            self.decided = self._decide()       # raises for KAFKASIM_NATIVE=1 without a build
        if not self.decided or library is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(BUILD_DIR / library))
        return importlib.util.spec_from_file_location(fullname, BUILD_DIR / library, loader=loader)


FINDER = NativeFinder()


def install() -> None:
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)


def active() -> bool:
    """Whether this process runs the compiled modules."""
    return bool(FINDER.decided)
