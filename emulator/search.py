"""Exhaustive bounded search: one breadth-first engine, driven by a protocol family's search hooks.

``replemu explore`` searches every interleaving of a family's actions from a root state,
breadth-first, each distinct state once, every invariant judged in every state.  This module is
the family-neutral part: the engine reads a family only through ``SearchSpace``, whose hooks a
family's space implements (``emulator.explore.Space`` for partition replication,
``emulator.quorum.explore.QuorumSpace`` for the metadata quorum):

* ``root_state`` / ``restore`` / ``canonical``: the first state, a state from its canonical
  tuple, and the tuple of a state (everything that can change a future action or verdict,
  nothing that only records history; equal states give equal tuples in any process);
* ``actions`` / ``take``: the codes of the actions enabled in a state (sorted: the order paths
  compare in), and a successor with the invariants its action broke (None: no edge);
* ``key``: the visited-set key of a canonical tuple (a digest, or a symmetry class's);
* ``independent``: which actions commute (sleep sets), where the family's reductions allow.

On those, ``expand`` gives a state's successors and ``search_local`` runs the search in this
process (with forked workers per level, a work directory to resume from, and a visited set on
disk past a memory budget: ``emulator.levels``); ``streaming.explore`` runs the same ``expand``
level by level on Spark.  The engines give the same counts and the same violations.

Edges are named by short *action codes* (``F2``, ``E3o`` ...).  A path is its codes joined by a
space, which sorts below every code character, so comparing two joined paths compares them step
by step.  Every engine keeps, for each state, the smallest path that reaches it at its depth,
and for each invariant the smallest violating path at the smallest depth: the local engine gets
this from its visiting order (parents in path order, each parent's actions in code order), the
Spark engine by taking minima.  A violation's path is therefore one of the shortest, and the
same on every engine.  Standard library only, deterministic: no clock decides anything, no set
or dict is iterated in hash order into a decision.
"""

from __future__ import annotations

import hashlib
import marshal
import multiprocessing
import signal
import zlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

from ._build import mypyc_attr, rebuilt
from .levels import LevelStore, VisitedSet

SEPARATOR = " "  # joins action codes into a path; sorts below every code character
MARSHAL_VERSION = 2  # no back-references: the bytes depend only on the value


class ExploreError(ValueError):
    """Bounds, a space or a step alphabet that cannot be searched (the message says which and why)."""


def check_bounds(bounds: Any) -> None:
    """Every field of a search's bounds (a dataclass) is an int >= 0, else ``ExploreError``."""
    for f in fields(bounds):
        value = getattr(bounds, f.name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ExploreError(f"bound {f.name} must be an int >= 0, got {value!r}")


class SearchBounds:
    """How far a search goes: a family's bounds are a frozen dataclass of ints >= 0 that subclasses
    this (``depth`` among them: actions from the root).  Checked when made, pickled as its fields."""

    def __post_init__(self) -> None:
        check_bounds(self)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # compiled, the default unpickling would set each field through __setattr__


@dataclass(frozen=True, slots=True)
class Counters:
    """What the bounds count along a path: how much of each budget of a family's bounds (records
    produced, crashes ...: the family names them and their order) the path spent.  Part of a
    state: two paths that spent differently can take different futures."""

    spent: tuple[int, ...]

    def spend(self, budget: int) -> Counters:
        """These counters with one more of budget ``budget`` (its index) spent."""
        s = self.spent
        return Counters(s[:budget] + (s[budget] + 1,) + s[budget + 1:])

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)


@mypyc_attr(allow_interpreted_subclasses=True)
class SearchSpace:
    """What one search searches (a family's states, actions, bounds and variant), as the engines
    see it: a family's space subclasses this and implements the hooks.  A space is pickled (Spark
    ships it to its executors): a frozen dataclass with ``__reduce__`` = ``_build.rebuilt``.

    A *state* is whatever the family steps (opaque here); the engines hold states as their
    canonical tuples, marshalled (the bytes a key digests) and compressed (``pack``)."""

    def depth(self) -> int:
        """The depth bound: actions from the root."""
        raise NotImplementedError

    def root_state(self) -> tuple[Any, list[str]]:
        """The first state (depth 0) and the invariants reaching it broke (none for a sound variant)."""
        raise NotImplementedError

    def context(self) -> Any:
        """What ``restore`` reuses across states, built once per process (the partition's template replay)."""
        return None

    def restore(self, t: tuple, context: Any) -> Any:
        """The state of a canonical tuple (what the tuple leaves out at its reset value)."""
        raise NotImplementedError

    def canonical(self, state: Any) -> tuple:
        """The state as nested tuples of ints, strings, bytes, bools and None (marshal writes them)."""
        raise NotImplementedError

    def actions(self, state: Any) -> list[str]:
        """The codes of the actions that may apply in ``state``, sorted."""
        raise NotImplementedError

    def take(self, state: Any, code: str) -> tuple[Any, set[str]] | None:
        """The successor of ``state`` (left unchanged) by action ``code`` and the invariants the
        action broke; None when the action is no edge (the family refuses it, or it leaves the bounds)."""
        raise NotImplementedError

    def key(self, t: tuple, encoded: bytes) -> bytes:
        """The visited-set key of a canonical tuple ``t`` (``encoded``: its marshalled bytes)."""
        return digest(encoded)

    def keeps_self_loops(self) -> bool:
        """Whether an action back to the same state is an edge (counted as a transition)."""
        return True

    def sleeps(self) -> bool:
        """Whether sleep sets apply: actions ``independent`` calls commuting are not taken twice."""
        return False

    def independent(self, state: Any, a: str, b: str) -> bool:
        """Whether actions ``a`` and ``b``, both enabled in ``state``, commute there (sleep sets)."""
        return False

    def asked_reductions(self) -> list[str]:
        """The reductions asked for (``--reduce``; docs/explore.md "Reductions")."""
        return []

    def reductions(self) -> list[str]:
        """The reductions this search applies: those asked for that are sound here."""
        return []

    def order(self) -> dict[str, int]:
        """The registry order of the family's invariants (violations are listed in it)."""
        raise NotImplementedError

    def step_names(self) -> list[str]:
        """The step kinds searched (``--steps``), in the family's table order."""
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        """What a work directory records of this search: everything but the depth (a deeper search
        continues a shallower one), so a work directory of another search is refused."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # a family's space is a frozen dataclass: pickled as its fields


def digest(encoded: bytes) -> bytes:
    """The 16-byte key the visited set holds (of the canonical bytes, not of their packing)."""
    return hashlib.blake2b(encoded, digest_size=16).digest()


def pack(encoded: bytes) -> bytes:
    """A state as a frontier holds it: its canonical bytes compressed (about a third)."""
    return zlib.compress(encoded, 1)


def root_entry(space: SearchSpace) -> tuple[bytes, bytes, list[str]]:
    """The root as the engines hold it: its key, its canonical bytes, the invariants it broke."""
    state, broken = space.root_state()
    t = space.canonical(state)
    encoded = marshal.dumps(t, MARSHAL_VERSION)
    return space.key(t, encoded), encoded, broken


class Successor(NamedTuple):
    code: str
    state: bytes  # canonical bytes, not packed (most successors were seen before: pack only new ones)
    key: bytes
    broken: tuple[str, ...]  # invariants this action broke, in registry order
    sleep: str = ""  # with sleep sets: the actions not to take from this successor, codes joined by spaces


def expand(space: SearchSpace, packed: bytes, sleep: str = "", context: Any = None) -> list[Successor]:
    """Every successor of one packed state, in code order, with the invariants each action broke.
    ``context``: ``space.context()``, built once by a caller that expands many states.  ``sleep``:
    with sleep sets (``space.sleeps()``), the state's sleep set (codes joined by spaces): those
    actions are not taken, and each successor carries its own."""
    encoded = zlib.decompress(packed)
    parent = space.restore(marshal.loads(encoded), space.context() if context is None else context)
    parent_key = b"" if space.keeps_self_loops() else digest(encoded)
    codes = space.actions(parent)
    asleep = frozenset(sleep.split(SEPARATOR)) if sleep else frozenset()
    reduce_sleep = space.sleeps()
    order = space.order()
    out = []
    for i, code in enumerate(codes):
        if code in asleep:
            continue
        taken = space.take(parent, code)
        if taken is None:
            continue
        child, broken = taken
        t = space.canonical(child)
        child_encoded = marshal.dumps(t, MARSHAL_VERSION)
        key = space.key(t, child_encoded)
        if key == parent_key:
            continue
        child_sleep = ""
        if reduce_sleep:
            # Godefroid: the actions tried before this one here, and those this state sleeps on,
            # that commute with it, need not be tried after it.
            child_sleep = SEPARATOR.join([x for j, x in enumerate(codes) if (j < i or x in asleep) and x != code
                                          and space.independent(parent, x, code)])
        out.append(Successor(code, child_encoded, key,
                             tuple(sorted(broken, key=order.__getitem__)) if broken else (), child_sleep))
    return out


# -- the engine-neutral result --------------------------------------------------------------------


@dataclass
class Level:
    """What one depth gave: its new states, the transitions out of the level before, and time."""

    depth: int
    new_states: int
    transitions: int
    seconds: float
    distinct_states: int
    resumed: bool = False  # found by an earlier run of the same search (a resumed Spark search)


@dataclass
class Outcome:
    """A search's result, engine-neutral: ``states_per_depth[d]`` counts the states first reached
    at depth ``d`` (``[1, ...]`` for the root); ``violations`` maps an invariant to its depth and
    shortest path."""

    states_per_depth: list[int]
    transitions: int
    complete: bool
    exhausted: bool
    violations: dict[str, tuple[int, str]]
    stopped: str | None = None  # why an incomplete search stopped

    @property
    def distinct_states(self) -> int:
        return sum(self.states_per_depth)

    @property
    def depth(self) -> int:
        """The deepest level reached (every state up to it was found)."""
        return len(self.states_per_depth) - 1

    @property
    def diameter(self) -> int | None:
        """Of an exhausted space: the deepest level with a new state (every state is reached
        within this many steps); None when the search did not exhaust it."""
        if not self.exhausted:
            return None
        return max(d for d, n in enumerate(self.states_per_depth) if n)


def reached(until: frozenset[str], violations: dict[str, tuple[int, str]]) -> str | None:
    """Why a search with ``until`` stops after this level (None: it goes on)."""
    hit = sorted(until & set(violations))
    return f"{', '.join(hit)} broken (--until)" if hit else None


def note_violations(found: dict[str, tuple[int, str]], depth: int, path: str, broken: Iterable[str]) -> None:
    """Keep, per invariant, the smallest depth and then the smallest path."""
    for name in broken:
        old = found.get(name)
        if old is None or (depth, path) < old:
            found[name] = (depth, path)


# -- the local engine -----------------------------------------------------------------------------

# Levels smaller than this are expanded in the calling process even when workers are asked for.
PARALLEL_FROM = 2048
# What a forked worker reads: the level being expanded (set just before the pool forks).
_LEVEL: dict[str, Any] = {}


class MemoryLevel:
    """A level's new states kept in memory (a search without a work directory)."""

    def __init__(self) -> None:
        self.states: list[tuple[str, bytes, str]] = []

    def __len__(self) -> int:
        return len(self.states)

    def append(self, path: str, packed: bytes, sleep: str, _key: bytes, _arrival: int) -> None:
        self.states.append((path, packed, sleep))


def _expand_range(bounds: tuple[int, int]) -> tuple[int, list[tuple[int, str, bytes, bytes | None, tuple[str, ...], str]]]:
    """A worker's part of a level: the states ``frontier[lo:hi]`` expanded.  Returns the number
    of transitions and, in order, every successor that is a candidate new state (not visited
    before the level, not earlier in this range: ``packed`` set) or broke an invariant
    (``(parent, code, key, packed or None, broken, sleep)``).  What it leaves out, the calling
    process would have found visited."""
    lo, hi = bounds
    space, frontier, visited = _LEVEL["space"], _LEVEL["frontier"], _LEVEL["visited"]
    context = space.context()
    seen: set[bytes] = set()
    out = []
    transitions = 0
    for i in range(lo, hi):
        _path, state, sleep = frontier[i]
        for s in expand(space, state, sleep, context):
            transitions += 1
            fresh = s.key not in visited and s.key not in seen
            if fresh:
                seen.add(s.key)
            if fresh or s.broken:
                out.append((i, s.code, s.key, pack(s.state) if fresh else None, s.broken, s.sleep))
    return transitions, out


def _parallel_level(space: SearchSpace, frontier: Any, visited: VisitedSet, nxt: Any, violations: dict[str, tuple[int, str]],
                    depth: int, workers: int, on_state: Callable[[int, int, int], None],
                    should_stop: Callable[[int], str | None], distinct: int) -> tuple[str | None, int]:
    """One level expanded by ``workers`` forked processes, merged here in frontier order (what
    the one-process loop does, transition for transition).  Returns why it stopped (None when
    the level is whole) and the transitions merged."""
    chunk = max(64, min(2048, len(frontier) // (workers * 16)))
    ranges = [(lo, min(lo + chunk, len(frontier))) for lo in range(0, len(frontier), chunk)]
    _LEVEL.update(space=space, frontier=frontier, visited=visited.hot)
    transitions = 0
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_quiet_worker) as pool:
            for (lo, _hi), (n, successors) in zip(ranges, pool.imap(_expand_range, ranges)):
                on_state(depth, lo, len(frontier))
                reason = should_stop(distinct + len(nxt))
                if reason:
                    pool.terminate()
                    return reason, transitions
                transitions += n
                parent, path = -1, ""
                for i, code, key, packed, broken, sleep in successors:
                    if i != parent:  # successors come grouped by parent: read its path once
                        parent, path = i, frontier[i][0]
                    child_path = path + SEPARATOR + code if path else code
                    if broken:
                        note_violations(violations, depth, child_path, broken)
                    if packed is not None and key not in visited:
                        arrival = len(visited.runs)
                        visited.add(key)
                        nxt.append(child_path, packed, sleep, key, arrival)
    finally:
        _LEVEL.clear()
    return None, transitions


def _quiet_worker() -> None:
    """Workers leave Ctrl-C to the calling process, which stops them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def search_local(space: SearchSpace, on_level: Callable[[Level], None] = lambda _level: None,
                 should_stop: Callable[[int], str | None] = lambda _states: None,
                 clock: Callable[[], float] = lambda: 0.0, found: dict[str, tuple[int, str]] | None = None,
                 on_state: Callable[[int, int, int], None] = lambda _d, _done, _n: None,
                 until: frozenset[str] = frozenset(), workers: int = 1, work: Path | None = None,
                 memory: int | None = None, visited_out: list[VisitedSet] | None = None) -> Outcome:
    """Breadth-first search of ``space`` in this process; the visited set holds 16-byte keys.

    ``on_level`` hears each finished depth; ``should_stop(distinct_states)`` may end the search
    between states (a state limit, a time limit, an interrupt) with its reason.  ``clock`` only
    times the levels for ``on_level``; nothing the search decides depends on it.  ``found``: the
    dict the violations are kept in as they are found (a caller's progress reads it).
    ``on_state(depth, expanded, frontier)`` hears every 1,024th state of a level (a heartbeat).
    ``until``: stop after the first level where one of these invariants broke.
    ``workers``: processes that expand a level's states (forked per level, each a contiguous
    range of the frontier); this process merges their successors in frontier order, so the
    counts, violations and paths are those of one process.
    ``work``: a work directory (``emulator.levels``): every whole level is kept there and the
    same call resumes after the last one.  ``memory``: keys the visited set may hold in memory
    (the rest on disk; needs ``work``).  ``visited_out`` receives the visited set (its ``peak``).
    """
    if memory is not None and work is None:
        raise ExploreError("a memory budget needs a work directory")
    store = None if work is None else LevelStore(Path(work), space.identity())
    visited = VisitedSet(None if work is None else Path(work), memory)
    if visited_out is not None:
        visited_out.append(visited)
    context = space.context()
    violations: dict[str, tuple[int, str]] = {} if found is None else found
    frontier: Any
    if store is not None and store.whole_levels:
        levels = store.progress["levels"]
        violations.update({k: (v[0], v[1]) for k, v in store.progress["violations"].items()})
        per_depth = [lv["new_states"] for lv in levels]
        transitions = sum(lv["transitions"] for lv in levels)
        store.load_visited(visited)
        frontier = store.frontier(len(per_depth) - 1)
        if len(per_depth) > 1:
            on_level(Level(len(per_depth) - 1, per_depth[-1], levels[-1]["transitions"], 0.0, sum(per_depth), resumed=True))
    else:
        key, encoded, broken = root_entry(space)
        note_violations(violations, 0, "", broken)
        per_depth, transitions = [1], 0
        first: Any = MemoryLevel() if store is None else store.begin(0, visited)
        visited.add(key)
        first.append("", pack(encoded), "", key, 0)
        if store is None:
            frontier = first.states
        else:
            store.commit(first, visited, {"depth": 0, "transitions": 0}, violations)
            frontier = store.frontier(0)
    try:
        for depth in range(len(per_depth), space.depth() + 1):
            if per_depth[-1] == 0:
                return Outcome(per_depth, transitions, True, True, violations)
            reason = reached(until, violations)
            if reason:
                return Outcome(per_depth, transitions, False, False, violations, reason)
            began = clock()
            level_transitions = 0
            nxt: Any = MemoryLevel() if store is None else store.begin(depth, visited)
            distinct = sum(per_depth)
            if workers > 1 and len(frontier) >= PARALLEL_FROM:
                reason, level_transitions = _parallel_level(space, frontier, visited, nxt, violations, depth, workers,
                                                            on_state, should_stop, distinct)
            else:
                reason = None
                for done in range(len(frontier)):
                    if not done & 1023:
                        on_state(depth, done, len(frontier))
                    reason = should_stop(distinct + len(nxt))
                    if reason:
                        break
                    path, state, sleep = frontier[done]
                    for s in expand(space, state, sleep, context):
                        level_transitions += 1
                        child_path = path + SEPARATOR + s.code if path else s.code
                        if s.broken:
                            note_violations(violations, depth, child_path, s.broken)
                        if s.key not in visited:
                            arrival = len(visited.runs)
                            visited.add(s.key)
                            nxt.append(child_path, pack(s.state), s.sleep, s.key, arrival)
            if reason:
                if store is not None:
                    nxt.discard()
                return Outcome(per_depth, transitions, False, False, violations, reason)
            seconds = clock() - began
            if store is None:
                new_states = len(nxt)
                frontier = nxt.states
            else:
                # no seconds in the work directory: its files are the same bytes on every run
                new_states, _dropped = store.commit(nxt, visited, {"depth": depth, "transitions": level_transitions},
                                                    violations)
                frontier.close()
                frontier = store.frontier(depth)
            transitions += level_transitions
            per_depth.append(new_states)
            on_level(Level(depth, new_states, level_transitions, seconds, sum(per_depth)))
        # states at the last depth are found and judged but not expanded
        return Outcome(per_depth, transitions, True, per_depth[-1] == 0, violations)
    finally:
        if store is not None:
            frontier.close()
