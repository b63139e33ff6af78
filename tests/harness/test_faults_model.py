"""The fault model without a cluster: parsing errors name file and key, nemesis expansion is a
function of the seed, the kernel holds a paused node's work and releases it in order, network
cuts of overlapping faults lift independently."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.harness.nemesis import expand, with_concrete_faults
from kafkasim.harness.scenario import ScenarioError, parse_scenario
from kafkasim.harness.shrink import dump_scenario
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim

BASE: dict[str, Any] = {"scenario": {"name": "t"}, "cluster": {"brokers": 3}, "topics": [{"name": "events"}]}


def _scenario(**extra: Any) -> Any:
    return parse_scenario("f.toml", dict(BASE, **extra))


@pytest.mark.parametrize("fault, key, expected", [
    ({"at_ms": 1, "kind": "pause", "targets": ["broker-0"]}, "faults[0].duration_ms", "pause length"),
    ({"at_ms": 1, "kind": "disk", "targets": ["broker-0"], "eio_rate": 2}, "faults[0].eio_rate", "[0, 1.0]"),
    ({"at_ms": 1, "kind": "disk", "targets": ["broker-0"]}, "faults[0]", "at least one of"),
    ({"at_ms": 1, "kind": "disk", "targets": ["b"], "free_bytes": 5}, "faults[0].free_bytes", "enospc = true"),
    ({"at_ms": 1, "kind": "isolate"}, "faults[0].targets", "node names"),
    ({"at_ms": 1, "kind": "zk_expire", "targets": ["b"], "duration_ms": 5}, "faults[0].duration_ms", "only on"),
    ({"at_ms": 1, "kind": "crash", "targets": ["b"], "speed": 5}, "faults[0].speed", "unknown key"),
    ({"at_ms": 1, "kind": "explode"}, "faults[0].kind", "one of"),
])
def test_fault_errors_name_file_and_key(fault: dict[str, Any], key: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        _scenario(faults=[fault])
    msg = str(exc.value)
    assert msg.startswith("f.toml: key '") and f"'{key}'" in msg and expected in msg, msg


@pytest.mark.parametrize("nemesis, key, expected", [
    ({"kind": "crash", "targets": ["broker-0"], "until_ms": 9, "interval_ms": 1}, "nemesis[0].duration_ms", "number"),
    ({"kind": "partition", "targets": ["broker-0"], "until_ms": 9, "interval_ms": 1, "duration_ms": 1},
     "nemesis[0].targets", "at least two"),
    ({"kind": "pause", "targets": ["b"], "from_ms": 9, "until_ms": 5, "interval_ms": 1, "duration_ms": 1},
     "nemesis[0].until_ms", "after from_ms"),
    ({"kind": "meteor", "targets": ["b"]}, "nemesis[0].kind", "one of"),
])
def test_nemesis_errors_name_file_and_key(nemesis: dict[str, Any], key: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        _scenario(nemesis=[nemesis])
    assert f"'{key}'" in str(exc.value) and expected in str(exc.value), str(exc.value)


def test_racks_parse_and_reject_bad_values() -> None:
    assert _scenario(cluster={"brokers": 3, "racks": ["a", "b"]}).racks == ["a", "b"]
    with pytest.raises(ScenarioError, match="cluster.racks"):
        _scenario(cluster={"brokers": 3, "racks": ["a", 1]})


MIXED = [{"kind": "crash", "targets": ["broker-0", "broker-1", "controller"], "from_ms": 1000, "until_ms": 60000,
          "interval_ms": 3000, "duration_ms": 2000},
         {"kind": "partition", "targets": ["broker-0", "broker-1", "broker-2", "zookeeper"], "until_ms": 60000,
          "interval_ms": 4000, "duration_ms": 3000},
         {"kind": "clog", "targets": ["broker-0", "broker-1"], "until_ms": 60000, "interval_ms": 4000,
          "duration_ms": 3000, "extra_ms": 100}]


def test_nemesis_expansion_is_deterministic_per_seed_and_differs_across_seeds() -> None:
    s = _scenario(nemesis=MIXED)
    a, b, c = (([f.describe() for f in expand(s.nemesis, seed)]) for seed in (7, 7, 8))
    assert a == b and a != c
    assert {d["kind"] for d in a} == {"crash", "partition", "clog"}


def test_nemesis_faults_of_one_profile_do_not_overlap_and_end_by_until() -> None:
    s = _scenario(nemesis=MIXED)
    faults = expand(s.nemesis, 3)
    for src in ("nemesis[0]", "nemesis[1]", "nemesis[2]"):
        mine = [f for f in faults if f.source == src]
        assert len(mine) >= 3
        assert all(f.end_ms <= 60000 for f in mine)
        assert all(x.end_ms <= y.at_ms for x, y in zip(mine, mine[1:]))
    parts = [f for f in faults if f.kind == "partition"]
    assert all(f.sides[0] and f.sides[1] and not set(f.sides[0]) & set(f.sides[1]) for f in parts)


def test_concrete_faults_round_trip_through_the_shrink_writer(tmp_path: Any) -> None:
    disk = {"kind": "disk", "targets": ["broker-2"], "until_ms": 20000, "interval_ms": 3000, "duration_ms": 2000,
            "eio_rate": 0.01, "bitflip_rate": 0.001, "slow_fsync_ms": 50}
    s = _scenario(nemesis=MIXED + [disk], cluster={"brokers": 3, "racks": ["a", "b"]})
    concrete = with_concrete_faults(s, 5)
    assert s.nemesis and not s.faults, "the loaded scenario is left alone"
    assert concrete.faults and not concrete.nemesis
    path = tmp_path / "shrunk.toml"
    path.write_text(dump_scenario(concrete))
    import tomllib
    back = parse_scenario(str(path), tomllib.loads(path.read_text()))

    def plain(faults: list[Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in f.describe().items() if k != "source"} for f in faults]

    assert plain(back.faults) == plain(concrete.faults)
    assert {f.kind for f in back.faults} == {"crash", "partition", "clog", "disk"}
    assert back.racks == ["a", "b"]


def test_pause_holds_steps_and_timers_and_releases_them_in_order() -> None:
    world = SimWorld(1)
    node = world.add_node("n")
    rt = node.runtime
    seen: list[tuple[str, float]] = []

    async def ticker() -> None:
        for i in range(3):
            await rt.sleep(100)
            seen.append((f"tick{i}", world.now_ms()))

    rt.spawn(ticker())
    rt.call_later(150, lambda: seen.append(("timer", world.now_ms())))
    world.kernel.call_later(node.owner, 0, lambda: None)
    world.run(50)
    node.pause()
    world.run(1000)
    assert seen == [], "a paused node runs nothing"
    node.resume()
    world.run(1001)
    # what came due while paused runs at the resume, in the order it came due; the rest follows
    assert seen[:2] == [("tick0", 1000.0), ("timer", 1000.0)]
    world.run(2000)
    assert [s for s, _ in seen] == ["tick0", "timer", "tick1", "tick2"]
    assert seen[2][1] == 1100.0


def test_crash_of_a_paused_node_drops_its_held_work() -> None:
    world = SimWorld(1)
    node = world.add_node("n")
    seen: list[str] = []
    node.runtime.call_later(10, lambda: seen.append("timer"))
    node.pause()
    world.run(100)
    node.crash("kill")
    node.resume()
    world.run(200)
    assert seen == [] and not node.paused


def test_overlapping_cuts_lift_independently() -> None:
    world = SimWorld(1)
    net = world.net
    net.partition(["a"], ["b", "c"])
    net.block("a", "b")
    net.unpartition(["a"], ["b", "c"])
    assert not net.path_up("a", "b"), "the block still holds"
    assert net.path_up("b", "a") and net.path_up("a", "c")
    net.unblock("a", "b")
    assert net.path_up("a", "b")
