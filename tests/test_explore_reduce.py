"""``replemu explore`` searches that end: the reductions keep every verdict, a search stopped at
any point resumes to the same result, and a visited set ten times its memory budget still
finishes.

The reductions' proofs on small spaces (every variant, 2 replicas exhausted and 3 replicas to
depth 4, records 1 and epochs 1, plus hw exhausted with 2 epochs; ``scripts/prove_reductions.py``
runs the issue's larger ones: every 2-replica space exhausted, 3 replicas to depth 5):

* sleep sets change nothing but the transitions: the same states at the same depths, the same
  violations with the same paths;
* symmetry merges states, never verdicts: the same invariants broken at the same depths by the
  same paths, the same "exhausted";
* and the facts they rest on, checked state by state: every pair of steps ``independent`` calls
  commuting does commute, and renaming the replicas commutes with every step (ZooKeeper).

Each search is run once per module (``searched``): the ``none`` baselines are shared by every
test that compares with them.
"""

from __future__ import annotations

import functools
import itertools
import json
import marshal
import os
import re
import zlib
from pathlib import Path

import pytest

from conftest import replemu
from emulator import search as engine
from emulator.config import Config
from emulator.explore import DEFAULT_ALPHABET, Bounds, Space, enabled_codes, root, step_of
from emulator.explore_reduce import Reduction, independent, renamed, symmetric_form
from emulator.explore_state import canonical, decode, restore
from emulator.run import effective_variant
from emulator.search import MARSHAL_VERSION, Outcome, expand, pack, search_local
from emulator.state import clone
from emulator.steps import StepKind

VARIANTS = ("hw", "kip101", "kip279", "kip320", "kip903", "kip966")
SMALL = Bounds(depth=40, records=1, epochs=1, crashes=1)  # every 2-replica space exhausted within seconds
THREE = Bounds(depth=4, records=1, epochs=1, crashes=1)  # 3 replicas: ~7,000 states within 4 steps
GRID = ((2, SMALL), (3, THREE))  # where every reduction is compared with none, on every variant
# hw's first broken invariants on SMALL (crash paths), which the reductions must find again
HW_SMALL_BROKEN = {"StrongIsr", "WeakIsr", "LeaderCandidateCompleteness", "NoCommittedDataLoss", "NoAckedDataLoss",
                   "MinIsrDurability"}


def space(protocol: str, replicas: int, bounds: Bounds, reduce: str = "none",
          alphabet: tuple[StepKind, ...] = DEFAULT_ALPHABET, **config) -> Space:
    cfg = Config(**config)
    return Space(tuple(range(1, replicas + 1)), cfg, effective_variant(protocol, cfg), bounds, alphabet,
                 reduce=Reduction.parse(reduce))


def searched(protocol: str, replicas: int, bounds: Bounds, reduce: str = "none",
             alphabet: tuple[StepKind, ...] = DEFAULT_ALPHABET) -> Outcome:
    """The outcome of one in-memory, one-process search, run once per module (read it, never
    change it)."""
    return _searched(protocol, replicas, bounds, reduce, alphabet)  # one cache key however it is called


@functools.cache
def _searched(protocol: str, replicas: int, bounds: Bounds, reduce: str, alphabet: tuple[StepKind, ...]) -> Outcome:
    return search_local(space(protocol, replicas, bounds, reduce, alphabet))


def states_of(sp: Space, limit: int = 4000) -> list[bytes]:
    """The packed states of a breadth-first search of ``sp`` (at most ``limit``)."""
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
    for replicas, bounds in GRID:
        full = searched(protocol, replicas, bounds)
        slept = searched(protocol, replicas, bounds, "sleep")
        assert slept.states_per_depth == full.states_per_depth
        assert slept.violations == full.violations
        assert slept.exhausted == full.exhausted
        if "sleep" in space(protocol, replicas, bounds, "sleep").reductions():
            assert slept.transitions < full.transitions  # the sleep sets did leave steps out
        else:  # KRaft: no pair commutes
            assert slept.transitions == full.transitions
    assert searched(protocol, 2, SMALL).exhausted
    if protocol == "hw":  # the comparison has verdicts to keep
        assert HW_SMALL_BROKEN <= set(searched(protocol, 2, SMALL).violations)


@pytest.mark.parametrize("protocol", VARIANTS)
def test_symmetry_keeps_every_verdict(protocol):
    for replicas, bounds in GRID:
        full = searched(protocol, replicas, bounds)
        reduced = searched(protocol, replicas, bounds, "all")
        assert reduced.violations == full.violations  # the same invariants, depths and paths
        assert reduced.exhausted == full.exhausted and reduced.depth == full.depth
        if space(protocol, replicas, bounds, "all").symmetric:
            assert reduced.distinct_states < full.distinct_states
        else:  # KRaft: nothing is merged
            assert reduced.states_per_depth == full.states_per_depth
    if protocol == "hw":
        assert HW_SMALL_BROKEN <= set(searched(protocol, 2, SMALL).violations)


# hw with 2 replicas, only elections, produces, fetches and LeaderAndIsr, records 2, epochs 2 and
# no crash: exhausted at 8,500 states, it breaks the epoch and prefix invariants SMALL does not.
ELECTIONS = (StepKind.ELECT, StepKind.PRODUCE, StepKind.FETCH, StepKind.LEADER_AND_ISR)
TWO_EPOCHS = Bounds(depth=40, records=2, epochs=2, crashes=0)


def test_symmetry_keeps_a_violation_and_its_path():
    """hw breaks nine invariants with 2 replicas (StrongIsr and NoCommittedDataLoss among them):
    the reduced search finds the same shortest paths, with fewer states, on two exhausted spaces
    that together break all nine (``symmetry`` alone on one, ``all`` on the other)."""
    broken: set[str] = set()
    for bounds, alphabet, reduce in ((SMALL, DEFAULT_ALPHABET, "all"), (TWO_EPOCHS, ELECTIONS, "symmetry")):
        assert space("hw", 2, bounds, reduce, alphabet).symmetric
        full = searched("hw", 2, bounds, alphabet=alphabet)
        reduced = searched("hw", 2, bounds, reduce, alphabet)
        assert full.exhausted and reduced.exhausted and reduced.diameter == full.diameter
        assert reduced.violations == full.violations
        assert reduced.distinct_states < full.distinct_states
        broken |= set(full.violations)
    assert {"StrongIsr", "WeakIsr", "LeaderCandidateCompleteness", "EpochMonotonicity", "EventualConvergence",
            "CommittedPrefixAgreement", "NoCommittedDataLoss", "NoAckedDataLoss", "MinIsrDurability"} <= broken


EXPLICIT = {"hw_checkpoint": "explicit", "log_flush": "explicit"}
PER_KIND = 250  # pairs checked per kind pair (evenly spread over the sample; all of them when fewer)


def _kinds(t: str, a: str) -> str:
    return "".join(sorted(t[0] + a[0]))


@pytest.mark.parametrize("protocol,replicas,config,kinds", [
    ("hw", 3, {}, {"CF", "CL", "CP", "PR"}),
    ("kip320", 3, {}, {"CF", "CL", "CP", "PR"}),
    ("kip101", 2, EXPLICIT, {"CH", "CL", "CP", "CR", "CU", "HH", "HL", "HP", "HR", "HU", "LU", "PR", "PU", "RR", "RU",
                             "UU"}),
    ("kip320", 3, EXPLICIT, {"CF", "CH", "CL", "CP", "CR", "CU", "FU", "HR", "LU", "PR", "PU", "RR", "RU", "UU"}),
])
def test_steps_called_independent_commute(protocol, replicas, config, kinds):
    """For the first 2,500 states of a small space, the pairs of enabled steps ``independent``
    calls commuting, up to ``PER_KIND`` of each kind pair (``CF``: a crash beside a fetch),
    spread evenly over the states: each stays enabled after the other, and both orders reach the
    same state.  Every kind pair the relation declares there is checked (``kinds``: at least
    these)."""
    sp = space(protocol, replicas, Bounds(8, records=2, epochs=1, crashes=1, power_crashes=1), **config)
    template = sp.template
    declared: dict[str, list[tuple[int, str, str]]] = {}
    states = states_of(sp, 2500)
    for i, packed in enumerate(states):
        replay, counters = decode(template, packed)
        for t, a in itertools.combinations(enabled_codes(sp, replay, counters), 2):
            if independent(replay, t, a):
                declared.setdefault(_kinds(t, a), []).append((i, t, a))
    assert kinds <= set(declared), f"kind pairs never declared independent: {sorted(kinds - set(declared))}"
    checked = 0
    for kind, pairs in sorted(declared.items()):
        stride = max(1, -(-len(pairs) // PER_KIND))
        for i, t, a in pairs[::stride]:
            checked += 1
            replay, counters = decode(template, states[i])
            ends = []
            for first, second in ((t, a), (a, t)):
                r = clone(replay)
                step, c = step_of(sp, r, counters, first)
                r.apply(step)
                assert second in enabled_codes(sp, r, c), f"{second} disabled by {first}"
                step, c = step_of(sp, r, c, second)
                r.apply(step)
                ends.append(canonical(r, c))
            assert ends[0] == ends[1], f"{t} and {a} do not commute ({kind})"
    assert checked > 50  # the relation is not empty on these spaces


def _shape(code: str) -> str:
    """A step code without its replica: its kind and flag (``F2x`` -> ``Fx``)."""
    return re.sub(r"\d", "", code, count=1)


# Every step kind and flag the ZooKeeper alphabet offers within these bounds.
SHAPES = {"C", "R", "E", "Eo", "En", "F", "Fx", "Fm", "L", "Le0", "Le1", "P1", "Pa", "S", "X"}


@pytest.mark.parametrize("protocol", ["hw", "kip101", "kip279", "kip320"])
def test_renaming_the_replicas_commutes_with_every_step(protocol):
    """The symmetry reduction's premise: under ZooKeeper, the successors of a renamed state are
    the renamed successors (each with the invariants it broke).  Checked under every renaming on
    every 5th of the first 600 states, and on each state that first offers a step kind and flag
    (``SHAPES``) the states checked so far did not."""
    sp = space(protocol, 3, Bounds(8, records=2, epochs=2, crashes=1, power_crashes=1),
               reduce="symmetry")
    assert sp.symmetric
    template = sp.template
    covered: set[str] = set()
    checked = 0
    for i, packed in enumerate(states_of(sp, 600)):
        successors = expand(sp, packed)
        shapes = {_shape(s.code) for s in successors}
        if i % 5 and shapes <= covered:
            continue
        checked += 1
        covered |= shapes
        t = marshal.loads(zlib.decompress(packed))
        ours = sorted((s.key, s.broken) for s in successors)
        for perm in itertools.permutations(sp.replicas):
            m = dict(zip(sp.replicas, perm))
            assert symmetric_form(renamed(t, m)) == symmetric_form(t)
            if perm == sp.replicas:
                continue  # the identity renames nothing
            replay, counters = restore(template, renamed(t, m))
            other = pack(marshal.dumps(canonical(replay, counters), MARSHAL_VERSION))
            assert sorted((s.key, s.broken) for s in expand(sp, other)) == ours, f"renaming {m}"
    assert SHAPES <= covered, f"step shapes never checked: {sorted(SHAPES - covered)}"
    assert checked >= 600 // 5


def test_kraft_has_no_reduction():
    assert not space("kip966", 3, Bounds(3), "all").symmetric
    assert space("kip966", 3, Bounds(3), "all").reductions() == []
    assert space("kip320", 3, Bounds(3), "all").reductions() == ["sleep", "symmetry"]


def _interrupt_after(n: int):
    """Ctrl-C once ``n`` distinct states were found (mid-level: the search asks between states)."""

    def should_stop(distinct: int):
        if distinct >= n:
            raise KeyboardInterrupt
        return None

    return should_stop


@pytest.mark.parametrize("workers", [1, 2])
def test_a_search_stopped_anywhere_resumes_to_the_same_result(tmp_path, monkeypatch, workers):
    """hw with 2 replicas (SMALL, sleep sets: 5,304 states in 12 levels, violations first found at
    depths 6 and 7), stopped at the start of level 2, inside level 5 and inside level 7, then
    resumed with the same workers: the result of one uninterrupted process."""
    monkeypatch.setattr(engine, "PARALLEL_FROM", 1)
    sp = space("hw", 2, SMALL, "sleep")
    whole = searched("hw", 2, SMALL, "sleep")
    assert whole.exhausted and HW_SMALL_BROKEN <= set(whole.violations)
    for at, case in ((5, "a"), (1500, "b"), (4000, "c")):
        work = tmp_path / case
        with pytest.raises(KeyboardInterrupt):
            search_local(sp, should_stop=_interrupt_after(at), work=work, workers=workers)
        resumed = search_local(sp, work=work, workers=workers)
        assert (resumed.states_per_depth, resumed.transitions, resumed.violations, resumed.exhausted) == \
            (whole.states_per_depth, whole.transitions, whole.violations, whole.exhausted)


def test_a_deeper_search_continues_a_finished_one(tmp_path):
    search_local(space("hw", 2, Bounds(5, records=1, epochs=1)), work=tmp_path)
    continued = search_local(space("hw", 2, SMALL), work=tmp_path)
    deep = searched("hw", 2, SMALL)
    assert (continued.states_per_depth, continued.violations, continued.exhausted) == \
        (deep.states_per_depth, deep.violations, True)


def test_a_work_directory_of_another_search_is_refused(tmp_path):
    search_local(space("hw", 2, Bounds(2)), work=tmp_path)
    with pytest.raises(ValueError, match="another search.*records"):
        search_local(space("hw", 2, Bounds(2, records=1)), work=tmp_path)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_visited_set_ten_times_the_memory_budget_finishes(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(engine, "PARALLEL_FROM", 1)
    sp = space("kip320", 2, SMALL)
    whole = searched("kip320", 2, SMALL)
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
    assert spd == searched("kip320", 2, SMALL, "all").states_per_depth  # what the search gives in memory
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
    result is the uninterrupted one (the same search run whole in this process)."""
    import signal
    import subprocess
    import sys

    from conftest import ROOT

    whole = searched("hw", 2, SMALL, "sleep")

    def interrupted(out: Path) -> tuple[list[str], int, str]:
        """The search into ``out``, Ctrl-C'd after depth 3: the command, its exit status, its stderr.

        The search ends well under a second after it prints depth 3, so a Ctrl-C sent then may
        come after the end. Once depth 3 is read this test fills the pipe of the search's stderr
        (through a write descriptor of its own, non-blocking), so the search blocks on its next
        progress line, inside the search, until Ctrl-C; then the pipe is drained."""
        command = [sys.executable, "-m", "replemu", "explore", "--protocol", "hw", "--replicas", "2", "--depth", "40",
                   "--records", "1", "--epochs", "1", "--reduce", "sleep", "--out", str(out), "--json"]
        read_end, write_end = os.pipe()
        # As from a terminal: Ctrl-C at its default, also when this suite runs with SIGINT ignored
        # (a background job of a non-interactive shell), which a child would inherit.
        stopped = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=write_end,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        os.close(write_end)
        filler = os.open(f"/proc/self/fd/{read_end}", os.O_WRONLY | os.O_NONBLOCK)  # its own file description
        pipe = os.fdopen(read_end, "rb", buffering=0)
        seen, pending = [], b""
        while not any(line.startswith("hw depth 3:") for line in seen):
            chunk = pipe.read(65536)
            assert chunk, "".join(seen)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            seen += [line.decode() + "\n" for line in lines]
        for size in (4096, 1):
            try:
                while True:
                    os.write(filler, b"\0" * size)
            except BlockingIOError:
                pass
        os.close(filler)
        stopped.send_signal(signal.SIGINT)
        rest = b"".join(iter(lambda: pipe.read(65536), b""))
        pipe.close()
        stopped.wait(timeout=60)
        return command, stopped.returncode, "".join(seen) + (pending + rest).replace(b"\0", b"").decode()

    for attempt in range(3):  # a run that ended before the Ctrl-C arrived is not the case under test: again
        command, code, err = interrupted(tmp_path / f"out{attempt}")
        if "hw: complete" not in err:
            break
    assert code != 0 and "run the same command to resume" in err, err[-2000:]
    assert "hw: complete" not in err
    resumed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stderr  # from the levels the interrupted run kept
    result = json.loads(resumed.stdout)
    assert (result["states_per_depth"], result["transitions"], result["exhausted"], result["diameter"]) == \
        (whole.states_per_depth, whole.transitions, whole.exhausted, whole.diameter)
    assert {v["invariant"]: (v["depth"], v["path"]) for v in result["violations"]} == whole.violations
    assert len(result["violations"]) == len(whole.violations)
