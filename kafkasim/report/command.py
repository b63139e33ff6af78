"""`kafkasim report REPORTS_DIR [--out DIR] [--master URL]`: prerequisites, progress on stderr,
the console summary on stdout. Exit 0 whenever the report was written (failing runs are the
report's content, not its failure), 2 when it could not be (no Java, no PySpark, no such
directory), with one line saying why.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TextIO

from kafkasim.harness.host import wall_seconds
from kafkasim.report.prereq import report_problem


def report_command(reports_dir: str, out_dir: str | None, master: str, env: Mapping[str, str],
                   stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    problem = report_problem(env)
    if problem:
        print(problem, file=stderr)
        return 2
    from kafkasim.report.console import format_console
    from kafkasim.report.job import run_report

    start = wall_seconds()

    def progress(message: str) -> None:
        print(f"report [{wall_seconds() - start:5.1f} s] {message}", file=stderr, flush=True)

    try:
        result = run_report(reports_dir, out_dir, master, progress=progress)
    except FileNotFoundError as exc:
        print(f"kafkasim report: {exc}", file=stderr)
        return 2
    print(format_console(result), file=stdout)
    return 0
