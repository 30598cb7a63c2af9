"""The Spark state row of a partition (``streaming.state_codec``): packed, unpacked, decoded, and
refused when another version wrote it.

A partition's replay is packed into the binary field ``core`` after every micro-batch and
unpacked before the next; a replay continued after that round trip must be indistinguishable
from one that never left memory.
"""

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import BUNDLED, ROOT
from emulator import VARIANT_NAMES, VARIANTS, Config, Replay, parse_scenario
from emulator.result import state_snapshot
from emulator.state import STATE_VERSION, StateVersionError, from_document, to_document
from emulator.steps import Crash, Elect, Fetch, LeaderAndIsr, Produce, Restart
from generators import deep_scenario, kip320_with_reelection_reset
from scenario_io.yaml_files import load_scenario
from streaming.schemas import STATE_SCHEMA_VERSION
from streaming.state_codec import (
    STATE_FIELDS,
    StateSchemaError,
    decode_state_row,
    document_from_fields,
    empty_state,
    from_tuple,
    pack_document,
    pack_replay,
    to_tuple,
    unpack_replay,
)

DEEP = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                       HealthCheck.large_base_example])
BINARY = ("core",)
CONFIG = Config(min_insync_replicas=2, acks="all")


def round_trip(replay: Replay) -> Replay:
    """Through the Spark state tuple, as between two micro-batches."""
    fields = {**empty_state(replay.partition.variant.name), **pack_replay(replay)}
    return unpack_replay(from_tuple(to_tuple(fields)))


def outputs(replay: Replay, step) -> tuple:
    losses_before = len(replay.checker.losses)
    report = replay.apply(step)
    return (report.errors, report.events, report.violations, replay.checker.losses[losses_before:],
            state_snapshot(replay.partition))


def nodes(doc, path=""):
    """``(path, value)`` of every node of a document (containers included), list positions
    written ``[]`` and replica-id keys ``<id>``."""
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from nodes(v, f"{path}.{'<id>' if k.isdigit() else k}")
    elif isinstance(doc, list):
        for v in doc:
            yield from nodes(v, f"{path}[]")


# -- round trips ------------------------------------------------------------------------------

@settings(DEEP, max_examples=40)
@given(deep_scenario(), st.sampled_from(VARIANT_NAMES), st.integers(1, 7))
def test_a_replay_continued_after_a_round_trip_is_the_one_never_packed(scenario, protocol, every):
    """Packed and unpacked every ``every`` steps: identical bytes when packed again, the same
    document, and the same errors, events, violations, losses and state at every step after."""
    variant = VARIANTS[protocol]
    plain, restored = Replay(scenario.replicas, scenario.config, variant), Replay(scenario.replicas, scenario.config, variant)
    for i, step in enumerate(scenario.steps):
        if i % every == 0:
            packed = pack_replay(restored)
            restored = round_trip(restored)
            assert pack_replay(restored) == packed
            assert to_document(restored) == to_document(plain)
        assert outputs(restored, step) == outputs(plain, step), f"step {i + 1}"
    assert restored.finish() == plain.finish()


HALTING = parse_scenario({"name": "halting", "replicas": [1, 2], "config": {"log_flush": "explicit"}, "steps": [
    {"elect": {}}, {"produce": {"values": ["a", "b"]}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
    {"crash": {"replica": 1, "mode": "power"}}, {"restart": {"replica": 1}}, {"elect": {"leader": 1}},
    {"fetch": {"replica": 2}},
]})


KRAFT_LIFECYCLE = parse_scenario({"name": "kraft-lifecycle", "replicas": [1, 2, 3], "steps": [
    {"elect": {}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}}, {"shutdown": {"replica": 2}},
    {"fetch": {"replica": 3}}, {"restart": {"replica": 2, "fenced": True}}, {"unfence": {"replica": 2}},
    {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}},
]})


def test_every_field_of_the_document_survives_and_is_exercised():
    """Over deep scenarios in every variant, packed after every step: the document comes back
    equal, and every field of it held a non-trivial value at some point (so the round trip of
    that field was really tested)."""
    seen: set[str] = set()
    paths: set[str] = set()
    count = 0

    def run(scenario, variant):
        nonlocal count
        replay = Replay(scenario.replicas, scenario.config, variant)
        for step in scenario.steps:
            replay.apply(step)
            if replay.partition.step_number % 3 == 0:
                replay.compact(8)
            doc = to_document(replay)
            back = to_document(round_trip(replay))
            assert back == doc
            for path, value in nodes(doc):
                if path.startswith(".knobs."):
                    continue  # constants of the run's variant (compared above, never changed by a step)
                paths.add(path)
                if value not in (None, False, 0, -1, "", [], {}):
                    seen.add(path)
            count += 1

    @settings(DEEP, max_examples=30, database=None, phases=[Phase.generate], derandomize=True)
    @given(deep_scenario(wild=True), st.sampled_from(list(VARIANTS.values()) + [kip320_with_reelection_reset()]))
    def deep(scenario, variant):
        run(scenario, variant)

    deep()
    # Two corners deep programs reach only now and then: records committed twice (the bundled
    # stories of lost commits) and a halted follower (the leader lost its log in a power failure).
    for path in BUNDLED.glob("*.yaml"):
        for variant in VARIANTS.values():
            run(load_scenario(path), variant)
    run(HALTING, VARIANTS["hw"])
    # KRaft's state: the ELR and LastKnownELR, fenced brokers, GetReplicaLogInfo answers, the
    # clean-shutdown file, an AlterPartition in flight (the KRaft examples and one lifecycle).
    for path in sorted((ROOT / "docs" / "examples").glob("*.yaml")):
        for variant in (VARIANTS["kip903"], VARIANTS["kip966"]):
            run(load_scenario(path), variant)
    run(KRAFT_LIFECYCLE, VARIANTS["kip966"])
    # A scenario that sets knobs in its config (they are part of the partition's config state).
    run(dataclasses.replace(HALTING, config=dataclasses.replace(HALTING.config, knobs=(("fencing", True),))), VARIANTS["hw"])
    never = sorted(paths - seen)
    assert count > 1000 and not never, f"fields never non-trivial in {count} packs: {never}"


def test_a_compacted_partition_round_trips_from_its_offset_on():
    """Compacted with a small threshold mid-run: offset, digest and the logs from the offset on
    (with the record before it) come back, and the run continues as the uncompacted one does."""
    def run(compact: bool, round_trips: bool):
        r = Replay((1, 2, 3), CONFIG, VARIANTS["kip320"])
        r.apply(Elect())
        for i in range(100):
            r.apply(Produce(values=(f"a{i}", f"b{i}")))
            for f in (2, 3, 2, 3):
                r.apply(Fetch(replica=f))
            if compact and i % 4 == 3:
                r.compact(5)
            if round_trips:
                r = round_trip(r)
        # a failover after compaction: truncation and epoch lookups above the compacted prefix
        for step in (Produce(values=("tail",), acks="1"), Crash(replica=1), Elect(), Produce(values=("new",)),
                     Fetch(replica=3), Restart(replica=1), LeaderAndIsr(replica=1), Fetch(replica=1), Fetch(replica=1)):
            r.apply(step)
            if round_trips:
                r = round_trip(r)
        return r

    compacted = run(compact=True, round_trips=True)
    p = compacted.partition
    assert p.compacted_offset >= 150 and p.prefix_digest.startswith("sha256:")
    in_memory = run(compact=True, round_trips=False)
    assert (p.compacted_offset, p.prefix_digest) == (in_memory.partition.compacted_offset, in_memory.partition.prefix_digest)
    assert to_document(compacted) == to_document(in_memory)
    doc = decode_state_row({**empty_state("kip320"), **pack_replay(compacted)})["document"]
    assert (doc["compacted_offset"], doc["prefix_digest"]) == (p.compacted_offset, p.prefix_digest)
    uncompacted = run(compact=False, round_trips=False)
    for rid, r in p.replicas.items():
        whole = uncompacted.partition.replicas[rid].log
        assert r.log.start == p.compacted_offset and len(r.log) == len(whole)
        assert list(r.log.items()) == list(whole.items())[p.compacted_offset:]
        assert r.log.before == whole[p.compacted_offset - 1]
        d = next(x for x in doc["replicas"] if x["id"] == rid)
        assert d["log_start"] == p.compacted_offset and [tuple(x) for x in d["log"]] == r.log.retained()
    assert doc["oracle"]["committed_start"] == p.compacted_offset
    assert [v for v in compacted.checker.violations] == [v for v in uncompacted.checker.violations]
    assert compacted.checker.losses == uncompacted.checker.losses
    # the compacted document is much smaller than the whole one (its JSON: LZ4 in the state row
    # squeezes the whole one's repeated records too, so the packed sizes hide what compaction drops)
    size = lambda r: len(json.dumps(to_document(r)))  # noqa: E731
    assert size(compacted) * 3 < size(uncompacted)


# -- decoding and refusing --------------------------------------------------------------------------

def test_decode_state_row_shows_the_document_and_the_waiting_rows():
    r = Replay((1, 2), CONFIG, VARIANTS["kip101"])
    for step in (Elect(), Produce(values=("x", "y")), Fetch(replica=2), Fetch(replica=2)):
        r.apply(step)
    fields = {**empty_state("kip101"), **pack_replay(r), "header": "ok", "next_seq": 5, "steps_applied": 4,
              "scenario": "demo", "waiting": json.dumps([[7, "fetch", "{\"replica\": 2}"]]).encode()}
    row = dict(zip(STATE_FIELDS, to_tuple(fields)))  # a statestore row's value, or GroupState.get
    shown = decode_state_row(row)
    assert shown["document"] == json.loads(json.dumps(to_document(r)))
    assert shown["document"]["replicas"][0]["log"] == [[0, "x"], [0, "y"]]
    assert shown["waiting"] == [[7, "fetch", "{\"replica\": 2}"]]
    assert (shown["scenario"], shown["next_seq"], shown["steps_applied"], shown["protocol"]) == ("demo", 5, 4, "kip101")
    assert not set(BINARY) & set(shown)  # bytes are decoded, not shown raw
    json.dumps(shown)  # and the whole view is plain JSON

    before_header = decode_state_row(empty_state("hw"))
    assert "document" not in before_header and before_header["waiting"] == [] and before_header["header"] == "waiting"


def test_a_state_row_of_another_schema_version_is_refused():
    fields = {**empty_state("hw"), "state_version": STATE_SCHEMA_VERSION + 1}
    with pytest.raises(StateSchemaError, match=rf"state schema version {STATE_SCHEMA_VERSION + 1}, this build reads {STATE_SCHEMA_VERSION}"):
        from_tuple(to_tuple(fields))
    assert from_tuple(to_tuple(empty_state("hw")))["state_version"] == STATE_SCHEMA_VERSION


def test_a_partition_document_of_another_version_is_refused():
    r = Replay((1, 2), CONFIG, VARIANTS["kip320"])
    r.apply(Elect())
    doc = to_document(r)
    assert doc["state_version"] == STATE_VERSION
    for other in (STATE_VERSION - 1, STATE_VERSION + 1, None):
        with pytest.raises(StateVersionError, match=f"partition state version {other!r}, this build reads {STATE_VERSION}"):
            from_document({**doc, "state_version": other})
    # the same check guards the packed core: a state row whose core another build wrote
    packed = pack_replay(r)
    core = document_from_fields(packed["core"])
    core["state_version"] = STATE_VERSION + 1
    with pytest.raises(StateVersionError, match="this build reads"):
        unpack_replay({**packed, "core": pack_document(core)})
