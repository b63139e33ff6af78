"""What `kafkasim run --client` and `kafkasim matrix` print."""

from __future__ import annotations

from typing import Any


def print_client_run(run: dict[str, Any], out_dir: str, say: Any = print) -> None:
    st, c = run["stats"], run["client"]
    say(f"scenario {run['scenario']} seed {run['seed']} client {c['client']} {c['version']}: {run['verdict'].upper()}")
    say(f"  settings: acks={c['acks']} idempotent={c['idempotent']} ({c['idempotence_source']})")
    say(f"  acked {st['acked']}/{st['produced']}, consumed {st['consumed']}, commits {st['commits']}, "
        f"{st['wall_time_s']:.1f} s wall (live world)")
    lag, ctl = st["pacing_lag_ms"], st.get("control_latency_ms")
    say(f"  pacing lag p50 {lag['p50_ms']} ms p99 {lag['p99_ms']} ms; control-plane call->acting "
        + (f"p50 {ctl['p50']} ms p99 {ctl['p99']} ms over {ctl['n']} faults" if ctl else "n/a (no fault acted)"))
    for f in run["faults_fired"]:
        if "error" in f:
            say(f"  fault at {f['at_ms']:.0f} ms {f['spec'].get('kind')}: NOT APPLIED: {f['error']}")
    for c2 in run["checks"]:
        if not c2["ok"]:
            say(f"  {'expected' if c2['expected'] else 'VIOLATION'}: {c2['name']} x{c2['violations']}")
    for e in run["client_errors"][:5]:
        say(f"  client error x{e['times']}: {e['error'][:160]}")
    say(f"  report: {out_dir}/run.json")
