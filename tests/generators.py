"""Scenario generators for the property tests: programs of phases that reach deep states.

A scenario is drawn as a *program of phases*, the way a workload and a controller act on a
partition: produce / fetch rounds until the HW moves on every follower, a leader that takes
records and fails before its followers have them, crashes (process and power) followed by the
controller's reaction (``controller_remove``, an election) and a restart + ``leader_and_isr``,
elections (the controller's choice, a preferred leader, fast elections whose ``to`` is a subset
so that some replicas hear late, and an old leader still taking writes meanwhile), leadership
bouncing back to a leader that never heard it was replaced, ISR shrinks by the leader, lag
expiry (``tick``), explicit ``checkpoint_hw`` / ``flush``, and long runs.

Each phase reads a *shadow* ``Replay`` that is stepped while drawing, so replica ids come from
the live state as a controller would choose them (fetch from a live follower, restart a stopped
broker, remove a dead broker from the ISR, deliver a pending LeaderAndIsr) and few steps bounce
off with an error answer.  The steps are plain scenario steps: replaying them under another
variant than the shadow's is valid, only the error answers may differ.

Hypothesis shrinks the choice sequence; the first option of every choice is the simplest
(steady replication), so a shrunk counterexample is a short program of the phases it needs.
``measure`` reports how deep a scenario goes (``Depth``); ``tests/test_properties.py`` asserts
the distribution.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from hypothesis import strategies as st

from emulator import (
    VARIANTS,
    Config,
    ProtocolVariant,
    Replay,
    Scenario,
    parse_scenario,
    run_scenario,
)
from emulator.replica import Role
from emulator.steps import (
    STEP_TABLE,
    AlterPartition,
    CheckpointHw,
    ControllerRemove,
    Crash,
    Elect,
    Fence,
    Fetch,
    Flush,
    LeaderAndIsr,
    LogInfo,
    Produce,
    Restart,
    ShrinkIsr,
    Shutdown,
    Step,
    Tick,
    Unfence,
)
from emulator.variants import VARIANT_TABLE

GUARDS = frozenset({"HighWatermarkSanity", "LeaderInIsr", "UniqueLeaderPerEpoch", "OffsetMonotonicity"})

# -- variants ---------------------------------------------------------------------------------

def kip320_reelection(reset: bool) -> ProtocolVariant:
    """kip320 with the re-election rule set: ``reset`` is the TLA+ model's rule (a re-elected
    leader counts only followers that fetched in its new epoch, knob
    ``reset_remote_leo_on_reelection``), else Kafka's code (it keeps the remote LEOs it learned in
    the previous epoch)."""
    return VARIANTS["kip320"].with_knobs({"reset_remote_leo_on_reelection": reset})


def kip320_with_reelection_reset() -> ProtocolVariant:
    return kip320_reelection(True)


def variant_of(protocol: str | ProtocolVariant) -> ProtocolVariant:
    return protocol if isinstance(protocol, ProtocolVariant) else VARIANTS[protocol]


def run_variant(scenario: Scenario, protocol: str | ProtocolVariant, trace: bool = False) -> dict:
    """``run_scenario`` under a preset, or under a preset with knobs changed."""
    variant = variant_of(protocol)
    return run_scenario(scenario, variant.name, trace=trace, knobs=VARIANT_TABLE.overrides(variant))


# -- the program builder ------------------------------------------------------------------------

# Phase kinds, repeated by weight.  The first is what a shrunk phase becomes: steady traffic.
PHASES = (
    ("rounds",) * 6 + ("leader_failover",) * 3 + ("crash_restart",) * 3 + ("election",) * 3
    + ("partial_round",) * 2 + ("leadership_bounce",) * 2 + ("shrink_isr", "lag", "durability", "long_run")
    + ("kraft_lifecycle",) * 2
)
ELECTIONS = ("controller_choice", "preferred", "fast", "unclean")
FOLLOWER_FETCHES = ("twice", "once", "lost", "none", "one_record")

MAX_STEPS = 160  # a program stops adding phases beyond this many steps


class _Program:
    """Draws phases and steps them on a shadow replay; ``steps`` is the scenario."""

    def __init__(self, draw, replicas: tuple[int, ...], config: Config, variant: ProtocolVariant, clean: bool,
                 wild: bool, hear_all: bool, phases: tuple[str, ...] = PHASES) -> None:
        self.draw, self.clean, self.wild, self.hear_all, self.phases = draw, clean, wild, hear_all, phases
        self.replay = Replay(replicas, config, variant)
        self.p = self.replay.partition
        self.config = config
        self.steps: list[Step] = []
        self.produced = 0

    # -- the shadow's state ---------------------------------------------------------------

    def rep(self, rid: int):
        return self.p.replicas[rid]

    def alive(self) -> list[int]:
        return [r for r in self.p.assignment if self.rep(r).alive]

    def dead(self) -> list[int]:
        return [r for r in self.p.assignment if not self.rep(r).alive]

    def leader(self) -> int | None:
        """The controller's leader, if it is up and leading in the controller's epoch."""
        c = self.p.controller
        if c.leader is None:
            return None
        r = self.rep(c.leader)
        if r.presumes_leadership and r.leader_epoch == c.leader_epoch:
            return c.leader
        return None

    def followers(self) -> list[int]:
        return [r for r in self.p.assignment if self.rep(r).alive and self.rep(r).role is Role.FOLLOWER]

    def followers_of(self, leader: int) -> list[int]:
        return [r for r in self.followers() if self.rep(r).believed_leader == leader]

    def pick(self, ids: list[int]) -> int:
        return self.draw(st.sampled_from(ids))

    def subset(self, ids: list[int]) -> list[int]:
        return [r for r in ids if self.draw(st.booleans())]

    # -- stepping -------------------------------------------------------------------------

    def apply(self, step: Step) -> list[dict]:
        """Step the shadow and keep the step, unless the variant's controller refuses it (a KRaft
        election that asks for a leader, an epoch or an ISR ElectLeaders would not write): the
        core changes nothing then, and the scenario leaves the step out."""
        from emulator.kraft import REFUSED

        self.steps.append(step)
        errors = self.replay.apply(step).errors
        if any(e["error"] == REFUSED for e in errors):
            self.steps.pop()
        return errors

    def values(self, count: int) -> tuple[str, ...]:
        first = self.produced
        self.produced += count
        return tuple(f"v{i}" for i in range(first, first + count))

    def deliver_pending(self) -> None:
        """Every live replica processes the LeaderAndIsr it missed (late delivery)."""
        for r in self.alive():
            if self.rep(r).pending_requests:
                self.apply(LeaderAndIsr(replica=r))

    def ensure_leader(self) -> int | None:
        """Make the partition writable as a controller would: late LeaderAndIsr delivered, an
        election if there is no leader, a stopped ISR member restarted if the partition is offline."""
        self.deliver_pending()
        if self.leader() is not None:
            return self.leader()
        errors = self.apply(Elect())
        if any(e["error"] == "PartitionOffline" for e in errors) and self.dead():
            isr_dead = [r for r in self.dead() if r in self.p.controller.isr] or self.dead()
            self.restart(isr_dead[0])
            self.apply(Elect())
        self.deliver_pending()
        return self.leader()

    def produce(self, count: int | None = None, acks: str | None = None, replica: int | None = None) -> None:
        if count is None:
            count = self.draw(st.integers(1, 3))
        self.apply(Produce(values=self.values(count), acks=acks, replica=replica))

    def fetch_pass(self, leader: int) -> None:
        for f in self.followers_of(leader):
            self.apply(Fetch(replica=f))

    def caught_up(self, leader: int) -> bool:
        lead = self.rep(leader)
        return lead.hw == lead.leo and all(self.rep(f).hw == lead.hw for f in self.followers_of(leader))

    # -- phases ---------------------------------------------------------------------------

    def fetch_twice(self, leader: int) -> None:
        """Every follower of ``leader`` fetches twice, in a drawn order: two passes, or each
        follower's two fetches back to back (one fetcher running ahead of another)."""
        order = self.draw(st.permutations(self.followers_of(leader)))
        back_to_back = self.draw(st.booleans())
        for f in [f for f in order for _ in range(2)] if back_to_back else order + order:
            self.apply(Fetch(replica=f))

    def rounds(self, count: int | None = None) -> None:
        """Produce k records, every live follower fetches twice, and more fetch passes until
        the HW reached every follower (at most two)."""
        if count is None:
            count = self.draw(st.integers(1, 3))
        for _ in range(count):
            leader = self.ensure_leader()
            if leader is None:
                return
            self.produce()
            self.fetch_twice(leader)
            for _ in range(2):
                if self.caught_up(leader) or self.leader() != leader:
                    break
                self.fetch_pass(leader)

    def long_run(self) -> None:
        self.rounds(self.draw(st.integers(5, 12)))

    def partial_round(self) -> None:
        """Produce, then each follower fetches twice, once, with the second response lost, not at
        all, or one record: windows where followers hold records without the HW."""
        leader = self.ensure_leader()
        if leader is None:
            return
        self.produce(acks=self.draw(st.sampled_from([None, "1", "all"])))
        for f in self.followers_of(leader):
            how = self.draw(st.sampled_from(FOLLOWER_FETCHES))
            if how == "twice":
                self.apply(Fetch(replica=f))
                self.apply(Fetch(replica=f))
            elif how == "once":
                self.apply(Fetch(replica=f))
            elif how == "lost":
                self.apply(Fetch(replica=f))
                self.apply(Fetch(replica=f, response="lost"))
            elif how == "one_record":
                self.apply(Fetch(replica=f, max_records=1))

    def crash_mode(self) -> str:
        return "process" if self.clean or not self.draw(st.booleans()) else "power"

    def controller_reacts(self, victim: int) -> None:
        """The controller notices a dead broker: out of the ISR (epoch bump), a new leader."""
        if victim in self.p.controller.isr:
            self.apply(ControllerRemove(replica=victim))
        if self.p.controller.leader is None:
            self.apply(Elect())

    def restart(self, victim: int) -> None:
        if self.rep(victim).alive:  # already restarted (ensure_leader brought an offline partition back)
            return
        self.apply(Restart(replica=victim))
        if self.rep(victim).pending_requests:
            self.apply(LeaderAndIsr(replica=victim))

    def leader_failover(self) -> None:
        """The leader appends records (acks=1) that followers have partly or not at all, then
        fails; a new leader takes writes; the old one restarts and must truncate its tail."""
        leader = self.ensure_leader()
        if leader is None:
            return
        self.produce(acks=self.draw(st.sampled_from(["1", None, "0"])))
        for f in self.followers_of(leader):
            how = self.draw(st.sampled_from(("none", "one_record", "once")))
            if how != "none":
                self.apply(Fetch(replica=f, max_records=1 if how == "one_record" else None))
        self.apply(Crash(replica=leader, mode=self.crash_mode()))
        self.controller_reacts(leader)
        self.rounds(self.draw(st.integers(0, 2)))
        self.restart(leader)
        self.rounds(1)

    def crash_restart(self) -> None:
        alive = self.alive()
        if not alive:
            return
        leader = self.leader()
        victim = self.pick(([leader] if leader is not None else []) + [r for r in alive if r != leader])
        self.apply(Crash(replica=victim, mode=self.crash_mode()))
        if self.draw(st.booleans()):
            self.controller_reacts(victim)
        self.rounds(self.draw(st.integers(0, 2)))
        self.restart(victim)

    def election(self) -> None:
        kind = self.draw(st.sampled_from(ELECTIONS))
        alive = self.alive()
        if not alive:
            return
        c = self.p.controller
        live_isr = [r for r in alive if r in c.isr]
        old = self.leader()
        if kind == "preferred" and live_isr:
            self.apply(Elect(leader=self.pick(live_isr)))
        elif kind == "unclean" and not self.clean and [r for r in alive if r not in c.isr]:
            self.apply(Elect(leader=self.pick([r for r in alive if r not in c.isr]), unclean=True))
        elif kind == "controller_choice" or self.hear_all:  # hear_all: never a fast election, also as a fallback
            self.apply(Elect())
        else:
            self.fast_election(alive, live_isr, old)
            return
        self.deliver_pending()
        self.rounds(1)

    def fast_election(self, alive: list[int], live_isr: list[int], old: int | None) -> None:
        """LeaderAndIsr reaches only ``to`` now; the others act on the old epoch meanwhile (the
        old leader may take writes, followers fetch from it).  Often the followers are uneven
        before (some hold the leader's tail, some not).  Then the late ones hear: at the end of
        this phase; after the controller already moved leadership again (a replica that never
        processed this epoch jumps to the next one: a zombie leader re-elected with its id); or
        only when a later phase delivers."""
        if old is not None and self.draw(st.booleans()):
            self.produce(acks="1")
            for f in self.followers_of(old):
                how = self.draw(st.sampled_from(("twice", "none", "once")))
                for _ in range({"twice": 2, "none": 0, "once": 1}[how]):
                    self.apply(Fetch(replica=f))
        new = self.pick(live_isr) if live_isr else None
        to = self.subset(alive)
        if new is not None and new not in to and self.draw(st.booleans()):
            to = [new] + to
        self.apply(Elect(leader=new, to=tuple(to)))
        for _ in range(self.draw(st.integers(0, 3))):
            action = self.draw(st.sampled_from(("produce_new", "produce_old", "fetch")))
            if action == "produce_new" and self.leader() is not None:
                self.produce()
            elif action == "produce_old" and old is not None and self.rep(old).presumes_leadership:
                self.produce(acks="1", replica=old)
            elif self.followers():
                self.apply(Fetch(replica=self.pick(self.followers())))
        then = self.draw(st.sampled_from(("deliver", "elect_again", "later")))
        if then == "later":
            return
        if then == "elect_again":
            live_isr = [r for r in self.alive() if r in self.p.controller.isr]
            back = old if old in live_isr and self.draw(st.booleans()) else None
            self.apply(Elect(leader=back))  # the old leader back, or the controller's choice
        for r in self.alive():
            pending = self.rep(r).pending_requests
            if not pending:
                continue
            if len(pending) > 1 and self.draw(st.booleans()):
                self.apply(LeaderAndIsr(replica=r, epoch=pending[0].leader_epoch))  # an older one first
            if self.rep(r).pending_requests:
                self.apply(LeaderAndIsr(replica=r))
        self.rounds(1)

    def leadership_bounce(self) -> None:
        """Followers uneven (some hold the leader's tail), a fast election moves leadership to
        another ISR member while the old leader does not hear, and the controller moves it back
        (preferred leader election) before the old leader processed the first request: the old
        leader is re-elected with its id, never having stopped leading."""
        old = self.ensure_leader()
        if old is None:
            return
        self.produce(acks="1")
        for f in self.followers_of(old):
            for _ in range(self.draw(st.sampled_from((2, 0, 1)))):
                self.apply(Fetch(replica=f))
        others = [r for r in self.alive() if r != old and r in self.p.controller.isr]
        if not others:
            self.rounds(1)
            return
        new = self.pick(others)
        to = None if self.hear_all else (new, *self.subset([r for r in others if r != new]))
        self.apply(Elect(leader=new, to=to))
        for _ in range(self.draw(st.integers(0, 2))):
            if self.leader() is not None and self.draw(st.booleans()):
                self.produce()
            elif self.followers():
                self.apply(Fetch(replica=self.pick(self.followers())))
        if old in self.p.controller.isr and self.rep(old).alive:
            self.apply(Elect(leader=old))
        self.deliver_pending()
        if self.leader() is not None:
            self.fetch_twice(self.leader())
        self.rounds(1)

    def shrink_isr(self) -> None:
        leader = self.ensure_leader()
        if leader is None:
            return
        members = [r for r in self.rep(leader).leadership.isr if r != leader]
        if not members:
            self.rounds(1)
            return
        out = self.pick(members)
        self.apply(ShrinkIsr(replica=out))
        self.produce()
        for f in self.followers_of(leader):
            if f != out:
                self.apply(Fetch(replica=f))
        self.rounds(1)

    def lag(self) -> None:
        """Some followers stop fetching while time passes: the leader shrinks the ISR."""
        leader = self.ensure_leader()
        if leader is None:
            return
        self.produce()
        for f in self.subset(self.followers_of(leader)):
            self.apply(Fetch(replica=f))
        lag_max = self.config.replica_lag_time_max_ms
        self.apply(Tick(ms=self.draw(st.sampled_from([lag_max + 1, lag_max // 2, 3 * lag_max]))))
        self.rounds(1)

    def durability(self) -> None:
        """Explicit HW checkpoints and flushes (no-ops with every_step configs), then maybe a
        power failure that loses what was not flushed."""
        self.rounds(1)
        alive = self.alive()
        if not alive:
            return
        which = self.draw(st.sampled_from([None] + alive))
        self.apply(CheckpointHw(replica=which))
        r = self.pick(alive)
        rep = self.rep(r)
        low = min(max(rep.recovery_point, rep.log.start), rep.leo)
        self.apply(Flush(replica=r, offset=self.draw(st.none() | st.integers(low, rep.leo))))
        self.produce(acks="1")
        if not self.clean and self.draw(st.booleans()):
            victim = self.pick(self.alive())
            self.apply(Crash(replica=victim, mode="power"))
            self.controller_reacts(victim)
            self.restart(victim)
        self.rounds(1)

    def kraft_lifecycle(self) -> None:
        """KRaft's broker lifecycle (a ZooKeeper variant refuses its KRaft-only steps): a clean
        shutdown or a crash, the controller fencing the broker, a restart that registers (fenced
        until an unfence, or not), GetReplicaLogInfo answers while the partition has no leader."""
        alive = self.alive()
        if not alive:
            return
        leader = self.leader()
        victim = self.pick(([leader] if leader is not None else []) + [r for r in alive if r != leader])
        if self.draw(st.booleans()):
            self.apply(Shutdown(replica=victim))
        else:
            self.apply(Crash(replica=victim, mode=self.crash_mode()))
        if self.draw(st.booleans()):
            self.apply(Fence(replica=victim))
        if self.p.controller.leader is None:
            for r in self.alive():
                if self.draw(st.booleans()):
                    self.apply(LogInfo(replica=r))
        self.rounds(self.draw(st.integers(0, 2)))
        if not self.rep(victim).alive:
            fenced = self.draw(st.booleans())
            self.apply(Restart(replica=victim, fenced=fenced))
            if fenced:
                self.apply(Unfence(replica=victim))
            if self.rep(victim).pending_requests:
                self.apply(LeaderAndIsr(replica=victim))
        self.rounds(1)

    def answer_alter_partitions(self) -> None:
        """``alter_partition: explicit``: the controller answers the requests in flight, or not yet."""
        for r in self.alive():
            ls = self.rep(r).leadership
            if ls is not None and ls.in_flight is not None and self.draw(st.booleans()):
                self.apply(AlterPartition(replica=r))

    def wild_step(self) -> None:
        """One step with explicit arguments (leader, epoch, ISR, delivery list), valid or not."""
        (kind, args), = self.draw(any_step(list(self.p.assignment))).items()
        self.apply(STEP_TABLE.parse(kind, args, self.p.assignment))

    def run(self, phases: int) -> None:
        self.apply(Elect())
        for _ in range(phases):
            if len(self.steps) >= MAX_STEPS:
                break
            if self.wild and self.draw(st.integers(0, 5)) == 5:
                self.wild_step()
                continue
            getattr(self, self.draw(st.sampled_from(self.phases)))()
            if self.p.config.alter_partition == "explicit":
                self.answer_alter_partitions()


@st.composite
def deep_scenario(draw, protocol: str | ProtocolVariant = "kip320", clean: bool = False, wild: bool = False,
                  hear_all: bool = False, min_replicas: int = 2, phases: tuple[int, int] = (4, 12),
                  only: tuple[str, ...] | None = None) -> Scenario:
    """A program of phases, stepped on a shadow replay of ``protocol`` while drawn.

    ``clean``: no unclean election and no power failure (Faultless holds throughout).
    ``wild``: now and then one step with explicit arguments (``any_step``), valid or not.
    ``hear_all``: no fast elections: every live replica processes each LeaderAndIsr when sent.
    ``only``: draw only these phase kinds (a focused search).
    """
    n = draw(st.integers(min_replicas, 4))
    replicas = tuple(draw(st.permutations(range(1, n + 1))))
    lag = draw(st.sampled_from([10000, 1000]))
    config = Config(
        min_insync_replicas=draw(st.integers(1, min(2, n))),
        unclean_leader_election=False if clean else draw(st.booleans()),
        acks=draw(st.sampled_from(["all", "1", "0"])),
        hw_checkpoint=draw(st.sampled_from(["every_step", "explicit"])),
        log_flush=draw(st.sampled_from(["every_step", "explicit"])),
        replica_lag_time_max_ms=lag,
        alter_partition=draw(st.sampled_from(["every_step", "explicit"])),
    )
    program = _Program(draw, replicas, config, variant_of(protocol), clean, wild, hear_all,
                       PHASES if only is None else tuple(p for p in PHASES if p in only))
    program.run(draw(st.integers(*phases)))
    return Scenario(name="property", replicas=replicas, steps=tuple(program.steps), config=config)


def any_scenario() -> st.SearchStrategy[Scenario]:
    """Deep programs with an explicit-argument step now and then, 1 to 4 replicas (the
    strategy test_compaction.py and test_state.py replay under every variant)."""
    return deep_scenario(wild=True, min_replicas=1)


# -- single steps with explicit arguments --------------------------------------------------------

def any_step(replicas):
    """Any step in its YAML form, explicit leaders, epochs, ISRs and delivery lists included."""
    r = st.sampled_from(replicas)
    ids = st.permutations(replicas).flatmap(lambda p: st.integers(0, len(p)).map(lambda k: list(p[:k])))
    opt = lambda s: st.none() | s  # noqa: E731
    return st.one_of(
        st.builds(lambda l, e, i, t, u: {"elect": {k: v for k, v in dict(leader=l, epoch=e, isr=i, to=t, unclean=u).items() if v is not None}},
                  opt(r), opt(st.integers(0, 8)), opt(st.permutations(replicas).flatmap(lambda p: st.integers(1, len(p)).map(lambda k: list(p[:k])))), opt(ids), opt(st.booleans()))
        .filter(lambda s: "isr" not in s["elect"] or "leader" not in s["elect"] or s["elect"]["leader"] in s["elect"]["isr"]),
        st.builds(lambda x, e: {"leader_and_isr": {"replica": x, **({"epoch": e} if e is not None else {})}}, r, opt(st.integers(0, 8))),
        st.builds(lambda v, a, x: {"produce": {"values": v, **({"acks": a} if a else {}), **({"replica": x} if x else {})}},
                  st.lists(st.sampled_from("abcdef"), min_size=1, max_size=3), opt(st.sampled_from(["all", 1, 0])), opt(r)),
        st.builds(lambda x, m, lost: {"fetch": {"replica": x, **({"max_records": m} if m is not None else {}), "response": "lost" if lost else "delivered"}},
                  r, opt(st.integers(0, 3)), st.booleans()),
        st.builds(lambda x: {"shrink_isr": {"replica": x}}, r),
        st.builds(lambda x: {"controller_remove": {"replica": x}}, r),
        st.builds(lambda x: {"checkpoint_hw": {"replica": x} if x else {}}, opt(r)),
        st.builds(lambda x, o: {"flush": {"replica": x, **({"offset": o} if o is not None else {})}}, r, opt(st.integers(0, 6))),
        st.builds(lambda x, m: {"crash": {"replica": x, "mode": m}}, r, st.sampled_from(["process", "power"])),
        st.builds(lambda x: {"restart": {"replica": x}}, r),
        st.builds(lambda ms: {"tick": {"ms": ms}}, st.integers(0, 30000)),
        st.builds(lambda x: {"shutdown": {"replica": x}}, r),
        st.builds(lambda x: {"fence": {"replica": x}}, r),
        st.builds(lambda x: {"unfence": {"replica": x}}, r),
        st.builds(lambda x: {"restart": {"replica": x, "fenced": True}}, r),
        st.builds(lambda x: {"alter_partition": {"replica": x}}, r),
        st.builds(lambda x: {"log_info": {"replica": x}}, r),
    )


@st.composite
def shallow_scenario(draw):
    """The former generator: independent random steps (most bounce off with an error)."""
    replicas = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True))
    data = {
        "name": "any", "replicas": replicas,
        "config": {"min_insync_replicas": draw(st.integers(1, len(replicas))), "unclean_leader_election": draw(st.booleans()),
                   "hw_checkpoint": draw(st.sampled_from(["every_step", "explicit"])), "log_flush": draw(st.sampled_from(["every_step", "explicit"]))},
        "steps": draw(st.lists(any_step(replicas), max_size=40)),
    }
    return parse_scenario(data)


# -- how deep a scenario goes ----------------------------------------------------------------------

@dataclass(frozen=True)
class Depth:
    steps: int
    error_steps: int  # steps answered with at least one error
    hw_everywhere: bool  # at some step every replica had HW > 0
    leader_changes: int  # the controller's leader became a different broker
    truncated: bool  # a Truncation event, or a follower's LEO went down
    compacted: int  # records Replay.compact(1) dropped at the end


def measure(scenario: Scenario, protocol: str | ProtocolVariant = "kip320") -> Depth:
    replay = Replay(scenario.replicas, scenario.config, variant_of(protocol))
    p = replay.partition
    error_steps = changes = 0
    hw_everywhere = truncated = False
    last_leader = None
    leo = {r: 0 for r in p.assignment}
    for step in scenario.steps:
        report = replay.apply(step)
        error_steps += bool(report.errors)
        hw_everywhere |= all(r.hw > 0 for r in p.replicas.values())
        leader = p.controller.leader
        if leader is not None:
            changes += last_leader is not None and leader != last_leader
            last_leader = leader
        truncated |= any(e["event"] == "Truncation" for e in report.events)
        truncated |= any(r.role is Role.FOLLOWER and r.leo < leo[r.id] for r in p.replicas.values())
        leo = {r.id: r.leo for r in p.replicas.values()}
    replay.finish()
    return Depth(len(scenario.steps), error_steps, hw_everywhere, changes, truncated, dropped_records(replay.compact(1)))


def dropped_records(compaction) -> int:
    """How many records a ``Replay.compact`` answer dropped."""
    return 0 if compaction is None else len(compaction.records)


@dataclass(frozen=True)
class Distribution:
    examples: int
    median_steps: float
    max_steps: int
    hw_everywhere: float
    leader_change: float
    truncation: float
    compacted_examples: int
    compacted_records: int
    error_step_share: float

    @classmethod
    def of(cls, depths: list[Depth]) -> "Distribution":
        n = len(depths)
        total = sum(d.steps for d in depths)
        return cls(
            examples=n,
            median_steps=statistics.median(d.steps for d in depths),
            max_steps=max(d.steps for d in depths),
            hw_everywhere=sum(d.hw_everywhere for d in depths) / n,
            leader_change=sum(d.leader_changes > 0 for d in depths) / n,
            truncation=sum(d.truncated for d in depths) / n,
            compacted_examples=sum(d.compacted > 0 for d in depths),
            compacted_records=sum(d.compacted for d in depths),
            error_step_share=sum(d.error_steps for d in depths) / max(total, 1),
        )

    def __str__(self) -> str:
        return (
            f"{self.examples} examples: median {self.median_steps} steps (max {self.max_steps}); "
            f"HW > 0 on every replica {self.hw_everywhere:.0%}; leader change {self.leader_change:.0%}; "
            f"truncation {self.truncation:.0%}; compaction in {self.compacted_examples} examples "
            f"({self.compacted_records} records dropped); steps answered with an error {self.error_step_share:.1%}"
        )
