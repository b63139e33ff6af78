#!/usr/bin/env python3
"""Compiles the simulator's hot modules with mypyc into build/native/ (kafkasim/runtime/native.py loads them).

    python3 real/build_native.py [--opt 3] [--jobs 2]

mypyc turns the same typed source into C (no second implementation to keep in step), so a seed
gives the same trace hash compiled or not. Compiled: the simulated world's kernel, network, disk
and ZooKeeper, records, storage, the client and the broker, which hold nearly all of a simulated
run's time, and the harness's god's-eye watchers (invariants.py, godseye.py), which see every
trace event. Left pure (and why):
- kafkasim/broker/config.py: BrokerConfig extends four config views (mypyc classes take one base);
- kafkasim/broker/request_context.py: RequestContext extends the protocol's RequestHeader, which
  stays pure (its message classes are built at import from Kafka's JSON definitions);
- kafkasim/broker/api_registry.py, kafkasim/client/channel_security.py: they subclass builtins;
- kafkasim/runtime/sim/world.py: tests and tools wrap a world's methods (the node runtime it
  hands each node is in runtime/sim/node_runtime.py, compiled: broker code calls it all the time);
- the protocol: its generated message classes build instances with object.__new__ and nest
  classes, which mypyc does not compile (it is about a sixth of a run's time, interpreted);
- the rest of the harness, report, real and live worlds, and the CLI: dynamic or not hot.

gcc runs on every core (mypyc makes one library of many C files; setuptools would compile them one
at a time). Takes about 3 minutes on 2 cores; prints its progress.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("KAFKASIM_NATIVE_DIR") or ROOT / "build" / "native")
COMPILED = ["kafkasim/runtime/sim", "kafkasim/records", "kafkasim/storage", "kafkasim/client",
            "kafkasim/cluster", "kafkasim/broker",
            # The god's-eye watchers run on every trace event (the invariants on every produce);
            # the workload's producer and consumer step once or twice per record; every network
            # delivery draws from a seeded rng.
            "kafkasim/harness/invariants.py", "kafkasim/harness/godseye.py", "kafkasim/harness/workload.py",
            "kafkasim/runtime/rng.py"]
LEFT_PURE = {"kafkasim/broker/config.py", "kafkasim/broker/request_context.py",
             "kafkasim/broker/api_registry.py", "kafkasim/client/channel_security.py",
             "kafkasim/runtime/sim/world.py"}


def sources() -> list[str]:
    out = []
    for top in COMPILED:
        for path in sorted((ROOT / top).rglob("*.py")) if not top.endswith(".py") else [ROOT / top]:
            rel = path.relative_to(ROOT).as_posix()
            if path.name != "__init__.py" and rel not in LEFT_PURE:
                out.append(rel)
    return out


def parallel_compile(jobs: int, done: list[int], total: list[int]) -> Any:
    """A CCompiler.compile that runs gcc on `jobs` files at once and counts what it finished."""
    def compile(self: Any, sources: list[str], output_dir: str | None = None, macros: Any = None,
                include_dirs: Any = None, debug: int = 0, extra_preargs: Any = None,
                extra_postargs: Any = None, depends: Any = None) -> list[str]:
        macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)
        total[0] += len(objects)

        headers = [os.path.getmtime(h) for d in {os.path.dirname(s) for s in sources}
                   for h in Path(d).glob("*.h")]
        newest_header = max(headers, default=0.0)

        def one(obj: str) -> None:
            src, ext = build[obj]
            # mypyc rewrites only the C files whose text changed: an object newer than its
            # source and every header is current, so a rebuild after a small edit takes seconds.
            if not (os.path.exists(obj) and os.path.getmtime(obj) >= max(os.path.getmtime(src), newest_header)):
                self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)
            done[0] += 1
            if done[0] % 25 == 0:
                print(f"  gcc: {done[0]} C files compiled", flush=True)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, objects))
        return objects
    return compile


def build(opt: str, jobs: int) -> None:
    from distutils.ccompiler import CCompiler  # setuptools' vendored distutils

    from mypyc.build import mypycify
    from setuptools import setup

    mods = sources()
    hashes = {m: hashlib.sha256((ROOT / m).read_bytes()).hexdigest() for m in mods}
    temp = ROOT / "build" / "native-temp"
    # No manifest until the build is whole: a failed build is never used (kafkasim/runtime/native.py).
    (OUT / "manifest.json").unlink(missing_ok=True)
    started = time.monotonic()
    print(f"mypyc: {len(mods)} modules to C (type-checking the whole package first)", flush=True)
    os.chdir(ROOT)
    exts = mypycify(mods, opt_level=opt, multi_file=True, target_dir=str(temp / "c"))
    print(f"  C written in {time.monotonic() - started:.0f} s", flush=True)
    done, total = [0], [0]
    CCompiler.compile = parallel_compile(jobs, done, total)  # type: ignore[method-assign]
    setup(name="kafkasim-native", ext_modules=exts, script_name="build_native.py",
          script_args=["-q", "build_ext", "--build-lib", str(OUT), "--build-temp", str(temp)])
    write_manifest(mods, hashes)
    print(f"native build: {len(mods)} modules in {OUT} "
          f"({time.monotonic() - started:.0f} s)", flush=True)


def write_manifest(mods: list[str], hashes: dict[str, str]) -> None:
    libraries = {p.relative_to(OUT).as_posix(): p for p in OUT.rglob("*.so")}
    modules = {}
    for m in mods:
        name = m[:-3].replace("/", ".")
        lib = next(rel for rel in libraries if rel.startswith(m[:-3] + "."))
        modules[name] = {"source": m, "sha256": hashes[m], "library": lib}
    shared = {rel.split(".")[0]: rel for rel in libraries if "/" not in rel and "__mypyc" in rel}
    manifest = {"python": sys.implementation.cache_tag, "modules": modules, "shared": shared}
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opt", default="3", help="mypyc's opt_level, which is also gcc's -O (default 3)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="gcc processes at once")
    args = ap.parse_args()
    try:
        build(args.opt, args.jobs)
    except SystemExit as exc:  # setuptools exits on a compiler error; say so in one line
        if exc.code not in (0, None):
            print(f"native build failed ({exc.code}); kafkasim still runs pure Python", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
