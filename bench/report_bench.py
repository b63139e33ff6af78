"""How long `kafkasim report` takes over 1, 10 and 50 runs, Spark's start included.

The runs come from one sweep made beforehand (a few minutes, niced):

    kafkasim sweep scenarios/smoke.toml --seeds 1-50 --jobs 1 --out /tmp/report-50
    python bench/report_bench.py --runs-from /tmp/report-50 [--sizes 1,10,50] [--repeat 1]

For each size the first N run directories are copied into a fresh tree and `kafkasim report` runs
on it as a user runs it (a new process: Python start, imports, the JVM, Spark, the pages). Prints
the wall time and its parts as the command's own progress lines on stderr give them: until Spark
has started, the Spark aggregation, and the rest (run pages, plots, the overview).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAMP = re.compile(r"^report \[\s*([\d.]+) s\] (.*)$")


def run_dirs(source: Path) -> list[Path]:
    def seed(p: Path) -> tuple[str, int]:
        m = re.search(r"(\d+)$", p.name)
        return (str(p.parent), int(m.group(1)) if m else 0)

    return sorted((p.parent for p in source.rglob("run.json") if "summary" not in p.parts), key=seed)


def one_report(dirs: list[Path], source: Path, work: Path) -> dict[str, float]:
    tree = work / "reports"
    for d in dirs:
        shutil.copytree(d, tree / d.relative_to(source))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "report", str(tree), "--out", str(work / "out")],
                       capture_output=True, text=True, env=env, cwd=REPO)
    total = time.monotonic() - start
    if p.returncode != 0:
        raise SystemExit(f"kafkasim report failed ({p.returncode}):\n{p.stderr[-3000:]}")
    stamps: dict[str, float] = {}
    for line in p.stderr.splitlines():
        m = STAMP.match(line)
        for key in ("Spark started", "aggregated:", "wrote "):
            if m and m.group(2).startswith(key):
                stamps[key] = float(m.group(1))
    started = stamps.get("Spark started", 0.0)
    aggregated = stamps.get("aggregated:", started)
    return {"total": total, "spark_start": started, "aggregate": aggregated - started,
            "pages": stamps.get("wrote ", aggregated) - aggregated}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-from", default="/tmp/report-50", help="a sweep's output directory")
    ap.add_argument("--sizes", default="1,10,50")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    source = Path(args.runs_from)
    dirs = run_dirs(source) if source.is_dir() else []
    sizes = [int(s) for s in args.sizes.split(",")]
    if len(dirs) < max(sizes):
        print(f"need {max(sizes)} runs under {source}, found {len(dirs)}; make them with:\n  kafkasim sweep "
              f"scenarios/smoke.toml --seeds 1-{max(sizes)} --jobs 1 --out {source}", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    print(f"kafkasim report over N runs of {source} ({os.cpu_count()} cores, load average {load:.1f})")
    print(f"{'runs':>5} {'total s':>8} {'to Spark up':>12} {'Spark job':>10} {'pages+html':>11}")
    for n in sizes:
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="report-bench-") as work:
                t = one_report(dirs[:n], source, Path(work))
            print(f"{n:>5} {t['total']:>8.1f} {t['spark_start']:>12.1f} {t['aggregate']:>10.1f} {t['pages']:>11.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
