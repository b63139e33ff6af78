"""Console summary of a report, rendered with rich to a plain string.

Returned as text (not printed) so the CLI decides where it goes and tests
can assert on it.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kafkasim.report.html import fmt, reproduce_command
from kafkasim.report.model import ReportResult


def _scenario_table(result: ReportResult) -> Table:
    table = Table(title="kafkasim report", title_justify="left")
    for col in ("scenario", "runs", "pass", "fail", "pass rate", "flaky seeds", "ratio p50", "lat p99 ms"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for s in result.data.scenarios:
        table.add_row(
            Text(s["scenario"]),  # Text, not str: names must not be parsed as rich markup
            str(s["runs"]),
            str(s["passes"]),
            f"[red]{s['failures']}[/red]" if s["failures"] else "0",
            f"{s['pass_rate']:.1%}",
            fmt(s["flaky_seed_list"]) or "–",  # seeds are ints: no markup risk
            fmt(s["ratio_p50"]),
            fmt(s["latency_p99_ms_median"]),
        )
    return table


def _footer_lines(result: ReportResult) -> list[str]:
    data = result.data
    lines = [f"{result.runs} runs, {result.scenarios} scenarios, {result.failures} failing"]
    for run in data.failing_runs:
        lines.append(f"  FAIL {run['scenario']} seed {run['seed']}: {reproduce_command(run)}")
    for scenario, seed in data.flaky_seeds:
        lines.append(f"  FLAKY {scenario} seed {seed}")
    for bad in data.invalid:
        lines.append(f"  INVALID {bad.error}")
    lines.append(f"report: {result.paths.get('index.html', result.out_dir)}")
    return lines


def format_console(result: ReportResult, width: int = 120, color: bool = False) -> str:
    """The per-scenario table plus failing/flaky/invalid runs, as a string."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, no_color=not color, highlight=False)
    console.print(_scenario_table(result))
    for line in _footer_lines(result):
        # markup=False: scenario names and paths may contain [brackets].
        console.print(line, markup=False, soft_wrap=True)
    return buf.getvalue()
