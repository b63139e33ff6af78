"""kafkasim's command line (`kafkasim --help`, `kafkasim COMMAND --help` for every option and
its default).

  kafkasim run SCENARIO --seed N [--out DIR]       one simulated run; exit 0 iff its checks hold
  kafkasim sweep SCENARIO_OR_DIR --seeds A-B --jobs J [--out DIR] [--spark [--master URL]]
                                                    many runs, progress line, JUnit XML
  kafkasim run SCENARIO --client NAME              a third-party client as the workload (live world)
  kafkasim matrix [DIR] [--clients a,b] [--out DIR] [--show]
                                                    every client x fault scenario (live), matrix.json
  kafkasim replay RUN_JSON                          re-run; verify the trace hash bit for bit
  kafkasim shrink RUN_JSON                          minimise a failing run to a new scenario file
  kafkasim serve --port P --log-dir DIR [--zookeeper HOST:PORT] [--broker-id N] [--config K=V ...]
                                                    the same broker on real sockets and disks
  kafkasim serve --sim --brokers N [--scenario FILE] [--seed S] [--port-base P] [--control-port P]
                                                    the simulated cluster on real 127.0.0.1 ports
  kafkasim cluster up --brokers N --dir DIR [--config K=V ...] | cluster down --dir DIR
                                                    real ZooKeeper + N `kafkasim serve` (real/cluster)
  kafkasim cluster kill|restart|pause|resume|partition|heal --broker N [--duration-ms D] --dir DIR
                                                    faults on that cluster, through its control plane
  kafkasim fault add JSON | list | history | heal [ID] | kinds | nodes --control HOST:PORT (or --dir DIR)
                                                    the fault control plane of any running cluster
  kafkasim load --bootstrap HOST:PORT [--topic T]   the workload's producer + consumer, for real
  kafkasim scram-credential --zookeeper HOST:PORT --user U --password P [--mechanism M]
                                                    a SCRAM credential in ZooKeeper (kafka-configs)
  kafkasim report REPORTS_DIR [--out DIR] [--master URL]
                                                    PySpark summary (table + HTML) of run reports

Exit codes: 0 success, 1 a check failed (a violation, a replay that diverged), 2 a usage error
(a bad scenario, a missing file, a port in use: one line on stderr, no traceback), 130
interrupted (Ctrl-C or SIGTERM: the unfinished run writes no verdict).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from types import FrameType
from typing import Any

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# serve and cluster handle SIGINT/SIGTERM themselves (a broker shuts down cleanly).
INTERRUPTIBLE = ("run", "sweep", "replay", "shrink", "report", "load", "matrix")
JAVA_FIX = "apt install openjdk-17-jre-headless, or set JAVA_HOME"  # kafkasim.report.prereq says it


BUGGIFY_HELP = ("BUGGIFY on (as [buggify] enabled = true): seeded rare-but-legal code paths "
                "(kafkasim/runtime/buggify.py); run.json records the points enabled and fired")


class UsageError(Exception):
    """A user's mistake: printed as one line, exit 2."""


def _seeded_bugs() -> frozenset[str]:
    """Test-only: the seeded bugs KAFKASIM_SEEDED_BUGS names, for the worlds this command builds."""
    from kafkasim.harness.runner import seeded_bugs_from_env

    try:
        return seeded_bugs_from_env(os.environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _out_dir(path: str, what: str) -> str:
    """Create the directory a command writes to, or say why it cannot be (before any work)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot create it: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: not writable")
    return path


def _load_scenario(path: str) -> Any:
    from kafkasim.harness.scenario import ScenarioError, load_scenario

    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def _load_run_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            run = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such run.json (runs write reports/runs/<scenario>/seed-<N>/run.json)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable run.json: {exc}") from None
    if not isinstance(run, dict) or "seed" not in run or "scenario_path" not in run:
        raise UsageError(f"{path}: not a kafkasim run.json (no seed / scenario_path)")
    if run.get("world") == "live":  # real clients' bytes and timing are not recorded: nothing to replay
        raise UsageError(f"{path}: a live-world run (real clients) is not replayable bit for bit; run it again "
                         f"with: {run.get('repro') or 'kafkasim run SCENARIO --client NAME'}")
    return run


def _cmd_run(args: argparse.Namespace) -> int:
    from kafkasim.harness.host import wall_seconds
    from kafkasim.harness.inject import fired_summary
    from kafkasim.harness.progress import ProgressLine, run_text
    from kafkasim.harness.repro import repro_command
    from kafkasim.harness.runner import default_out_dir, run_scenario
    from kafkasim.harness.scenario import with_buggify

    scenario = _load_scenario(args.scenario)
    if args.client or scenario.client:
        return _cmd_run_client(args, scenario, args.client or scenario.client)
    scenario = with_buggify(scenario) if args.buggify else scenario
    bugs = _seeded_bugs()
    out = _out_dir(args.out or default_out_dir(scenario, args.seed), "--out")
    line = ProgressLine(sys.stderr, wall_seconds)
    try:
        result = run_scenario(scenario, args.seed, out, bugs, progress=lambda now, end: line.show(
            run_text(scenario.name, args.seed, now, end, line.elapsed())))
    finally:
        line.close()
    run = result.run
    stats = run["stats"]
    print(f"scenario {run['scenario']} seed {run['seed']}: {run['verdict'].upper()}")
    if run.get("seeded_bugs"):
        print(f"  SEEDED BUGS ON: {', '.join(run['seeded_bugs'])} (KAFKASIM_SEEDED_BUGS): not a clean run")
    if run.get("buggify"):
        points = run["buggify"]["points"]
        fired = {name: p["fired"] for name, p in points.items() if p["fired"]}
        print(f"  BUGGIFY on: {sum(p['enabled'] for p in points.values())} of {len(points)} points asked enabled, "
              f"fired: {', '.join(f'{n} x{c}' for n, c in fired.items()) or 'none'}")
    print(f"  acked {stats['acked']}/{stats['produced']}, consumed {stats['consumed']}, "
          f"sim {stats['sim_time_ms'] / 1000:.1f} s in {stats['wall_time_s']:.2f} s wall "
          f"({stats['sim_to_wall_ratio']:.1f}x)")
    print(f"  {fired_summary(run['faults_fired'], len(run['faults']))}")
    for c in run["checks"]:
        if not c["ok"]:
            print(f"  {'expected' if c['expected'] else 'VIOLATION'}: {c['name']} x{c['violations']}")
    print(f"  report: {result.out_dir}/run.json")
    if not result.passed:
        print(f"  reproduce: {repro_command(run)}")
    print(f"trace hash {run['trace_hash']}")
    return 0 if result.passed else 1


def _cmd_run_client(args: argparse.Namespace, scenario: Any, client: str) -> int:
    from kafkasim.harness.client_workload import ClientRunError, run_client_scenario
    from kafkasim.harness.matrix_cli import print_client_run
    from kafkasim.harness.runner import default_out_dir

    if args.buggify:
        raise UsageError("--buggify is for simulated runs; a client workload runs the live world")
    out = _out_dir(args.out or default_out_dir(scenario, args.seed), "--out")
    try:
        result = run_client_scenario(scenario, args.seed, client, out)
    except (ClientRunError, OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print_client_run(result.run, result.out_dir)
    return 0 if result.passed else 1


def _cmd_matrix(args: argparse.Namespace) -> int:
    from kafkasim.harness.matrix_cli import matrix_command, show_matrix

    try:
        if args.show:
            return show_matrix(args.out)
        return matrix_command(args.scenarios, args.clients, args.out, args.seed, args.only_eos, resume=args.resume)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _cmd_sweep(args: argparse.Namespace) -> int:
    from kafkasim.harness.scenario import ScenarioError
    from kafkasim.harness.sweep import parse_seeds, sweep

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        raise UsageError(f"--seeds: {exc}") from None
    if not os.path.exists(args.scenarios):
        raise UsageError(f"{args.scenarios}: no such scenario file or directory")
    bugs = _seeded_bugs()
    _out_dir(args.out, "--out")
    junit = args.junit or f"{args.out}/junit.xml"
    _out_dir(os.path.dirname(os.path.abspath(junit)), "--junit's directory")
    master = _spark_master(args)
    try:
        results = sweep(args.scenarios, seeds, args.jobs, args.out, junit, bugs, master, args.buggify)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    failing = [r for r in results if r["verdict"] != "pass"]
    expected = sorted({e for r in results for e in r["expected"]})
    print(f"{len(results)} runs, {len(results) - len(failing)} passed, {len(failing)} failed"
          + (f"; expected anomalies seen: {', '.join(expected)}" if expected else ""))
    for r in failing:
        print(f"  FAIL {r['scenario']} seed {r['seed']}: {', '.join(r['violations'])}  ({r['repro']})")
    return 1 if failing else 0


def _spark_master(args: argparse.Namespace) -> str | None:
    """sweep's Spark master (None: local processes); PySpark and Java checked before any run."""
    if not args.spark:
        if args.master:
            raise UsageError("sweep: --master needs --spark")
        return None
    _need_spark("sweep")
    _quiet_interrupt_logs()
    return str(args.master or "local[*]")


def _need_spark(command: str) -> None:
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise UsageError(f"{command}: PySpark is not installed (pip install -e '.[report]')")
    from kafkasim.report.prereq import find_java

    if find_java(dict(os.environ)) is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java" if os.environ.get("JAVA_HOME") \
            else "no java on PATH"
        raise UsageError(f"{command}: PySpark needs Java 17 ({where}): {JAVA_FIX}")


def _cmd_replay(args: argparse.Namespace) -> int:
    from kafkasim.harness.replay import replay
    from kafkasim.harness.scenario import ScenarioError

    run = _load_run_json(args.run_json)
    try:
        res = replay(args.run_json, run, on_note=lambda msg: print(msg, file=sys.stderr))
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
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
    from kafkasim.harness.scenario import ScenarioError
    from kafkasim.harness.shrink import shrink, size

    run = _load_run_json(args.run_json)
    if args.out:
        _out_dir(os.path.dirname(os.path.abspath(args.out)), "--out's directory")
    try:
        res = shrink(args.run_json, args.out, args.max_runs, on_step=lambda msg: print(f"  {msg}", flush=True),
                     run=run, on_note=lambda msg: print(msg, file=sys.stderr))
    except (ScenarioError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(f"shrunk in {res.runs} runs: size {size(res.original)} -> {size(res.shrunk)} "
          f"(faults {len(res.original.faults)} -> {len(res.shrunk.faults)}, "
          f"messages {res.original.producer.messages} -> {res.shrunk.producer.messages}); "
          f"still fails: {', '.join(res.violations)}")
    print(f"wrote {res.path}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.connection_quotas import parse_overrides
    from kafkasim.config import UnknownConfigError
    from kafkasim.config.types import ConfigValueError
    from kafkasim.runtime.real.net import TlsConfigError
    from kafkasim.serve import serve

    configs = dict(kv.split("=", 1) for kv in args.config)
    try:
        # names and values checked before anything starts
        parse_overrides(BrokerConfig.from_properties(configs).max_connections_per_ip_overrides)
    except (UnknownConfigError, ConfigValueError) as exc:
        raise UsageError(f"serve: --config: {exc}") from None
    if args.sim:
        return _cmd_serve_sim(args, configs)
    if not args.log_dir:
        raise UsageError("serve: --log-dir is required (or --sim for the simulated cluster)")
    bugs = _seeded_bugs()
    try:
        return serve(args.port, args.log_dir, args.zookeeper, args.broker_id, args.host, args.trace, configs, bugs,
                     control_port=_control_port(args.control_port, default=None))
    except TlsConfigError as exc:   # a listener's keystore or truststore that does not load
        raise UsageError(f"serve: {exc}") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"serve: {args.host}:{args.port} is already in use (another broker? "
                             f"choose a free --port)") from None
        if exc.errno in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EROFS):
            raise UsageError(f"serve: {exc.filename or args.log_dir}: {exc.strerror}") from None
        raise


def _control_port(given: int | None, default: int | None) -> int | None:
    """--control-port: None (not given) -> the world's default; -1 -> no control plane."""
    if given is None:
        return default
    return None if given < 0 else given


def _cmd_serve_sim(args: argparse.Namespace, configs: dict[str, str]) -> int:
    from kafkasim.config import UnknownConfigError
    from kafkasim.config.types import ConfigValueError
    from kafkasim.harness.live import LiveOptions, serve_sim

    if args.brokers is not None and args.brokers < 1:
        raise UsageError(f"serve --sim: --brokers must be >= 1, not {args.brokers}")
    opts = LiveOptions(brokers=args.brokers or 0, seed=args.seed, scenario_path=args.scenario,
                       port_base=args.port_base, configs=configs, out_dir=args.out or "",
                       control_port=_control_port(args.control_port, default=0))
    try:
        return serve_sim(opts)
    except (ValueError, UnknownConfigError, ConfigValueError) as exc:  # ScenarioError is a ValueError
        raise UsageError(f"serve --sim: {exc}") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"serve --sim: a broker port from --port-base {args.port_base} or --control-port "
                             f"{args.control_port or 0} is in use (choose other ports)") from None
        raise


def _cmd_cluster(args: argparse.Namespace) -> int:
    """real/cluster/cluster.py is part of the real-world kit (it starts processes), loaded by path."""
    import importlib.util
    from pathlib import Path

    if args.action not in ("up", "down", "control"):
        return _cluster_fault(args)
    script = Path(__file__).resolve().parents[1] / "real" / "cluster" / "cluster.py"
    if not script.exists():
        raise UsageError(f"{script} missing (the cluster launcher ships with the repository)")
    spec = importlib.util.spec_from_file_location("kafkasim_real_cluster", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kafkasim_real_cluster"] = mod
    spec.loader.exec_module(mod)
    return int(mod.run(args.action, args.dir, args.brokers, args.config))


CLUSTER_FAULTS = {"kill": "crash", "restart": "restart", "pause": "pause", "partition": "isolate"}


def _cluster_fault(args: argparse.Namespace) -> int:
    """kill|restart|pause|partition --broker N: one fault spec to the cluster's control plane;
    resume|heal: heal the active faults on that broker (pause faults only, for resume)."""
    from kafkasim.runtime.real.control_client import ControlClient, ControlError

    client = ControlClient(_control_address(None, args.dir))
    target = None if args.broker is None else (f"broker-{args.broker}" if args.broker.isdigit() else args.broker)
    try:
        if args.action in CLUSTER_FAULTS:
            if target is None:
                raise UsageError(f"cluster {args.action}: --broker N (or a role: controller, leader:T-P) is required")
            spec: dict[str, Any] = {"kind": CLUSTER_FAULTS[args.action], "targets": [target]}
            if args.action == "kill":
                spec["mode"] = "kill"
            if args.duration_ms is not None:
                spec["duration_ms"] = args.duration_ms
            print(json.dumps(client.add(spec), sort_keys=True))
            return 0
        known = sorted(client.nodes())
        if target is not None and target.startswith("broker-") and target not in known:
            raise UsageError(f"cluster {args.action}: no {target} in this cluster ({', '.join(known)})")
        healed = []
        for f in client.active():
            if target is not None and target not in f["targets"] and target not in f["spec"].get("targets", []):
                continue
            if args.action == "resume" and f["spec"].get("kind") != "pause":
                continue
            healed += client.heal(f["id"])
        print(json.dumps({"healed": healed}, sort_keys=True))
        return 0
    except ControlError as exc:
        raise UsageError(f"cluster {args.action}: {exc.message}") from None


def _control_address(control: str | None, directory: str | None) -> str:
    """HOST:PORT given, or read from a cluster's DIR/control (written by `cluster up`)."""
    if control:
        return control
    if not directory:
        raise UsageError("--control HOST:PORT or --dir DIR (of a `kafkasim cluster up`) is required")
    path = os.path.join(directory, "control")
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        raise UsageError(f"{path}: no control plane recorded (is a cluster up in {directory}?)") from None


def _cmd_fault(args: argparse.Namespace) -> int:
    from kafkasim.runtime.real.control_client import ControlClient, ControlError

    client = ControlClient(_control_address(args.control, args.dir))
    try:
        if args.action == "add":
            if not args.arg:
                raise UsageError("fault add: a fault spec as JSON, e.g. "
                                 "'{\"kind\": \"request_error\", \"api_key\": 0, \"error_code\": 6, \"count\": 5}'")
            try:
                spec = json.loads(args.arg)
            except json.JSONDecodeError as exc:
                raise UsageError(f"fault add: not JSON: {exc}") from None
            answer: Any = client.add(spec)
        elif args.action == "list":
            answer = client.active()
        elif args.action == "history":
            answer = client.history()
        elif args.action == "heal":
            answer = client.heal(args.arg)
        elif args.action == "kinds":
            answer = {"world": client.world(), "kinds": client.kinds()}
        else:
            answer = client.nodes()
    except ControlError as exc:
        raise UsageError(f"fault {args.action}: {exc.message}" + (f" (HTTP {exc.status})" if exc.status else "")) \
            from None
    print(json.dumps(answer, indent=2, sort_keys=True))
    return 0


def _cmd_load(args: argparse.Namespace) -> int:
    from kafkasim.harness.load import fresh_topic, load

    topic = args.topic or fresh_topic()
    try:
        summary = load(args.bootstrap, topic, args.messages, args.rate, args.acks, args.seed)
    except OSError as exc:
        raise UsageError(f"load: cannot reach {args.bootstrap}: {exc.strerror or exc}") from None
    print(json.dumps({**summary, "topic": topic}, indent=2, sort_keys=True))
    return 0 if summary["lost"] == 0 and summary["duplicates"] == 0 else 1


def _cmd_scram_credential(args: argparse.Namespace) -> int:
    """kafka-configs --zookeeper Z --alter --add-config 'MECH=[iterations=N,password=P]'
    --entity-type users --entity-name USER: the credential brokers then verify SCRAM logins with."""
    from kafkasim.broker.security.credentials import add_scram_credential, check_scram_request, scram_salt
    from kafkasim.runtime.api import CoordinationError
    from kafkasim.runtime.real.world import RealNode, run

    problem = check_scram_request(args.user, args.mechanism, args.iterations)
    if problem is not None:
        raise UsageError(f"scram-credential: {problem}")

    async def main() -> str:
        node = RealNode("kafkasim-scram-credential", os.getcwd(), zookeeper=args.zookeeper)
        zk = await node.coordination.connect(10_000)
        try:
            return await add_scram_credential(zk, args.user, args.mechanism, args.password, args.iterations,
                                              scram_salt(node.rng("scram-salt")))
        finally:
            await zk.close()
    try:
        path = run(main())
    except CoordinationError as exc:
        raise UsageError(f"scram-credential: {exc or type(exc).__name__} (ZooKeeper {args.zookeeper})") from None
    print(f"Completed updating config for entity: user-principal '{args.user}' ({path})")
    return 0


def _quiet_interrupt_logs() -> None:
    """py4j logs a Ctrl-C that lands in a JVM call as an ERROR with its traceback (through the
    root logger, configuring it on first use); keep every other error, drop those."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.ERROR)
    handler.addFilter(lambda rec: not (rec.exc_info and _from_interrupt(rec.exc_info[1])))
    logging.getLogger().addHandler(handler)


def _from_interrupt(exc: BaseException | None) -> bool:
    """Ctrl-C inside a JVM call, or py4j's next call failing on the socket the interrupted one
    left half-read ("reentrant call inside <_io.BufferedReader>"), anywhere in the chain."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, RuntimeError) and "reentrant call" in str(exc)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _cmd_report(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.reports_dir):
        raise UsageError(f"report: reports directory {args.reports_dir} does not exist (runs write to "
                         f"reports/ by default: kafkasim run SCENARIO, kafkasim sweep DIR)")
    if args.out:
        _out_dir(args.out, "report: --out")
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise UsageError("report: PySpark is not installed (pip install -e '.[report]')")
    from kafkasim.report.command import report_command

    _quiet_interrupt_logs()
    return report_command(args.reports_dir, args.out, args.master, os.environ)  # checks Java (17) first


class _Version(argparse.Action):
    """--version: the package version and git commit (asked only when wanted: it runs git)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from kafkasim.harness.host import code_version

        print(f"kafkasim {code_version()}")
        parser.exit()


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default."""


def _sub(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help, formatter_class=_Help)
    return p


def _add_sim_commands(sub: Any) -> None:
    r = _sub(sub, "run", "run one scenario in the simulated world")
    r.add_argument("scenario", help="scenario file (TOML, see scenarios/README.md)")
    r.add_argument("--seed", type=int, default=1, help="root seed: the run is a function of it")
    r.add_argument("--out", help="report directory (default: reports/runs/<scenario>/seed-<N>)")
    r.add_argument("--buggify", action="store_true", help=BUGGIFY_HELP)
    r.add_argument("--client", help="the workload is this third-party client's driver (real/clients/), run against "
                                    "the simulated cluster on real sockets (overrides [workload] client; default: "
                                    "the scenario's, else kafkasim's own simulated client)")
    r.set_defaults(fn=_cmd_run)
    mx = _sub(sub, "matrix", "every client driver x the fault scenarios (+ the exactly-once row): runs, matrix.json")
    mx.add_argument("scenarios", nargs="?", default="scenarios/matrix", help="a folder of client scenarios (or one)")
    mx.add_argument("--clients", default="all", help="comma list of drivers (real/clients/), or all")
    mx.add_argument("--out", default="reports/matrix", help="where the runs and matrix.json go")
    mx.add_argument("--seed", type=int, default=1, help="the cluster's seed for every cell")
    mx.add_argument("--only-eos", action="store_true", help="only the exactly-once row")
    mx.add_argument("--resume", action="store_true", help="keep the cells OUT already has a run.json for (an "
                                                          "interrupted matrix), run the rest")
    mx.add_argument("--show", action="store_true", help="run nothing: print the table and measurements of "
                                                        "OUT/matrix.json (an earlier or running matrix)")
    mx.set_defaults(fn=_cmd_matrix)
    sw = _sub(sub, "sweep", "run scenarios over many seeds in local processes (or on Spark)")
    sw.add_argument("scenarios", help="a scenario file or a directory of them")
    sw.add_argument("--seeds", default="1-20", help="N, A-B or a comma list of those")
    sw.add_argument("--jobs", type=int, default=2, help="worker processes (1: run in this process; "
                                                       "with --spark, Spark's cores decide)")
    sw.add_argument("--out", default="reports", help="reports directory (runs go to OUT/runs/...)")
    sw.add_argument("--junit", help="JUnit XML path (default: OUT/junit.xml)")
    sw.add_argument("--buggify", action="store_true", help=BUGGIFY_HELP)
    sw.add_argument("--spark", action="store_true",
                    help="run each (scenario, seed) as a Spark task instead (needs PySpark and Java)")
    sw.add_argument("--master", help="with --spark: a Spark master URL, e.g. spark://HOST:PORT, yarn, "
                                     "k8s://https://HOST:PORT (default: local[*], this machine's cores)")
    sw.set_defaults(fn=_cmd_sweep)
    rp = _sub(sub, "replay", "re-run a recorded run (from its stored scenario text) and verify its trace hash")
    rp.add_argument("run_json", help="the run's run.json")
    rp.set_defaults(fn=_cmd_replay)
    sh = _sub(sub, "shrink", "minimise a failing run's scenario; writes a new scenario file")
    sh.add_argument("run_json", help="the failing run's run.json")
    sh.add_argument("--out", help="scenario file to write (default: <run dir>/shrunk.toml)")
    sh.add_argument("--max-runs", type=int, default=200, help="give up after this many trial runs")
    sh.set_defaults(fn=_cmd_shrink)


def _add_real_commands(sub: Any) -> None:
    s = _sub(sub, "serve", "run a broker on real sockets and disk")
    s.add_argument("--port", type=int, default=9092, help="listener port (0: any free port)")
    s.add_argument("--host", default="127.0.0.1", help="listener address")
    s.add_argument("--log-dir", help="where the partition logs go (default: none; required without --sim)")
    s.add_argument("--zookeeper", help="HOST:PORT of a real ZooKeeper (default: an embedded store)")
    s.add_argument("--broker-id", type=int, default=0, help="broker.id")
    s.add_argument("--trace", help="write the broker's trace (JSON lines) to this file (default: none)")
    s.add_argument("--control-port", type=int,
                   help="serve the fault control plane (HTTP/JSON) on 127.0.0.1:PORT (0: any free port, printed; "
                        "-1: none); default: none for a real broker, a free port with --sim")
    s.add_argument("--config", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                   help="a broker config by its server.properties name (repeatable), e.g. "
                        "group.initial.rebalance.delay.ms=0")
    s.add_argument("--sim", action="store_true",
                   help="the simulated cluster paced to the wall clock, each broker on a real 127.0.0.1 port")
    s.add_argument("--brokers", type=int, help="--sim: number of brokers (default 1, or the scenario's)")
    s.add_argument("--scenario", help="--sim: a scenario TOML: its cluster, topics and [[faults]] timeline "
                        "(default: none, an empty cluster)")
    s.add_argument("--seed", type=int, default=1, help="--sim: the world's seed (default 1)")
    s.add_argument("--port-base", type=int, default=0, help="--sim: broker i on port P+i (default: free ports)")
    s.add_argument("--out", help="--sim: where run.json and trace.jsonl go (default reports/live/<name>-seed-<S>)")
    s.set_defaults(fn=_cmd_serve)
    cl = _sub(sub, "cluster", "start or stop a real cluster: ZooKeeper + N kafkasim serve")
    cl.add_argument("action", choices=["up", "down", "kill", "restart", "pause", "resume", "partition", "heal",
                                       "control"],
                    help="up: start; down: stop what up started; kill (SIGKILL) | restart | pause (SIGSTOP) | "
                         "resume (SIGCONT) | partition (cut from the other brokers) | heal --broker N: faults "
                         "through the cluster's control plane; control: serve that plane (up starts it)")
    cl.add_argument("--broker", help="kill/restart/pause/resume/partition/heal: a broker id, or a role "
                                     "(controller, leader:TOPIC-PARTITION, coordinator:group:G); default: none, "
                                     "required by those actions")
    cl.add_argument("--duration-ms", type=float, help="undo the fault after so long (default: until healed)")
    cl.add_argument("--dir", required=True, help="where the cluster's logs, pids and env go (required)")
    cl.add_argument("--brokers", type=int, default=3, help="number of brokers")
    cl.add_argument("--config", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                    help="a broker config for every broker (repeatable)")
    cl.set_defaults(fn=_cmd_cluster)
    ft = _sub(sub, "fault", "inject, list and heal faults through a running cluster's control plane")
    ft.add_argument("action", choices=["add", "list", "history", "heal", "kinds", "nodes"],
                    help="add JSON | list (active) | history | heal [ID] (all without ID) | kinds | nodes")
    ft.add_argument("arg", nargs="?", help="add: the fault spec (JSON); heal: a fault id")
    ft.add_argument("--control", help="HOST:PORT of the control plane (serve --control-port, serve --sim); "
                                       "default: none, then --dir is required")
    ft.add_argument("--dir", help="instead of --control: a `kafkasim cluster up` directory (default: none)")
    ft.set_defaults(fn=_cmd_fault)
    ld = _sub(sub, "load", "run the workload producer + consumer against a real broker")
    ld.add_argument("--bootstrap", required=True, help="HOST:PORT of a broker (required)")
    ld.add_argument("--topic", help="topic to use (default: a fresh kafkasim-load-<suffix> each run, so "
                                    "an earlier run's records are not read back as duplicates)")
    ld.add_argument("--messages", type=int, default=1000, help="messages to produce")
    ld.add_argument("--rate", type=float, default=1000.0, help="messages per second")
    ld.add_argument("--acks", default="all", choices=["all", "1", "0"], help="producer acks")
    ld.add_argument("--seed", type=int, default=1, help="seed of the workload's keys and values")
    ld.set_defaults(fn=_cmd_load)
    sc = _sub(sub, "scram-credential", "add a user's SCRAM credential in ZooKeeper before the brokers start, as "
                                       "kafka-configs --zookeeper ... --add-config 'SCRAM-SHA-512=[password=...]'")
    sc.add_argument("--zookeeper", required=True, help="HOST:PORT of the real ZooKeeper (required)")
    sc.add_argument("--user", required=True, help="the user (kafka-configs' --entity-name; required)")
    sc.add_argument("--password", required=True, help="the user's password (required)")
    sc.add_argument("--mechanism", default="SCRAM-SHA-512", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"],
                    help="the mechanism")
    sc.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (at least 4096)")
    sc.set_defaults(fn=_cmd_scram_credential)
    rep = _sub(sub, "report", "aggregate run reports with PySpark (needs Java)")
    rep.add_argument("reports_dir", help="a reports directory (every run.json under it)")
    rep.add_argument("--out", help="output directory (default: REPORTS_DIR/summary)")
    rep.add_argument("--master", default="local[*]", help="Spark master URL")
    rep.set_defaults(fn=_cmd_report)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kafkasim", description="Kafka-compatible broker, real or simulated",
                                formatter_class=_Help)
    p.add_argument("--version", action=_Version, help="print the version (and git commit) and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_sim_commands(sub)
    _add_real_commands(sub)
    return p


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    """SIGINT and SIGTERM both raise KeyboardInterrupt in the main thread (once: a second signal
    while stopping is ignored, so the cleanup — terminating sweep workers — is not cut short)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _kill_descendants() -> None:
    """After an interrupt: no process this command started outlives it (PySpark's JVM, started
    before Python could hold its handle, or a sweep worker past its SIGTERM). multiprocessing's
    resource tracker is spared: it exits by itself when this process does, unlinking the pool's
    semaphores; killed, it leaks them, and this process's exit would start a new tracker (with the
    terminal's stderr) only to be told to forget semaphores it never saw — KeyError tracebacks."""
    spared = _resource_tracker_pid()
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo, found = [os.getpid()], []
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    for pid in found:
        if pid == spared:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _resource_tracker_pid() -> int | None:
    """The pid of the resource tracker this process started, if it started one."""
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    pid = getattr(getattr(tracker, "_resource_tracker", None), "_pid", None)
    return pid if isinstance(pid, int) else None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in INTERRUPTIBLE:
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args.fn(args))
    except UsageError as exc:
        print(f"kafkasim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _kill_descendants()
        what = "no report written" if args.command == "report" else "no verdict written for the unfinished run"
        print(f"\nkafkasim {args.command}: interrupted; {what}", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
