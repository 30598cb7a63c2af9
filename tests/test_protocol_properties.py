"""What must hold in every variant, and where the variants differ, over deep generated scenarios
(docs/protocol.md).  Each property states its condition; the generator is ``tests/generators.py``.

In every variant, with unclean elections and power failures allowed, after every step:
* HW <= LEO on every live replica;
* a leader's HW never goes down while it leads in one epoch;
* every epoch cache strictly increases in epoch and start offset.

Where the variants differ (the condition: clean elections, no power failure, every replica
hears every election):
* under kip279 and kip320 a follower's log, right after a delivered fetch that reached the
  leader's LEO in the leader's epoch, is the leader's log: nothing diverges below it;
* under hw (S1, S2, SEED-2) and kip101 (S3) the seed stories show a follower holding a record the
  leader does not (truncation to the HW keeps a divergent suffix; one v0 round after fast
  fail-overs picks the wrong point).  Random clean programs rarely reach these shapes, so the
  stories are the witnesses.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emulator import VARIANT_NAMES, VARIANTS, Replay
from emulator.replica import Role
from emulator.steps import Fetch, FetchResponse
from generators import deep_scenario

DEEP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                      HealthCheck.large_base_example])


def step_all(scenario, variant, after_step):
    replay = Replay(scenario.replicas, scenario.config, variant)
    for number, step in enumerate(scenario.steps, start=1):
        before = {rid: (r.role, r.leader_epoch, r.hw) for rid, r in replay.partition.replicas.items()}
        replay.apply(step)
        after_step(replay, number, step, before)
    return replay


def sane(replay, number, step, before):
    p = replay.partition
    for rid, r in p.replicas.items():
        if r.alive:
            assert r.hw <= r.leo, f"step {number}: replica {rid} HW {r.hw} > LEO {r.leo}"
        role, epoch, hw = before[rid]
        if role is Role.LEADER and r.role is Role.LEADER and r.leader_epoch == epoch and r.alive:
            assert r.hw >= hw, f"step {number}: leader {rid} lowered its HW {hw} -> {r.hw} in epoch {epoch}"
        entries = r.cache.entries
        assert all(b.epoch > a.epoch and b.start_offset > a.start_offset for a, b in zip(entries, entries[1:])), \
            f"step {number}: replica {rid} cache {entries}"


def test_every_variant_keeps_hw_below_leo_leader_hw_monotonic_and_caches_increasing():
    @settings(DEEP, max_examples=60)
    @given(deep_scenario(wild=False), st.sampled_from(VARIANT_NAMES))
    def check(scenario, protocol):
        step_all(scenario, VARIANTS[protocol], sane)

    check()


def converged_fetch_matches(replay, number, step, before):
    """After a delivered fetch that reached the leader's LEO, in the leader's epoch, the follower
    holds exactly the leader's log."""
    if not isinstance(step, Fetch) or step.response is not FetchResponse.DELIVERED or step.max_records is not None:
        return
    p = replay.partition
    f = p.replicas[step.replica]
    leader = p.replicas.get(f.believed_leader) if f.believed_leader is not None else None
    if not (f.alive and leader and leader.presumes_leadership and f.leader_epoch == leader.leader_epoch and f.leo == leader.leo):
        return
    assert f.log.retained() == leader.log.retained(), (
        f"step {number}: follower {f.id} fetched up to the LEO of leader {leader.id} but their logs differ")


def test_kip279_and_kip320_followers_hold_the_leaders_log_after_a_converged_fetch():
    """Condition: clean elections, no power failure, every replica hears every election."""
    @settings(DEEP, max_examples=80)
    @given(st.sampled_from(["kip279", "kip320"]).flatmap(
        lambda p: deep_scenario(protocol=p, clean=True, hear_all=True).map(lambda s: (p, s))))
    def check(case):
        protocol, scenario = case
        step_all(scenario, VARIANTS[protocol], converged_fetch_matches)

    check()


WITNESSES = {  # story -> the variants under which a follower keeps a divergent record (docs/protocol.md)
    "s1-kip101-scenario-1": {"hw"},
    "s2-kip101-scenario-2": {"hw"},
    "s3-kip279-fast-failover-clean": {"kip101"},
    "seed-2-divergence-lagging-replica-first": {"hw"},
}


def test_the_seed_stories_show_where_the_variants_differ():
    """The same property over the seed stories: it fails exactly under the variants each story
    was written against (truncation to the HW keeps a divergent suffix: S1, S2, SEED-2; one
    OffsetsForLeaderEpoch v0 round after fast fail-overs: S3) and holds under kip279 and kip320."""
    from conftest import BUNDLED
    from scenario_io.yaml_files import load_scenario

    for story, failing in WITNESSES.items():
        scenario = load_scenario(BUNDLED / f"{story}.yaml")
        for protocol in VARIANT_NAMES:
            try:
                step_all(scenario, VARIANTS[protocol], converged_fetch_matches)
                diverged = False
            except AssertionError:
                diverged = True
            assert diverged == (protocol in failing), (story, protocol)
