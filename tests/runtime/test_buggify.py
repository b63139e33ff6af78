"""BUGGIFY in the seam (kafkasim/runtime/buggify.py): the real world never fires; the simulated
world fires only when the run turns it on, from per-point streams split off the seed (the same
seed fires the same points the same number of times; nothing is drawn when it is off); the
`[buggify]` table parses, refuses bad values, dumps and reloads; a run's repro says --buggify."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kafkasim.harness.repro import repro_command
from kafkasim.harness.scenario import ScenarioError, parse_scenario, with_buggify
from kafkasim.harness.shrink import dump_scenario
from kafkasim.runtime.buggify import FIRE_RANGE, Buggify, BuggifySpec
from kafkasim.runtime.real.world import JsonlTrace, RealNode
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.unit

POINTS = [f"point-{i}" for i in range(40)]
ON = BuggifySpec(enabled=True)
BASE = {"scenario": {"name": "t"}, "topics": [{"name": "events"}]}


def _draws(seed: int, spec: BuggifySpec, asks: int = 50) -> dict[str, list[bool]]:
    b = Buggify(seed, spec)
    return {name: [b.ask(name) for _ in range(asks)] for name in POINTS}


def test_the_real_world_never_fires(tmp_path: Path) -> None:
    out = io.StringIO()
    node = RealNode("b", str(tmp_path), trace=JsonlTrace(out))
    assert not any(node.buggify(name) for name in POINTS for _ in range(200))
    assert out.getvalue() == ""


def test_same_seed_same_firings_and_seeds_differ() -> None:
    a, b = _draws(7, ON), _draws(7, ON)
    assert a == b
    assert a != _draws(8, ON)


def test_a_point_is_enabled_for_the_whole_run_or_not_at_all() -> None:
    b = Buggify(3, ON)
    for name in POINTS:
        fired = sum(b.ask(name) for _ in range(400))
        p = b.summary()["points"][name]
        assert p["asked"] == 400 and p["fired"] == fired
        if not p["enabled"]:
            assert fired == 0
        else:  # 400 asks at >= 5 %: an enabled point fires, and not every time
            assert FIRE_RANGE[0] <= p["fire_probability"] <= FIRE_RANGE[1]
            assert 0 < fired < 400
    enabled = sum(p["enabled"] for p in b.summary()["points"].values())
    assert 3 <= enabled <= 20, enabled  # about a quarter of 40


def test_probability_and_fire_probability_are_honoured() -> None:
    assert not any(any(v) for v in _draws(1, BuggifySpec(True, probability=0.0)).values())
    every = _draws(1, BuggifySpec(True, probability=1.0, fire_probability=1.0))
    assert all(all(v) for v in every.values())


def test_a_point_draws_from_its_own_stream() -> None:
    """Asking other points in between never changes what one point does (adding a point to the
    code leaves the others' draws alone)."""
    alone = Buggify(5, ON)
    mixed = Buggify(5, ON)
    solo = [alone.ask("x") for _ in range(200)]
    together = []
    for _ in range(200):
        mixed.ask("y")
        together.append(mixed.ask("x"))
        mixed.ask("z")
    assert solo == together


def test_a_world_without_buggify_draws_nothing_and_traces_nothing() -> None:
    outs = []
    for spec in (None, BuggifySpec(enabled=False)):
        out = io.StringIO()
        world = SimWorld(11, out, buggify=spec)
        rt = world.add_node("n").runtime
        assert world.buggify is None
        assert not any(rt.buggify(name) for name in POINTS for _ in range(100))
        outs.append(out.getvalue())
    assert outs == ["", ""]


def test_a_simulated_firing_is_traced_with_its_point() -> None:
    out = io.StringIO()
    world = SimWorld(11, out, buggify=BuggifySpec(True, probability=1.0, fire_probability=1.0))
    rt = world.add_node("n").runtime
    assert rt.buggify("log.roll.early")
    line = json.loads(out.getvalue())
    assert (line["ev"], line["node"], line["point"]) == ("buggify", "n", "log.roll.early")
    assert world.buggify is not None
    assert world.buggify.summary()["points"]["log.roll.early"]["fired"] == 1


def test_the_buggify_table_parses_dumps_and_reloads() -> None:
    s = parse_scenario("f.toml", dict(BASE, buggify={"enabled": True, "probability": 0.5, "fire_probability": 0.1}))
    assert s.buggify == BuggifySpec(True, 0.5, 0.1)
    assert parse_scenario("f.toml", dict(BASE)).buggify == BuggifySpec()
    import tomllib
    again = parse_scenario("f.toml", tomllib.loads(dump_scenario(s)))
    assert again.buggify == s.buggify and again == s
    assert "[buggify]" not in dump_scenario(parse_scenario("f.toml", dict(BASE)))


@pytest.mark.parametrize("table, key", [({"enabled": "yes"}, "buggify.enabled"),
                                        ({"probability": 1.5}, "buggify.probability"),
                                        ({"fire_probability": -0.1}, "buggify.fire_probability"),
                                        ({"rate": 0.1}, "buggify.rate")])
def test_a_bad_buggify_table_is_refused_naming_its_key(table: dict[str, object], key: str) -> None:
    with pytest.raises(ScenarioError, match=f"key '{key}'"):
        parse_scenario("f.toml", dict(BASE, buggify=table))


def test_with_buggify_keeps_the_tables_probabilities() -> None:
    s = parse_scenario("f.toml", dict(BASE, buggify={"probability": 0.5}))
    assert not s.buggify.enabled
    assert with_buggify(s).buggify == BuggifySpec(True, 0.5, 0.0)


def test_a_buggify_runs_repro_says_so() -> None:
    run = {"scenario_path": "scenarios/smoke.toml", "seed": 4}
    assert repro_command(run) == "kafkasim run scenarios/smoke.toml --seed 4"
    assert repro_command(dict(run, buggify={"enabled": True})) == "kafkasim run scenarios/smoke.toml --seed 4 --buggify"
