"""``replemu explore`` searches that end: the reductions keep every verdict, a search stopped at
any point resumes to the same result, and a visited set ten times its memory budget still
finishes.

The reductions' proofs on small spaces (every variant; ``scripts/prove_reductions.py`` runs the
issue's larger ones: every 2-replica space exhausted, 3 replicas to depth 5):

* sleep sets change nothing but the transitions: the same states at the same depths, the same
  violations with the same paths;
* symmetry merges states, never verdicts: the same invariants broken at the same depths by the
  same paths, the same "exhausted";
* and the facts they rest on, checked state by state: every pair of steps ``independent`` calls
  commuting does commute, and renaming the replicas commutes with every step (ZooKeeper).
"""

from __future__ import annotations

import itertools
import json
import marshal

import pytest

from conftest import replemu
from emulator import explore as explore_module
from emulator.config import Config
from emulator.explore import (
    MARSHAL_VERSION, SEPARATOR, Bounds, Reduction, Space, canonical, decode, enabled_codes, expand, independent, pack,
    renamed, restore, search_local, step_of, symmetric_form,
)
from emulator.run import effective_variant
from emulator.state import clone

VARIANTS = ("hw", "kip101", "kip279", "kip320", "kip903", "kip966")
SMALL = Bounds(depth=40, records=1, epochs=1, crashes=1)  # every 2-replica space exhausted within seconds


def space(protocol: str, replicas: int, bounds: Bounds, reduce: str = "none", **config) -> Space:
    cfg = Config(**config)
    return Space(tuple(range(1, replicas + 1)), cfg, effective_variant(protocol, cfg), bounds, reduce=Reduction.parse(reduce))


def states_of(sp: Space, limit: int = 4000) -> list[bytes]:
    """The packed states of a breadth-first search of ``sp`` (at most ``limit``)."""
    from emulator.explore import root

    replay, counters, _steps, _broken = root(sp)
    frontier = [pack(marshal.dumps(canonical(replay, counters), MARSHAL_VERSION))]
    seen = {frontier[0]}
    out = list(frontier)
    while frontier and len(out) < limit:
        nxt = []
        for state in frontier:
            for s in expand(sp, state):
                packed = pack(s.state)
                if packed not in seen:
                    seen.add(packed)
                    nxt.append(packed)
        frontier = nxt
        out += nxt
    return out[:limit]


@pytest.mark.parametrize("protocol", VARIANTS)
def test_sleep_sets_keep_every_state_and_path(protocol):
    for sp in (space(protocol, 2, SMALL), space(protocol, 3, Bounds(4))):
        full = search_local(sp)
        slept = search_local(Space(sp.replicas, sp.config, sp.variant, sp.bounds, reduce=Reduction(sleep=True)))
        assert slept.states_per_depth == full.states_per_depth
        assert slept.violations == full.violations
        assert slept.exhausted == full.exhausted
        assert slept.transitions <= full.transitions


@pytest.mark.parametrize("protocol", VARIANTS)
def test_symmetry_keeps_every_verdict(protocol):
    for sp in (space(protocol, 2, SMALL), space(protocol, 3, Bounds(4))):
        full = search_local(sp)
        reduced_space = Space(sp.replicas, sp.config, sp.variant, sp.bounds, reduce=Reduction(True, True))
        reduced = search_local(reduced_space)
        assert reduced.violations == full.violations  # the same invariants, depths and paths
        assert reduced.exhausted == full.exhausted and reduced.depth == full.depth
        if reduced_space.symmetric:
            assert reduced.distinct_states < full.distinct_states
        else:  # KRaft: nothing is merged
            assert reduced.states_per_depth == full.states_per_depth


def test_symmetry_keeps_a_violation_and_its_path():
    """hw breaks StrongIsr and NoCommittedDataLoss with 2 replicas: the reduced search finds
    the same shortest paths, with fewer states."""
    full = search_local(space("hw", 2, Bounds(7)))
    reduced = search_local(space("hw", 2, Bounds(7), "all"))
    assert {"StrongIsr", "NoCommittedDataLoss"} <= set(full.violations)
    assert reduced.violations == full.violations
    assert reduced.distinct_states < full.distinct_states


@pytest.mark.parametrize("protocol,replicas,config", [
    ("hw", 3, {}), ("kip320", 3, {}), ("kip101", 2, {"hw_checkpoint": "explicit", "log_flush": "explicit"}),
    ("kip320", 3, {"hw_checkpoint": "explicit", "log_flush": "explicit"}),
])
def test_steps_called_independent_commute(protocol, replicas, config):
    """For every state of a small space and every pair of enabled steps ``independent`` calls
    commuting: each stays enabled after the other, and both orders reach the same state."""
    sp = space(protocol, replicas, Bounds(8, records=2, epochs=1, crashes=1, power_crashes=1), **config)
    template = sp.template
    pairs = 0
    for packed in states_of(sp, 2500):
        replay, counters = decode(template, packed)
        codes = enabled_codes(sp, replay, counters)
        for t, a in itertools.combinations(codes, 2):
            if not independent(sp, replay, t, a):
                continue
            pairs += 1
            ends = []
            for first, second in ((t, a), (a, t)):
                r = clone(replay)
                step, c = step_of(sp, r, counters, first)
                r.apply(step)
                assert second in enabled_codes(sp, r, c), f"{second} disabled by {first}"
                step, c = step_of(sp, r, c, second)
                r.apply(step)
                ends.append(canonical(r, c))
            assert ends[0] == ends[1], f"{t} and {a} do not commute"
    assert pairs > 50  # the relation is not empty on these spaces


@pytest.mark.parametrize("protocol", ["hw", "kip101", "kip279", "kip320"])
def test_renaming_the_replicas_commutes_with_every_step(protocol):
    """The symmetry reduction's premise: under ZooKeeper, the successors of a renamed state are
    the renamed successors (each with the invariants it broke)."""
    sp = space(protocol, 3, Bounds(8, records=2, epochs=2, crashes=1, power_crashes=1),
               reduce="symmetry")
    assert sp.symmetric
    template = sp.template
    for packed in states_of(sp, 600):
        t = marshal.loads(__import__("zlib").decompress(packed))
        ours = sorted((s.key, s.broken) for s in expand(sp, packed))
        for perm in itertools.permutations(sp.replicas):
            m = dict(zip(sp.replicas, perm))
            replay, counters = restore(template, renamed(t, m))
            other = pack(marshal.dumps(canonical(replay, counters), MARSHAL_VERSION))
            assert sorted((s.key, s.broken) for s in expand(sp, other)) == ours, f"renaming {m}"
            assert symmetric_form(renamed(t, m)) == symmetric_form(t)


def test_kraft_has_no_reduction():
    assert not space("kip966", 3, Bounds(3), "all").symmetric
    assert space("kip966", 3, Bounds(3), "all").reductions == []
    assert space("kip320", 3, Bounds(3), "all").reductions == ["sleep", "symmetry"]


def _interrupt_after(n: int):
    """Ctrl-C once ``n`` distinct states were found (mid-level: the search asks between states)."""

    def should_stop(distinct: int):
        if distinct >= n:
            raise KeyboardInterrupt
        return None

    return should_stop


@pytest.mark.parametrize("workers", [1, 2])
def test_a_search_stopped_anywhere_resumes_to_the_same_result(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(explore_module, "PARALLEL_FROM", 1)
    sp = space("kip101", 2, Bounds(40, records=2, epochs=1, crashes=1), "sleep")
    whole = search_local(sp, workers=workers)
    assert whole.exhausted
    for at, case in ((5, "a"), (3000, "b"), (9000, "c")):
        work = tmp_path / case
        with pytest.raises(KeyboardInterrupt):
            search_local(sp, should_stop=_interrupt_after(at), work=work, workers=workers)
        resumed = search_local(sp, work=work, workers=workers)
        assert (resumed.states_per_depth, resumed.transitions, resumed.violations, resumed.exhausted) == \
            (whole.states_per_depth, whole.transitions, whole.violations, whole.exhausted)


def test_a_deeper_search_continues_a_finished_one(tmp_path):
    small = Bounds(5, records=1, epochs=1)
    sp = space("hw", 2, small)
    deep = search_local(space("hw", 2, Bounds(9, records=1, epochs=1)))
    search_local(sp, work=tmp_path)
    continued = search_local(space("hw", 2, Bounds(9, records=1, epochs=1)), work=tmp_path)
    assert (continued.states_per_depth, continued.violations) == (deep.states_per_depth, deep.violations)


def test_a_work_directory_of_another_search_is_refused(tmp_path):
    search_local(space("hw", 2, Bounds(2)), work=tmp_path)
    with pytest.raises(ValueError, match="another search.*records"):
        search_local(space("hw", 2, Bounds(2, records=1)), work=tmp_path)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_visited_set_ten_times_the_memory_budget_finishes(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(explore_module, "PARALLEL_FROM", 1)
    sp = space("kip320", 2, Bounds(40, records=1, epochs=2, crashes=1))
    whole = search_local(sp)
    budget = whole.distinct_states // 10
    held = []
    bounded = search_local(sp, work=tmp_path, memory=budget, visited_out=held, workers=workers)
    assert (bounded.states_per_depth, bounded.transitions, bounded.violations, bounded.exhausted) == \
        (whole.states_per_depth, whole.transitions, whole.violations, True)
    assert whole.distinct_states >= 10 * budget
    assert 0 < held[0].peak <= budget  # never more keys in memory than the budget
    keys_on_disk = sum(f.stat().st_size for f in tmp_path.glob("keys-*.bin")) // 16
    assert keys_on_disk == whole.distinct_states


def test_explore_cli_says_exhausted_with_its_diameter(tmp_path):
    out = tmp_path / "out"
    proc = replemu("explore", "--protocol", "kip320", "--replicas", "2", "--depth", "40", "--records", "1",
                   "--epochs", "1", "--reduce", "all", "--memory", "64K", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exhausted"] is True and result["complete"] is True
    assert result["reduce"] == ["sleep", "symmetry"]
    spd = result["states_per_depth"]
    assert result["diameter"] == max(d for d, n in enumerate(spd) if n) and spd[-1] == 0
    assert "state space exhausted, diameter" in proc.stderr
    again = replemu("explore", "--protocol", "kip320", "--replicas", "2", "--depth", "40", "--records", "1",
                    "--epochs", "1", "--reduce", "all", "--out", str(out), "--json")
    assert json.loads(again.stdout)["states_per_depth"] == spd  # resumed from the work directory
    assert "resumed" in again.stderr
    other = replemu("explore", "--protocol", "kip320", "--replicas", "2", "--depth", "40", "--records", "2",
                    "--reduce", "all", "--out", str(out))
    assert other.returncode == 2 and "another search" in other.stderr and "Traceback" not in other.stderr
    bad = replemu("explore", "--protocol", "hw", "--depth", "2", "--reduce", "mirror", "--out", str(out))
    assert bad.returncode == 2 and "unknown reduction mirror" in bad.stderr
    spark = replemu("explore", "--protocol", "hw", "--depth", "2", "--reduce", "all", "--engine", "spark", "--out", str(out))
    assert spark.returncode == 2 and "--reduce is for --engine local" in spark.stderr


def test_ctrl_c_then_the_same_command_gives_the_same_result(tmp_path):
    """A user's Ctrl-C (SIGINT) in the middle of a search, then the same command again: the
    result is the uninterrupted one."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT

    def command(out):
        return [sys.executable, "-m", "replemu", "explore", "--protocol", "hw", "--replicas", "2", "--depth", "40",
                "--records", "2", "--epochs", "1", "--reduce", "sleep", "--out", str(out), "--json"]

    def essentials(result):
        return (result["states_per_depth"], result["transitions"], result["exhausted"], result["diameter"],
                [(v["invariant"], v["depth"], v["path"]) for v in result["violations"]])

    whole = subprocess.run(command(tmp_path / "whole"), cwd=ROOT, capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr
    stopped = subprocess.Popen(command(tmp_path / "stopped"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert stopped.stderr is not None
    for line in stopped.stderr:  # Ctrl-C once depth 5 is whole: inside level 6 (the space is 15 deep)
        if line.startswith("hw depth 5:"):
            break
    time.sleep(0.5)
    stopped.send_signal(signal.SIGINT)
    _out, err = stopped.communicate(timeout=60)
    assert stopped.returncode != 0 and "run the same command to resume" in err, err[-2000:]
    resumed = subprocess.run(command(tmp_path / "stopped"), cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert essentials(json.loads(resumed.stdout)) == essentials(json.loads(whole.stdout))
