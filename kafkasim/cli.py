"""kafkasim's command line.

  kafkasim run SCENARIO --seed N [--out DIR]       one simulated run; exit 0 iff its checks hold
  kafkasim sweep SCENARIO_OR_DIR --seeds A-B --jobs J [--out DIR]
                                                    many runs, progress bar, JUnit XML
  kafkasim replay RUN_JSON                          re-run; verify the trace hash bit for bit
  kafkasim shrink RUN_JSON                          minimise a failing run to a new scenario file
  kafkasim serve --port P --log-dir DIR [--zookeeper HOST:PORT] [--broker-id N] [--config K=V ...]
                                                    the same broker on real sockets and disks
  kafkasim cluster up --brokers N --dir DIR [--config K=V ...] | cluster down --dir DIR
                                                    real ZooKeeper + N `kafkasim serve` (real/cluster)
  kafkasim load --bootstrap HOST:PORT --topic T     the workload's producer + consumer, for real
  kafkasim report REPORTS_DIR [--out DIR] [--master URL]
                                                    PySpark summary (table + HTML) of run reports
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _seeded_bugs() -> frozenset[str]:
    """Test-only: the seeded bugs KAFKASIM_SEEDED_BUGS names, for the worlds this command builds."""
    from kafkasim.harness.runner import seeded_bugs_from_env

    return seeded_bugs_from_env(os.environ)


def _cmd_run(args: argparse.Namespace) -> int:
    from kafkasim.harness.runner import run_scenario
    from kafkasim.harness.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(args.scenario)
        bugs = _seeded_bugs()
    except (ScenarioError, ValueError) as exc:
        print(f"kafkasim: {exc}", file=sys.stderr)
        return 2
    result = run_scenario(scenario, args.seed, args.out, bugs)
    run = result.run
    stats = run["stats"]
    print(f"scenario {run['scenario']} seed {run['seed']}: {run['verdict'].upper()}")
    if run.get("seeded_bugs"):
        print(f"  SEEDED BUGS ON: {', '.join(run['seeded_bugs'])} (KAFKASIM_SEEDED_BUGS): not a clean run")
    print(f"  acked {stats['acked']}/{stats['produced']}, consumed {stats['consumed']}, "
          f"sim {stats['sim_time_ms'] / 1000:.1f} s in {stats['wall_time_s']:.2f} s wall "
          f"({stats['sim_to_wall_ratio']:.1f}x)")
    for c in run["checks"]:
        if not c["ok"]:
            print(f"  {'expected' if c['expected'] else 'VIOLATION'}: {c['name']} x{c['violations']}")
    print(f"  report: {result.out_dir}/run.json")
    print(f"trace hash {run['trace_hash']}")
    return 0 if result.passed else 1


def _cmd_sweep(args: argparse.Namespace) -> int:
    from kafkasim.harness.scenario import ScenarioError
    from kafkasim.harness.sweep import parse_seeds, sweep

    try:
        seeds = parse_seeds(args.seeds)
        results = sweep(args.scenarios, seeds, args.jobs, args.out, args.junit or f"{args.out}/junit.xml",
                        _seeded_bugs())
    except (ScenarioError, ValueError) as exc:
        print(f"kafkasim: {exc}", file=sys.stderr)
        return 2
    failing = [r for r in results if r["verdict"] != "pass"]
    expected = sorted({e for r in results for e in r["expected"]})
    print(f"{len(results)} runs, {len(results) - len(failing)} passed, {len(failing)} failed"
          + (f"; expected anomalies seen: {', '.join(expected)}" if expected else ""))
    for r in failing:
        print(f"  FAIL {r['scenario']} seed {r['seed']}: {', '.join(r['violations'])}  "
              f"(kafkasim run {r['path']} --seed {r['seed']})")
    return 1 if failing else 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from kafkasim.harness.replay import replay

    res = replay(args.run_json)
    if res.identical:
        print(f"replay identical: trace hash {res.replay_hash}")
        return 0
    print(f"replay DIVERGED: recorded {res.original_hash}, replayed {res.replay_hash}")
    if res.first_divergence:
        line, a, b = res.first_divergence
        print(f"first diverging event, trace line {line}:\n  recorded: {a}\n  replayed: {b}")
    return 1


def _key_value(text: str) -> str:
    if "=" not in text or not text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return text


def _cmd_shrink(args: argparse.Namespace) -> int:
    from kafkasim.harness.shrink import shrink, size

    res = shrink(args.run_json, args.out, args.max_runs, on_step=lambda msg: print(f"  {msg}", flush=True))
    print(f"shrunk in {res.runs} runs: size {size(res.original)} -> {size(res.shrunk)} "
          f"(faults {len(res.original.faults)} -> {len(res.shrunk.faults)}, "
          f"messages {res.original.producer.messages} -> {res.shrunk.producer.messages}); "
          f"still fails: {', '.join(res.violations)}")
    print(f"wrote {res.path}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.config import UnknownConfigError
    from kafkasim.config.types import ConfigValueError
    from kafkasim.serve import serve

    configs = dict(kv.split("=", 1) for kv in args.config)
    try:
        BrokerConfig.from_properties(configs)  # names and values checked before anything starts
    except (UnknownConfigError, ConfigValueError) as exc:
        print(f"kafkasim serve: --config: {exc}", file=sys.stderr)
        return 2
    return serve(args.port, args.log_dir, args.zookeeper, args.broker_id, args.host, args.trace, configs,
                 _seeded_bugs())


def _cmd_cluster(args: argparse.Namespace) -> int:
    """real/cluster/cluster.py is part of the real-world kit (it starts processes), loaded by path."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "real" / "cluster" / "cluster.py"
    if not script.exists():
        print(f"kafkasim: {script} missing (the cluster launcher ships with the repository)", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("kafkasim_real_cluster", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kafkasim_real_cluster"] = mod
    spec.loader.exec_module(mod)
    return int(mod.run(args.action, args.dir, args.brokers, args.config))


def _cmd_load(args: argparse.Namespace) -> int:
    from kafkasim.harness.load import load

    summary = load(args.bootstrap, args.topic, args.messages, args.rate, args.acks, args.seed)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0 if summary["lost"] == 0 and summary["duplicates"] == 0 else 1


def _cmd_report(args: argparse.Namespace) -> int:
    from kafkasim.report.command import report_command

    return report_command(args.reports_dir, args.out, args.master, os.environ)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafkasim", description="Kafka-compatible broker, real or simulated")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one scenario in the simulated world")
    r.add_argument("scenario")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--out", help="report directory (default reports/runs/<scenario>/seed-<N>)")
    r.set_defaults(fn=_cmd_run)
    sw = sub.add_parser("sweep", help="run scenarios over many seeds in local processes")
    sw.add_argument("scenarios", help="a scenario file or a directory of them")
    sw.add_argument("--seeds", default="1-20", help="N, A-B or a comma list (default 1-20)")
    sw.add_argument("--jobs", type=int, default=2)
    sw.add_argument("--out", default="reports", help="reports directory (runs go to OUT/runs/...)")
    sw.add_argument("--junit", help="JUnit XML path (default OUT/junit.xml)")
    sw.set_defaults(fn=_cmd_sweep)
    rp = sub.add_parser("replay", help="re-run a recorded run and verify its trace hash")
    rp.add_argument("run_json")
    rp.set_defaults(fn=_cmd_replay)
    sh = sub.add_parser("shrink", help="minimise a failing run's scenario; writes a new scenario file")
    sh.add_argument("run_json")
    sh.add_argument("--out", help="scenario file to write (default <run dir>/shrunk.toml)")
    sh.add_argument("--max-runs", type=int, default=200)
    sh.set_defaults(fn=_cmd_shrink)
    s = sub.add_parser("serve", help="run a broker on real sockets and disk")
    s.add_argument("--port", type=int, default=9092)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--log-dir", required=True)
    s.add_argument("--zookeeper", help="HOST:PORT of a real ZooKeeper (default: an embedded store)")
    s.add_argument("--broker-id", type=int, default=0)
    s.add_argument("--trace", help="write the broker's trace (JSON lines) to this file")
    s.add_argument("--config", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                   help="a broker config by its server.properties name (repeatable), e.g. "
                        "group.initial.rebalance.delay.ms=0")
    s.set_defaults(fn=_cmd_serve)
    cl = sub.add_parser("cluster", help="start or stop a real cluster: ZooKeeper + N kafkasim serve")
    cl.add_argument("action", choices=["up", "down"])
    cl.add_argument("--dir", required=True, help="where the cluster's logs, pids and env go")
    cl.add_argument("--brokers", type=int, default=3)
    cl.add_argument("--config", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                    help="a broker config for every broker (repeatable)")
    cl.set_defaults(fn=_cmd_cluster)
    ld = sub.add_parser("load", help="run the workload producer + consumer against a real broker")
    ld.add_argument("--bootstrap", required=True)
    ld.add_argument("--topic", default="kafkasim-load")
    ld.add_argument("--messages", type=int, default=1000)
    ld.add_argument("--rate", type=float, default=1000.0, help="messages per second")
    ld.add_argument("--acks", default="all", choices=["all", "1", "0"])
    ld.add_argument("--seed", type=int, default=1)
    ld.set_defaults(fn=_cmd_load)
    rep = sub.add_parser("report", help="aggregate run reports with PySpark")
    rep.add_argument("reports_dir")
    rep.add_argument("--out")
    rep.add_argument("--master", default="local[*]")
    rep.set_defaults(fn=_cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
