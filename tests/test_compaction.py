"""Compacting the unchangeable prefix keeps every finding and shortens nothing else."""

from hypothesis import given, settings
from hypothesis import strategies as st

from emulator import VARIANT_NAMES, VARIANTS, Config, Replay
from emulator.result import state_snapshot
from emulator.steps import Elect, Fetch, Produce
from generators import any_scenario


def replay(scenario, protocol, compact_every_step: bool):
    r = Replay(scenario.replicas, scenario.config, VARIANTS[protocol])
    findings = []
    cold: dict[int, list] = {}
    for step in scenario.steps:
        out = r.apply(step)
        findings.append((out.errors, out.violations))
        if compact_every_step:
            done = r.compact(1)
            for rid, entries in (done.cold_cache if done else {}).items():
                cold.setdefault(rid, []).extend(entries)
    findings.append(r.finish())
    snapshot = state_snapshot(r.partition)
    for rid, entries in cold.items():  # what `replemu results` puts back from the epoch rows
        snapshot["replicas"][str(rid)]["epoch_cache"] = [list(e) for e in entries] + snapshot["replicas"][str(rid)]["epoch_cache"]
    return r.partition, findings, list(r.checker.losses), snapshot


def suffix(snapshot: dict, start: int) -> dict:
    for r in snapshot["replicas"].values():
        r["log"] = [rec for rec in r["log"] if rec[0] >= start]
    return snapshot


@settings(max_examples=300, deadline=None)
@given(any_scenario(), st.sampled_from(VARIANT_NAMES))
def test_compacting_after_every_step_changes_no_finding(scenario, protocol):
    plain, plain_findings, plain_losses, plain_snapshot = replay(scenario, protocol, False)
    compacted, findings, losses, snapshot = replay(scenario, protocol, True)
    if any(e["error"] == "BELOW_COMPACTED_PREFIX" for errors, _ in findings[:-1] for e in errors):
        return  # an explicit flush below the prefix: documented clamp, results may differ
    assert findings == plain_findings and losses == plain_losses
    start = compacted.compacted_offset
    assert suffix(snapshot, start) == suffix(plain_snapshot, start)


def steady(records: int, compact: bool) -> Replay:
    r = Replay((1, 2, 3), Config(), VARIANTS["kip320"])
    r.apply(Elect())
    for i in range(records // 10):
        r.apply(Produce(values=tuple(f"v{i}-{k}" for k in range(10))))
        for f in (2, 3, 2, 3):
            r.apply(Fetch(replica=f))
        if compact:
            r.compact(100)
    return r


def test_long_run_state_stays_bounded_and_the_digest_is_deterministic():
    import json

    from emulator.state import to_document

    small, large = steady(2_000, True), steady(20_000, True)
    size = lambda r: len(json.dumps(to_document(r)))  # noqa: E731
    assert large.partition.compacted_offset >= 19_000 and small.partition.compacted_offset >= 1_000
    assert size(large) < 2 * size(small)
    assert large.partition.prefix_digest == steady(20_000, True).partition.prefix_digest != small.partition.prefix_digest
    uncompacted = steady(20_000, False)
    assert size(uncompacted) > 10 * size(large)
    assert state_snapshot(large.partition)["controller"] == state_snapshot(uncompacted.partition)["controller"]
