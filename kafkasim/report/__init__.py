"""kafkasim: report — aggregate a reports tree of run.json files with PySpark.

CLI wiring (``kafkasim report REPORTS_DIR [--out DIR] [--master URL]``)::

    from kafkasim.report.console import format_console
    from kafkasim.report.job import run_report

    result = run_report(reports_dir, out_dir=out, master=master)  # -> ReportResult
    print(format_console(result))
    exit_code = 1 if result.failures or result.invalid else 0  # caller's choice

Outputs (default ``<reports_dir>/summary/``): summary.csv (one row per run),
scenarios.csv, anomalies.csv, checks.csv, faults.csv, index.html (the overview:
scenario x seed matrix, tables, plots, links) and runs/<run dir>/index.html +
trace.html per run (timeline and trace excerpt; runpage, runtrace, svg). Nothing
is fetched when a page is opened.  Malformed run.json files are listed as invalid (result.invalid,
console, page) and left out of the tables; ``run_report(..., strict=True)``
raises ``ValueError`` naming the file and key instead.

Modules: schema (run.json contract, validator, Spark StructType), job (Spark
aggregation + file output), html / plots / labels (the overview), runpage /
runtrace / svg (a run's page), console (rich summary), command (the CLI: prereq
checks Java and PySpark first, progress on stderr), jvm (the driver's JVM
options and class-data archive), repro (the reproduce command), model (plain
result dataclasses).  pyspark and matplotlib are imported
lazily, inside the functions that need them, so importing this package (or
console/job) from the CLI costs nothing until a report actually runs.
"""
