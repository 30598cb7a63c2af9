"""``replemu explore``: the breadth-first search agrees with a brute-force walk of every path,
both engines agree state for state, a deliberately broken rule is caught at the depth worked out
by hand, the violations found replay with ``replemu run --check``, and a Spark search stopped
between levels resumes where it stopped.  (The issue's bigger targets, the kip320 zombie
re-election among them, take minutes: ``scripts/explore_targets.py`` runs them.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from conftest import ROOT, replemu
from emulator import search as engine
from emulator.config import Config
from emulator.explore import Bounds, Space, enabled_codes, replay_path, root, step_of
from emulator.explore_state import encode
from emulator.run import effective_variant
from emulator.search import SEPARATOR, Counters, digest, search_local
from emulator.state import from_document, to_document
from emulator.steps import StepKind

TINY = Bounds(depth=4, records=1, epochs=1, crashes=1)
NARROW = (StepKind.ELECT, StepKind.PRODUCE, StepKind.FETCH)


def space(protocol: str, replicas: int = 2, bounds: Bounds = TINY, alphabet=None, **config) -> Space:
    cfg = Config(**config)
    extra = {} if alphabet is None else {"alphabet": alphabet}
    return Space(tuple(range(1, replicas + 1)), cfg, effective_variant(protocol, cfg), bounds, **extra)


def brute_force(sp: Space) -> tuple[list[int], dict[str, tuple[int, str]]]:
    """Every path up to the depth bound, walked one by one on copies of live replays through the
    checkpoint document (not the search's state encoding or its ``clone``; nothing is merged): the
    depth at which each distinct state is first reached, and per invariant the smallest
    (depth, path) where a step breaks it.  (Not ``copy.deepcopy``: the compiled core's objects
    cannot be deep-copied.)"""
    replay, counters, _steps, _broken = root(sp)
    first_seen = {digest(encode(replay, counters)): 0}
    violations: dict[str, tuple[int, str]] = {}

    def walk(replay, counters: Counters, path: tuple[str, ...]) -> None:
        depth = len(path) + 1
        if depth > sp.bounds.depth:
            return
        for code in enabled_codes(sp, replay, counters):
            child = from_document(to_document(replay))
            child.checker.violated.clear()
            child.checker.reported_losses.clear()
            child.checker.loss_cursor = None
            step, after = step_of(sp, child, counters, code)
            report = child.apply(step)
            broken = {v["invariant"] for v in report.violations}
            broken |= {f["invariant"] for f in child.checker.final_findings(child.partition)}
            key = digest(encode(child, after))
            first_seen[key] = min(first_seen.get(key, depth), depth)
            full = SEPARATOR.join(path + (code,))
            for name in broken:
                if name not in violations or (depth, full) < violations[name]:
                    violations[name] = (depth, full)
            walk(child, after, path + (code,))

    walk(replay, counters, ())
    per_depth = [0] * (sp.bounds.depth + 1)
    for d in first_seen.values():
        per_depth[d] += 1
    return per_depth, violations


@pytest.mark.parametrize("protocol", ["hw", "kip320"])
def test_local_engine_agrees_with_brute_force_enumeration(protocol):
    sp = space(protocol)
    expected_per_depth, expected_violations = brute_force(sp)
    outcome = search_local(sp)
    assert outcome.states_per_depth == expected_per_depth
    assert outcome.violations == expected_violations
    assert outcome.complete
    assert sum(expected_per_depth) > 500  # the bound is small, not trivial


@pytest.mark.parametrize("protocol, replicas, depth", [("hw", 2, 7), ("kip320", 3, 4)])
def test_workers_give_the_counts_violations_and_paths_of_one_process(monkeypatch, protocol, replicas, depth):
    """The local engine's levels expanded by forked workers (every level, here) are merged in
    frontier order: the same states per depth, transitions, violations and shortest paths."""
    sp = space(protocol, replicas, Bounds(depth))
    one = search_local(sp)
    monkeypatch.setattr(engine, "PARALLEL_FROM", 1)
    two = search_local(sp, workers=2)
    assert (two.states_per_depth, two.transitions, two.violations) == (one.states_per_depth, one.transitions, one.violations)
    assert protocol == "kip320" or "StrongIsr" in one.violations


def test_hw_brute_force_finds_strong_isr_at_depth_five():
    """A committed record lost by a follower that truncates to its stale HW on a leader change
    (elect 2 while 1 lives, then elect 1 back): the search and the brute force agree on it."""
    sp = space("hw", bounds=Bounds(depth=5, records=1, epochs=2, crashes=0), alphabet=NARROW)
    per_depth, violations = brute_force(sp)
    outcome = search_local(sp)
    assert outcome.states_per_depth == per_depth
    assert outcome.violations["StrongIsr"] == violations["StrongIsr"]
    depth, path = outcome.violations["StrongIsr"]
    assert depth == 5, path
    assert search_local(Space(sp.replicas, sp.config, sp.variant, Bounds(4, 1, 2, 0), NARROW)).violations.get("StrongIsr") is None


def test_spark_engine_agrees_state_for_state_and_resumes(spark, tmp_path):
    sp = space("hw", bounds=Bounds(depth=5, records=1, epochs=2, crashes=1), alphabet=NARROW + (StepKind.CRASH, StepKind.RESTART))
    local = search_local(sp)
    from streaming.explore import search_spark

    work = tmp_path / "work"
    shallow = search_spark(spark, Space(sp.replicas, sp.config, sp.variant, Bounds(depth=3, records=1, epochs=2, crashes=1),
                                        sp.alphabet), work)
    assert shallow.states_per_depth == local.states_per_depth[:4]
    seen = []
    deep = search_spark(spark, sp, work, on_level=lambda lv: seen.append(lv.depth))
    assert seen[0] == 3 and seen[1:] == [4, 5]  # resumed after the last whole level, not from the root
    assert deep.states_per_depth == local.states_per_depth
    assert deep.transitions == local.transitions
    assert deep.violations == local.violations
    assert "StrongIsr" in deep.violations


def test_spark_work_dir_of_another_search_is_refused(spark, tmp_path):
    from streaming.explore import WorkDirError, search_spark

    work = tmp_path / "work"
    search_spark(spark, space("hw", bounds=Bounds(depth=1, records=1, epochs=1, crashes=0)), work)
    with pytest.raises(WorkDirError, match="records"):
        search_spark(spark, space("hw", bounds=Bounds(depth=1, records=2, epochs=1, crashes=0)), work)


def test_a_broken_rule_is_caught_at_the_depth_worked_out_by_hand():
    """A leader that advances its HW to its LEO without waiting for its followers commits a
    record no follower has: StrongIsr breaks at the first produce, depth 1.  The rule is replaced
    in the pure-Python core, in a process of its own (REPLEMU_PURE=1): compiled modules call
    each other directly, past an attribute patched on a module."""
    code = textwrap.dedent("""
        from emulator import leader as leader_rules
        from emulator.config import Config
        from emulator.effects import LeaderHw
        from emulator.explore import Bounds, Space
        from emulator.run import effective_variant
        from emulator.search import search_local

        sp = Space((1, 2), Config(), effective_variant("kip320", Config()), Bounds(depth=3, records=1, epochs=1, crashes=0))
        print("StrongIsr" in search_local(sp).violations)

        def eager(p, leader):
            old = leader.hw
            leader.hw = max(leader.hw, leader.leo)
            if leader.hw > old:
                p.effect(LeaderHw(leader.id, leader.hw))
            return leader.hw > old

        leader_rules.maybe_increment_high_watermark = eager
        depth, path = search_local(sp).violations["StrongIsr"]
        print(depth, path.startswith("P1"))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "REPLEMU_PURE": "1"},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "True"]


def test_replay_path_rebuilds_the_contract_steps():
    sp = space("hw", bounds=Bounds(depth=5, records=1, epochs=2, crashes=0), alphabet=NARROW)
    _depth, path = search_local(sp).violations["StrongIsr"]
    steps = replay_path(sp, path)
    assert len(steps) == len(path.split(SEPARATOR)) + 1
    assert steps[0].kind is StepKind.ELECT


def test_cli_writes_replayable_scenarios_and_the_json_contract(tmp_path):
    out = tmp_path / "out"
    run = replemu("explore", "--protocol", "hw", "--depth", "5", "--records", "1", "--crashes", "0", "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert {"format", "protocol", "replicas", "bounds", "depth", "complete", "states_per_depth", "distinct_states",
            "transitions", "seconds", "violations"} <= set(result)
    assert result["format"] == 1 and result["protocol"] == "hw" and result["replicas"] == 2
    assert result["complete"] is True and result["depth"] == 5
    assert result["distinct_states"] == sum(result["states_per_depth"])
    assert "hw depth 5:" in run.stderr  # progress per depth
    strong = next(v for v in result["violations"] if v["invariant"] == "StrongIsr")
    assert strong["depth"] == 5
    doc = yaml.safe_load(open(strong["scenario_file"]))
    assert "StrongIsr" in doc["expect"]["hw"]["violations"]
    check = replemu("run", strong["scenario_file"], "--protocol", "hw", "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    chart = (out / "explore.svg").read_text()
    assert chart.count("<polyline") == 1 and "StrongIsr at depth 5" in chart


def test_cli_knob_is_carried_into_the_scenario_file(tmp_path):
    out = tmp_path / "out"
    run = replemu("explore", "--protocol", "kip320", "--depth", "2", "--records", "1", "--out", str(out),
                  "--knob", "trunc_rule=hw", "--knob", "skip_if_same_leader=same_leader", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["knobs"] == {"skip_if_same_leader": "same_leader", "trunc_rule": "hw"}


@pytest.mark.parametrize("args, message", [
    (["--depth", "3", "--steps", "produce,teleport"], "unknown step kind 'teleport'"),
    (["--depth", "3", "--config", "min_insync_replicas=3"], "exceeds the 2 replicas"),
    (["--depth", "3", "--config", "acks"], "KEY=VALUE"),
    (["--depth", "-1"], "--depth"),
    (["--depth", "3", "--knob", "fencing=maybe"], "fencing"),
    (["--depth", "3", "--master", "local[2]", "--engine", "local"], "--master needs --engine spark"),
    (["--depth", "3", "--workers", "2", "--engine", "spark"], "--workers is for --engine local"),
    (["--depth", "3", "--workers", "0"], "--workers"),
])
def test_cli_bad_arguments_exit_2_in_one_line(tmp_path, args, message):
    run = replemu("explore", "--out", str(tmp_path / "o"), *args)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr
