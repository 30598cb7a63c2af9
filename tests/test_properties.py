"""Property tests: Hypothesis state machines step the core with random valid steps.

Elections are the controller's own choice (no explicit leader, epoch or ISR).  Rules pick
their replica from the live state (fetch from a follower, restart a stopped broker ...) so
that sequences reach the interesting corners instead of bouncing off errors.

* The guard invariants (HighWatermarkSanity, LeaderInIsr, UniqueLeaderPerEpoch,
  OffsetMonotonicity) check the emulator itself: they never break, in any variant.
* With clean elections and no power loss, kip320 keeps StrongIsr and NoCommittedDataLoss.
* Replaying the recorded steps as a scenario gives the same result, byte for byte, twice.
"""

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from emulator import VARIANTS, Config, Replay, Scenario, run_scenario
from emulator.result import dumps
from emulator.steps import (
    CheckpointHw, ControllerRemove, Crash, Elect, Fetch, Flush, LeaderAndIsr, Produce, Restart, ShrinkIsr, Tick,
)

GUARDS = {"HighWatermarkSanity", "LeaderInIsr", "UniqueLeaderPerEpoch", "OffsetMonotonicity"}


class ReplicationMachine(RuleBasedStateMachine):
    protocol = "kip320"
    clean = False  # True: no unclean election, no power loss

    @initialize(
        n=st.integers(2, 4),
        min_isr=st.integers(1, 2),
        unclean=st.booleans(),
        acks=st.sampled_from(["all", "1", "0"]),
        hw_checkpoint=st.sampled_from(["every_step", "explicit"]),
        log_flush=st.sampled_from(["every_step", "explicit"]),
    )
    def setup(self, n, min_isr, unclean, acks, hw_checkpoint, log_flush):
        self.replica_ids = tuple(range(1, n + 1))
        self.config = Config(
            min_insync_replicas=min_isr, unclean_leader_election=unclean and not self.clean, acks=acks,
            hw_checkpoint=hw_checkpoint, log_flush=log_flush, replica_lag_time_max_ms=1000,
        )
        self.replay = Replay(self.replica_ids, self.config, VARIANTS[self.protocol])
        self.p = self.replay.partition
        self.steps = []
        self.values = 0
        self.apply(Elect())

    def apply(self, step):
        self.steps.append(step)
        self.replay.apply(step)

    def pick(self, data, predicate):
        return data.draw(st.sampled_from([r.id for r in self.p.replicas.values() if predicate(r)]))

    def has(self, predicate):
        return any(predicate(r) for r in self.p.replicas.values())

    # -- steps --------------------------------------------------------------------------
    # One rule draws the step kind from what the live state enables, weighted like a
    # workload.  (Separate @rules would be thinned out by Hypothesis' swarm testing, which
    # disables random subsets of rules per example, so the fault sequences that matter,
    # crash -> restart -> leader_and_isr -> elect, would rarely meet.)

    def enabled(self):
        alive = [r for r in self.p.replicas.values() if r.alive]
        kinds = ["produce"] * 3 + ["elect", "controller_remove", "shrink_isr", "tick", "checkpoint_hw"]
        if any(r.role == "follower" for r in alive):
            kinds += ["fetch"] * 5 + ["fetch_partial_or_lost"] * 2
        if any(r.pending_requests for r in alive):
            kinds += ["leader_and_isr"] * 3
        if any(len(r.pending_requests) > 1 for r in alive):
            kinds += ["leader_and_isr_older_epoch"]
        if alive:
            kinds += ["crash"] * 2 + ["flush"]
        if len(alive) < len(self.replica_ids):
            kinds += ["restart"] * 3
        return kinds

    @rule(data=st.data())
    def step(self, data):
        kind = data.draw(st.sampled_from(self.enabled()), label="kind")
        getattr(self, f"_{kind}")(data)

    def _produce(self, data):
        count = data.draw(st.integers(1, 3))
        acks = data.draw(st.sampled_from([None, "all", "1"]))
        self.values += count
        self.apply(Produce(values=tuple(f"v{self.values - i}" for i in reversed(range(count))), acks=acks))

    def _fetch(self, data):
        self.apply(Fetch(replica=self.pick(data, lambda r: r.alive and r.role == "follower")))

    def _fetch_partial_or_lost(self, data):
        rid = self.pick(data, lambda r: r.alive and r.role == "follower")
        max_records = data.draw(st.sampled_from([None, 1]))
        lost = data.draw(st.booleans())
        self.apply(Fetch(replica=rid, max_records=max_records, response="lost" if lost else "delivered"))

    def _elect(self, data):
        to = data.draw(st.none() | st.lists(st.sampled_from(self.replica_ids), unique=True).map(tuple))
        self.apply(Elect(to=to))

    def _leader_and_isr(self, data):
        self.apply(LeaderAndIsr(replica=self.pick(data, lambda r: r.alive and r.pending_requests)))

    def _leader_and_isr_older_epoch(self, data):
        rid = self.pick(data, lambda r: r.alive and len(r.pending_requests) > 1)
        epoch = data.draw(st.sampled_from([q.leader_epoch for q in self.p.replicas[rid].pending_requests]))
        self.apply(LeaderAndIsr(replica=rid, epoch=epoch))

    def _controller_remove(self, data):
        self.apply(ControllerRemove(replica=data.draw(st.sampled_from(self.replica_ids))))

    def _shrink_isr(self, data):
        self.apply(ShrinkIsr(replica=data.draw(st.sampled_from(self.replica_ids))))

    def _tick(self, data):
        self.apply(Tick(ms=data.draw(st.sampled_from([100, 600, 5000]))))

    def _checkpoint_hw(self, data):
        self.apply(CheckpointHw(replica=data.draw(st.none() | st.sampled_from(self.replica_ids))))

    def _flush(self, data):
        rid = self.pick(data, lambda r: r.alive)
        self.apply(Flush(replica=rid, offset=data.draw(st.none() | st.integers(0, self.p.replicas[rid].leo))))

    def _crash(self, data):
        power = data.draw(st.booleans())
        mode = "power" if power and not self.clean else "process"
        self.apply(Crash(replica=self.pick(data, lambda r: r.alive), mode=mode))

    def _restart(self, data):
        self.apply(Restart(replica=self.pick(data, lambda r: not r.alive)))

    # -- properties -------------------------------------------------------------------------

    def forbidden(self) -> set[str]:
        return set(GUARDS)

    @invariant()
    def forbidden_invariants_hold(self):
        broken = [v for v in self.replay.checker.violations if v["invariant"] in self.forbidden()]
        assert not broken, broken

    def teardown(self):
        if not hasattr(self, "p"):
            return
        self.replay.finish()
        self.forbidden_invariants_hold()
        scenario = Scenario(name="property", replicas=self.replica_ids, steps=tuple(self.steps), config=self.config)
        first = dumps(run_scenario(scenario, self.protocol, trace=True))
        assert first == dumps(run_scenario(scenario, self.protocol, trace=True))
        assert [v["invariant"] for v in run_scenario(scenario, self.protocol)["violations"]] == [
            v["invariant"] for v in self.replay.checker.violations
        ]


class CleanKip320Machine(ReplicationMachine):
    protocol = "kip320"
    clean = True

    def forbidden(self) -> set[str]:
        return GUARDS | {"StrongIsr", "NoCommittedDataLoss"}


SETTINGS = settings(max_examples=150, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def machine_for(protocol: str):
    return type(f"{protocol.capitalize()}Machine", (ReplicationMachine,), {"protocol": protocol})


@pytest.mark.parametrize("protocol", list(VARIANTS))
def test_guard_invariants_never_break(protocol):
    machine = machine_for(protocol)
    machine.TestCase.settings = SETTINGS
    machine.TestCase().runTest()


def test_kip320_keeps_strong_isr_and_committed_data_under_clean_elections():
    CleanKip320Machine.TestCase.settings = settings(SETTINGS, max_examples=300)
    CleanKip320Machine.TestCase().runTest()


class CleanHwMachine(CleanKip320Machine):
    protocol = "hw"


def test_negative_control_the_same_search_finds_the_hw_truncation_bug():
    """Under hw the identical clean-election search breaks StrongIsr (KIP-101's reason to exist)."""
    # Finding is the point here; shrinking a 60-step counterexample would only cost time.
    # Over 100 random seeds the first counterexample came after 4-642 examples (median ~90), so a
    # budget of 300 missed now and then (CI failed once).  The search stops at its first find, so
    # a large budget costs nothing when it works.  Derandomized so a run is repeatable; Hypothesis
    # still mixes in literals from whichever local modules are loaded, so the exact sequence
    # depends on which tests ran before, hence the margin.
    CleanHwMachine.TestCase.settings = settings(
        SETTINGS, max_examples=1500, database=None, phases=[Phase.generate], derandomize=True,
    )
    with pytest.raises(AssertionError, match="StrongIsr|NoCommittedDataLoss"):
        CleanHwMachine.TestCase().runTest()


# -- any valid scenario, explicit arguments included -----------------------------------------

def any_step(replicas):
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
    )


@st.composite
def any_scenario(draw):
    replicas = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True))
    data = {
        "name": "any", "replicas": replicas,
        "config": {"min_insync_replicas": draw(st.integers(1, len(replicas))), "unclean_leader_election": draw(st.booleans()),
                   "hw_checkpoint": draw(st.sampled_from(["every_step", "explicit"])), "log_flush": draw(st.sampled_from(["every_step", "explicit"]))},
        "steps": draw(st.lists(any_step(replicas), max_size=40)),
    }
    from emulator import parse_scenario
    return parse_scenario(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_scenario(), st.sampled_from(list(VARIANTS)))
def test_any_valid_scenario_replays_without_raising(scenario, protocol):
    """Explicit leaders, epochs, ISRs and delivery lists included: results, never exceptions."""
    result = run_scenario(scenario, protocol, trace=True)
    assert result["steps"] == len(scenario.steps) == len(result["trace"])
    assert dumps(result)
