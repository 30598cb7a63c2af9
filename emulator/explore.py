"""The partition family's search space: what ``replemu explore`` searches for ``hw`` ... ``kip966``.

The TLA+ model of Kafka replication is checked by breadth-first search over its actions;
``replemu explore`` does the same over replemu's own partition, at the level of detail the core
models (the HW's round-trip lag, lost responses, process and power crashes with recovery points,
HW checkpoints, the controller).  The engine is ``emulator.search`` (family-neutral); this module
is the partition's side of it:

* ``Bounds`` and the step alphabet (``CODE_OF_KIND``): what an edge may be, and how far to go;
* ``root``: the initial partition after its first election (depth 0);
* ``enabled_codes`` / ``step_of``: a state's steps, each named by a short *step code* (``F2``,
  ``E3o``, ``C1p`` ...), and the contract step a code names;
* ``Space``: the search's hooks (``emulator.search.SearchSpace``) on those, the canonical
  encoding (``emulator.explore_state``) and the reductions (``emulator.explore_reduce``);
* what the family says of a search (``emulator.partition_family``): the header line, the result
  object's fields, a violation's shortest path as a scenario file.

Verdicts are judged per state, as a run ending there would be: the checker's "already reported"
sets are not part of a state (so a violation is reported at every state that has it, and the
first one found is the shortest), and the final tier (``EventualConvergence``) is judged in
every state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from . import kraft
from .config import Config, config_to_dict, parse_config
from .explore_reduce import Reduction, independent, symmetric_key
from .explore_state import STATE_ENCODING, canonical, restore
from .invariants import INVARIANT_NAMES, REGISTRY
from .replica import Role
from .replica_manager import newer_requests
from .run import Replay, effective_variant, run_scenario
from .scenario import Scenario
from .search import SEPARATOR, Counters, ExploreError, SearchBounds, SearchSpace, digest
from .search_command import (
    Counterexample,
    SearchOption,
    counterexample_name,
    parse_alphabet,
    parse_until,
)
from .state import clone
from .steps import (
    STEP_TABLE,
    AlterPartition,
    CheckpointHw,
    ControllerRemove,
    Crash,
    CrashMode,
    Elect,
    Fence,
    Fetch,
    FetchResponse,
    Flush,
    LagMetadata,
    LeaderAndIsr,
    LogInfo,
    Produce,
    Reassign,
    Restart,
    ShrinkIsr,
    Shutdown,
    Step,
    StepKind,
    Tick,
    Unfence,
)
from .variants import ProtocolVariant

# The one table of step codes: a code is this letter, the replica, then a flag (``F2x``).
# Codes compare as strings, so the letters fix the order in which a state's steps are tried.
CODE_OF_KIND: dict[StepKind, str] = {
    StepKind.CRASH: "C", StepKind.ELECT: "E", StepKind.FETCH: "F", StepKind.CHECKPOINT_HW: "H",
    StepKind.LEADER_AND_ISR: "L", StepKind.PRODUCE: "P", StepKind.RESTART: "R", StepKind.SHRINK_ISR: "S",
    StepKind.TICK: "T", StepKind.FLUSH: "U", StepKind.CONTROLLER_REMOVE: "X",
    StepKind.ALTER_PARTITION: "A", StepKind.SHUTDOWN: "D", StepKind.LOG_INFO: "G", StepKind.FENCE: "K",
    StepKind.UNFENCE: "N", StepKind.LAG_METADATA: "M", StepKind.REASSIGN: "Y",
}
KIND_OF_CODE: dict[str, StepKind] = {letter: kind for kind, letter in CODE_OF_KIND.items()}
assert set(CODE_OF_KIND) == set(StepKind) and len(KIND_OF_CODE) == len(StepKind), "one distinct code letter per step kind"


def step_code(kind: StepKind, replica: int | None = None, flag: str = "") -> str:
    return CODE_OF_KIND[kind] + ("" if replica is None else str(replica)) + flag


# Step kinds searched when --steps is not given: everything but tick (lag expiry grows the clock
# without bound, so it is opt-in), lag_metadata (KRaft brokers apply the metadata log at once
# unless it is asked for) and reassign (the replica order is fixed unless it is asked for);
# checkpoint_hw and flush only count when the config makes them explicit (with every_step they
# happen at the end of every step anyway).
DEFAULT_ALPHABET: tuple[StepKind, ...] = tuple(k for k in StepKind
                                               if k not in (StepKind.TICK, StepKind.LAG_METADATA, StepKind.REASSIGN))


@dataclass(frozen=True, slots=True)
class Bounds(SearchBounds):
    """How far the search goes.

    ``depth``: steps after the first election.  ``records``: records produced in all (each
    produce writes one, named v1, v2, ...).  ``epochs``: the highest leader epoch the controller
    may write (the first election writes 0).  ``crashes`` / ``power_crashes``: process crashes
    and power losses in all.
    """

    depth: int
    records: int = 2
    epochs: int = 2
    crashes: int = 1
    power_crashes: int = 0


# The budgets of ``Bounds`` a path spends: their places in its ``Counters``.
RECORDS, CRASHES, POWER_CRASHES = 0, 1, 2


@dataclass(frozen=True)
class Space(SearchSpace):
    """What is searched: the partition (replicas, config, variant), the bounds, the alphabet and
    the reductions; and the engine's hooks on it (``emulator.search.SearchSpace``)."""

    replicas: tuple[int, ...]
    config: Config
    variant: ProtocolVariant
    bounds: Bounds
    alphabet: tuple[StepKind, ...] = DEFAULT_ALPHABET
    reduce: Reduction = Reduction()

    def __post_init__(self) -> None:
        if len(self.replicas) < 1:
            raise ExploreError("a partition needs at least one replica")
        unknown = [k for k in self.alphabet if not isinstance(k, StepKind)]
        if unknown:
            raise ExploreError(f"unknown step kinds {unknown}")

    @property
    def template(self) -> Replay:
        """A replay of this partition: what every decoded state takes its assignment, config and
        variant from (they are not encoded per state)."""
        return Replay(self.replicas, self.config, self.variant)

    def has(self, kind: StepKind) -> bool:
        return kind in self.alphabet

    @property
    def symmetric(self) -> bool:
        """Whether states are merged up to a renaming of the replicas (``Reduction.symmetry``,
        where it is sound: ZooKeeper variants, replicas numbered 1..n)."""
        return (self.reduce.symmetry and self.variant.metadata != "kraft" and len(self.replicas) > 1
                and self.replicas == tuple(range(1, len(self.replicas) + 1)))

    @property
    def explicit_checkpoints(self) -> bool:
        return self.config.hw_checkpoint == "explicit"

    @property
    def explicit_flushes(self) -> bool:
        return self.config.log_flush == "explicit"

    # -- the engine's hooks (emulator.search.SearchSpace): a state is (replay, counters) ----------

    def depth(self) -> int:
        return self.bounds.depth

    def root_state(self) -> tuple[Any, list[str]]:
        replay, counters, _steps, broken = root(self)
        return (replay, counters), broken

    def context(self) -> Any:
        return self.template

    def restore(self, t: tuple, context: Any) -> Any:
        return restore(context, t)

    def canonical(self, state: Any) -> tuple:
        replay, counters = state
        return canonical(replay, counters)

    def actions(self, state: Any) -> list[str]:
        replay, counters = state
        return enabled_codes(self, replay, counters)

    def take(self, state: Any, code: str) -> tuple[Any, set[str]] | None:
        replay, counters = state
        child = clone(replay)
        step, after = step_of(self, child, counters, code)
        report = child.apply(step)
        broken = {v["invariant"] for v in report.violations}
        final = child.checker.final_findings(child.partition)
        if final:
            broken.update(f["invariant"] for f in final)
        return (child, after), broken

    def key(self, t: tuple, encoded: bytes) -> bytes:
        """The digest of the canonical bytes, or with symmetry the digest of the smallest encoding
        among the tuple's renamings (``symmetric_form``)."""
        return symmetric_key(t) if self.symmetric else digest(encoded)

    def asked_reductions(self) -> list[str]:
        return self.reduce.names

    def reductions(self) -> list[str]:
        """The reductions this search applies: symmetry only where it is sound, sleep sets only
        where a pair of steps can commute (not under KRaft: ``independent``)."""
        kraft_ = self.variant.metadata == "kraft"
        return [n for n in self.reduce.names if (n == "symmetry" and self.symmetric) or (n == "sleep" and not kraft_)]

    def sleeps(self) -> bool:
        return "sleep" in self.reductions()

    def independent(self, state: Any, a: str, b: str) -> bool:
        return independent(state[0], a, b)

    def order(self) -> dict[str, int]:
        return INVARIANT_ORDER

    def step_names(self) -> list[str]:
        return [k.value for k in self.alphabet]

    def identity(self) -> dict[str, Any]:
        reduce = {"reduce": self.reductions()} if self.reductions() else {}  # as before reductions existed, without any
        return {"replicas": list(self.replicas), "protocol": self.variant.name, "knobs": self.variant.knobs(),
                "config": repr(self.config), "alphabet": self.step_names(), "encoding": STATE_ENCODING,
                **reduce, **{k: v for k, v in self.bounds.as_dict().items() if k != "depth"}}



# -- the step alphabet ----------------------------------------------------------------------------


def enabled_codes(space: Space, replay: Replay, counters: Counters) -> list[str]:
    """The codes of every step that can change this state, sorted (the order paths compare in).

    A step that would only be refused (a produce to a replica that does not lead, a restart of
    a live broker) is not offered: it changes nothing.
    """
    p, b = replay.partition, space.bounds
    c = p.controller
    reps = p.replicas
    order = p.assignment
    codes: list[str] = []
    if space.has(StepKind.PRODUCE) and counters.spent[RECORDS] < b.records:
        for r in order:
            if reps[r].presumes_leadership:
                codes += [step_code(StepKind.PRODUCE, r, "a"), step_code(StepKind.PRODUCE, r, "1")]  # acks=all, acks=1
    if space.has(StepKind.FETCH):
        for r in order:
            rep = reps[r]
            if not rep.alive or rep.role is not Role.FOLLOWER:
                continue
            codes += [step_code(StepKind.FETCH, r), step_code(StepKind.FETCH, r, "x")]  # delivered (everything the leader has), lost
            leader = reps.get(rep.believed_leader) if rep.believed_leader is not None else None
            if leader is not None and leader.presumes_leadership and leader.leo - rep.leo >= 2:
                codes.append(step_code(StepKind.FETCH, r, "m"))  # delivered, one record only
    if space.has(StepKind.CRASH):
        for r in order:
            rep = reps[r]
            if not rep.alive:
                continue
            if counters.spent[CRASHES] < b.crashes:
                codes.append(step_code(StepKind.CRASH, r))
            if counters.spent[POWER_CRASHES] < b.power_crashes and rep.recovery_point < rep.leo:
                codes.append(step_code(StepKind.CRASH, r, "p"))  # differs from a process crash only with unflushed records
    if space.has(StepKind.RESTART):
        codes += [step_code(StepKind.RESTART, r) for r in order if not reps[r].alive]
    on_kraft = p.variant.metadata == "kraft"
    next_epoch = c.leader_epoch + 1
    if on_kraft:
        _kraft_codes(space, p, counters, codes)
    if space.has(StepKind.ELECT) and next_epoch <= b.epochs:
        candidates = _kraft_elections(p) if on_kraft else _clean_candidates(p)
        if not candidates and not on_kraft and p.config.unclean_leader_election:
            candidates = [r for r in order if reps[r].alive]
        for r in candidates:
            # to every live replica (leader first), to the leader only, to nobody yet
            codes += [step_code(StepKind.ELECT, r, flag) for flag in ("", "o", "n")]
    if space.has(StepKind.LEADER_AND_ISR):
        for r in order:
            rep = reps[r]
            if not rep.alive:
                continue
            newer = newer_requests(p, rep)
            epochs = sorted({q.leader_epoch for q in newer if q.leader_epoch > rep.leader_epoch})
            for e in epochs:
                codes.append(step_code(StepKind.LEADER_AND_ISR, r, "" if e == epochs[-1] else f"e{e}"))
            if newer and not epochs:
                codes.append(step_code(StepKind.LEADER_AND_ISR, r))  # an ISR-only change a lagging broker has not applied
    # KRaft's controller removes a broker from the ISR only when it fences it (K) or the broker
    # shuts down (D): the ZooKeeper-era removal of a live broker is not searched there.
    if space.has(StepKind.CONTROLLER_REMOVE) and not on_kraft and (next_epoch <= b.epochs or not p.variant.controller_isr_change_bumps_epoch):
        codes += [step_code(StepKind.CONTROLLER_REMOVE, r) for r in order if r in c.isr]
    if space.has(StepKind.SHRINK_ISR) and c.leader is not None and reps[c.leader].presumes_leadership:
        ls = reps[c.leader].leadership
        assert ls is not None
        # Under KRaft 3.5 an accepted shrink bumps the leader epoch: it needs the epoch budget.
        if ls.in_flight is None and (not (on_kraft and p.variant.controller_isr_change_bumps_epoch) or next_epoch <= b.epochs):
            codes += [step_code(StepKind.SHRINK_ISR, r) for r in order if r in ls.isr and r != c.leader]
    if space.has(StepKind.CHECKPOINT_HW) and space.explicit_checkpoints:
        codes += [step_code(StepKind.CHECKPOINT_HW, r) for r in order if reps[r].alive and reps[r].hw != reps[r].hw_checkpoint]
    if space.has(StepKind.FLUSH) and space.explicit_flushes:
        codes += [step_code(StepKind.FLUSH, r) for r in order if reps[r].alive and reps[r].recovery_point < reps[r].leo]
    if space.has(StepKind.TICK):
        codes.append(step_code(StepKind.TICK))
    return sorted(codes)


def step_of(space: Space, replay: Replay, counters: Counters, code: str) -> tuple[Step, Counters]:
    """The contract step a code names in this state, and the counters after it."""
    kind = KIND_OF_CODE[code[0]]
    p = replay.partition
    if kind is StepKind.TICK:
        return Tick(ms=p.config.replica_lag_time_max_ms + 1), counters
    if kind is StepKind.REASSIGN:  # the target list, one digit per broker; ``Yc``: cancel
        if code[1:] == "c":
            return Reassign(cancel=True), counters
        return Reassign(tuple([int(ch) for ch in code[1:]])), counters
    r, flag = int(code[1]), code[2:]
    if kind is StepKind.PRODUCE:
        value = f"v{counters.spent[RECORDS] + 1}"
        acks = None if (flag == "a") == (p.config.acks == "all") else ("all" if flag == "a" else "1")
        target = None if r == p.controller.leader else r
        return Produce(values=(value,), acks=acks, replica=target), counters.spend(RECORDS)
    if kind is StepKind.FETCH:
        if flag == "x":
            return Fetch(r, response=FetchResponse.LOST), counters
        return Fetch(r, max_records=1 if flag == "m" else None), counters
    if kind is StepKind.CRASH:
        if flag == "p":
            return Crash(r, CrashMode.POWER), counters.spend(POWER_CRASHES)
        return Crash(r), counters.spend(CRASHES)
    if kind is StepKind.ELECT:
        to = {"": None, "o": (r,), "n": ()}[flag]
        if p.variant.metadata == "kraft":  # ElectLeaders: PREFERRED, else the UNCLEAN election that elects r
            preferred, _, error = kraft.election_outcome(p, False)
            return Elect(unclean=None if error is None and preferred == r else True, to=to), counters
        leader = None if r == _controller_choice(p) else r
        return Elect(leader=leader, to=to), counters
    if kind is StepKind.LEADER_AND_ISR:
        return LeaderAndIsr(r, epoch=int(flag[1:]) if flag else None), counters
    if kind is StepKind.SHUTDOWN:
        return Shutdown(r), counters.spend(CRASHES)
    return REPLICA_STEPS[kind](r), counters


# The step kinds whose code names only a replica.
REPLICA_STEPS: dict[StepKind, Callable[[int], Step]] = {
    StepKind.RESTART: Restart, StepKind.CONTROLLER_REMOVE: ControllerRemove, StepKind.SHRINK_ISR: ShrinkIsr,
    StepKind.CHECKPOINT_HW: CheckpointHw, StepKind.FLUSH: Flush, StepKind.FENCE: Fence, StepKind.UNFENCE: Unfence,
    StepKind.ALTER_PARTITION: AlterPartition, StepKind.LOG_INFO: LogInfo, StepKind.LAG_METADATA: LagMetadata,
}


def _kraft_elections(p) -> list[int]:
    """The leaders an ``elect`` can write under KRaft: ElectLeaders PREFERRED's, and UNCLEAN's when
    the topic allows unclean elections (the ZooKeeper search's rule), when they write a change."""
    leaders: list[int] = []
    for unclean in (False, True) if p.config.unclean_leader_election else (False,):
        leader, _, error = kraft.election_outcome(p, unclean)
        if error is None and leader is not None and leader not in leaders:
            leaders.append(leader)
    return leaders


def _controller_choice(p) -> int | None:
    """Who ``elect`` without a leader would choose under ZooKeeper (Kafka's OfflinePartitionLeaderSelector)."""
    c = p.controller
    live_isr = [r for r in p.assignment if r in c.isr and p.replicas[r].alive]
    if live_isr:
        return live_isr[0]
    live = [r for r in p.assignment if p.replicas[r].alive]
    return live[0] if live and p.config.unclean_leader_election else None


def _clean_candidates(p) -> list[int]:
    """Who a clean election may choose under ZooKeeper: the live ISR."""
    return [r for r in p.assignment if r in p.controller.isr and p.replicas[r].alive]


def _kraft_codes(space: Space, p, counters: Counters, codes: list[str]) -> None:
    """The KRaft steps a search takes: a clean shutdown of a live broker (it counts as a crash),
    the fencing of a dead broker the controller still trusts (its session timing out), an
    AlterPartition answer (config alter_partition: explicit), and GetReplicaLogInfo answers
    during unclean recovery.  A restart registers and unfences at once (no unfence step)."""
    c, reps, order, b = p.controller, p.replicas, p.assignment, space.bounds
    if space.has(StepKind.SHUTDOWN) and counters.spent[CRASHES] < b.crashes:
        codes += [step_code(StepKind.SHUTDOWN, r) for r in order if reps[r].alive]
    if space.has(StepKind.FENCE):
        codes += [step_code(StepKind.FENCE, r) for r in order if not reps[r].alive and r not in c.fenced]
    if space.has(StepKind.ALTER_PARTITION) and p.config.alter_partition == "explicit":
        codes += [step_code(StepKind.ALTER_PARTITION, r) for r in order
                  if reps[r].presumes_leadership and reps[r].leadership is not None and reps[r].leadership.awaiting_answer]
    if space.has(StepKind.REASSIGN):  # opt-in (--steps)
        y = CODE_OF_KIND[StepKind.REASSIGN]
        # a replica moves to the front (the preferred leader)
        codes += [step_code(StepKind.REASSIGN, r, "".join([str(x) for x in order if x != r])) for r in order[1:]]
        # A removal and a cancel bump the leader epoch (a replica leaves the list): within --epochs.
        bump_ok = c.leader_epoch + 1 <= b.epochs
        if c.adding or c.removing:  # cancel the reassignment in progress
            if bump_ok:
                codes.append(y + "c")
        else:  # remove one replica (complete at once), or add back a broker a removal left out
            if len(order) > 1 and bump_ok:
                codes += [y + "".join([str(x) for x in order if x != r]) for r in order]
            codes += [y + "".join([str(x) for x in order]) + str(x) for x in sorted(reps) if x not in order]
    if space.has(StepKind.LAG_METADATA):  # opt-in (--steps): a broker stops applying the metadata log
        codes += [step_code(StepKind.LAG_METADATA, r) for r in order if reps[r].alive and r not in c.lagging]
    if space.has(StepKind.LOG_INFO) and p.variant.unclean_recovery in ("balanced", "proactive"):
        if c.leader is None or c.leader in c.fenced:
            codes += [step_code(StepKind.LOG_INFO, r) for r in order
                      if reps[r].alive and r not in c.fenced and r not in c.log_info]


# -- states and their successors ----------------------------------------------------------------


def root(space: Space) -> tuple[Replay, Counters, list[Step], list[str]]:
    """The initial partition after its first election (the controller's choice, every replica
    told at once): depth 0.  Returns the replay, its counters, the steps taken and the invariants
    they broke (none, for any sound variant)."""
    replay = Replay(space.replicas, space.config, space.variant)
    first = Elect()
    report = replay.apply(first)
    broken = sorted({v["invariant"] for v in report.violations} | _final_broken(replay))
    return replay, Counters((0, 0, 0)), [first], broken


def _final_broken(replay: Replay) -> set[str]:
    return {f["invariant"] for f in replay.checker.final_findings(replay.partition)}


INVARIANT_ORDER = {inv.name: i for i, inv in enumerate(REGISTRY)}


def replay_path(space: Space, path: str) -> list[Step]:
    """The contract steps of a path (its first election included), replayed from the root."""
    replay, counters, steps, _ = root(space)
    for code in path.split(SEPARATOR) if path else []:
        if code not in enabled_codes(space, replay, counters):
            raise ExploreError(f"step code {code!r} is not enabled after {len(steps)} steps of path {path!r}")
        step, counters = step_of(space, replay, counters, code)
        replay.apply(step)
        steps.append(step)
    return steps


# -- what the partition family says of a search (``emulator.partition_family``) --------------------

# The flags of ``replemu explore`` a partition search takes, with their defaults (the engine's
# --workers, --memory and --master among them: its levels checkpoint on either engine).
SEARCH_OPTIONS: tuple[SearchOption, ...] = (
    SearchOption("depth", required=True), SearchOption("replicas", 2), SearchOption("records", 2),
    SearchOption("epochs", 2), SearchOption("crashes", 1), SearchOption("power_crashes", 0, unset=0),
    SearchOption("steps"), SearchOption("until"), SearchOption("config", [], unset=[]), SearchOption("master"),
    SearchOption("workers"), SearchOption("memory"), SearchOption("reduce", "none", unset="none"),
)


def search_spaces(protocols: list[str], knobs: dict[str, Any], options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
    """The spaces of ``replemu explore`` (one per protocol) and its ``--until``, from its options
    (``SEARCH_OPTIONS``; ``config``: the ``--config`` values by key).  ``ValueError`` (a
    ``ConfigError``, an ``ExploreError``) names what is wrong."""
    replicas = options["replicas"]
    config = parse_config(options["config"], replicas)
    alphabet = parse_alphabet(options["steps"], StepKind, DEFAULT_ALPHABET)
    until = parse_until(options["until"], INVARIANT_NAMES)
    bounds = Bounds(options["depth"], options["records"], options["epochs"], options["crashes"], options["power_crashes"])
    reduce = Reduction.parse(options["reduce"])
    ids = tuple(range(1, replicas + 1))
    return [Space(ids, config, effective_variant(p, config, knobs), bounds, alphabet, reduce) for p in protocols], until


def describe_search(space: Space) -> tuple[str, str]:
    """What the first line of ``replemu explore`` says of the space: before the engine, and after it."""
    b, c = space.bounds, space.config
    return (f"replicas {len(space.replicas)}, depth {b.depth}, records {b.records}, epochs 0..{b.epochs}, crashes {b.crashes}, "
            f"power crashes {b.power_crashes}, steps {','.join(space.step_names())}",
            f"; config min_insync_replicas={c.min_insync_replicas} unclean_leader_election={str(c.unclean_leader_election).lower()} "
            f"hw_checkpoint={c.hw_checkpoint} log_flush={c.log_flush}"
            + (f" alter_partition={c.alter_partition}" if c.alter_partition != "every_step" else ""))


def search_notes(space: Space) -> list[str]:
    """Reductions asked for that this space cannot apply, and why."""
    skipped = sorted(set(space.asked_reductions()) - set(space.reductions()))
    if not skipped:
        return []
    return [f"no {' or '.join(skipped)} reduction under KRaft (the controller elects in assignment order; restarts and "
            "shutdowns write the controller): docs/explore.md"]


def search_result(space: Space) -> dict[str, Any]:
    """The fields of the result object of ``--json`` that say what was searched."""
    return {"protocol": space.variant.name, "replicas": len(space.replicas), "bounds": space.bounds.as_dict()}


def counterexample(space: Space, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
    """A violating path as a scenario file: its contract steps (the first election included), the
    knobs in its config (so it replays with plain ``replemu run --check``), and an expect block
    with every invariant its replay breaks."""
    protocol, b = space.variant.name, space.bounds
    steps = tuple(replay_path(space, path))
    config = space.config
    if knobs:
        config = replace(config, knobs=tuple(sorted({**dict(config.knobs), **knobs}.items())))
    scenario = Scenario(name=counterexample_name(protocol, invariant), replicas=space.replicas, steps=steps, config=config)
    found = [v["invariant"] for v in run_scenario(scenario, protocol)["violations"]]
    description = (f"{invariant} under {protocol}: a shortest path ({depth} steps after the first election), found by "
                   f"replemu explore --replicas {len(space.replicas)} --depth {b.depth} --records {b.records} --epochs {b.epochs} "
                   f"--crashes {b.crashes} --power-crashes {b.power_crashes}. Search path: {path}")
    return Counterexample({"name": scenario.name, "description": description, "replicas": list(space.replicas),
                           "config": config_to_dict(config), "steps": [STEP_TABLE.to_dict(s) for s in steps],
                           "expect": {protocol: {"violations": found}}})
