"""Hostile event rows against the stream's batch function: whatever a row holds, the partition
never raises, and every row is accounted for — applied, quarantined with a reason, or waiting
for a missing sequence number.  Nothing is dropped silently, nothing is applied twice."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BUNDLED
from emulator.steps import STEP_KINDS
from scenario_io.yaml_files import load_scenario
from streaming.events import scenario_rows
from streaming.processor import process_batch, stream_protocol
from streaming.state_codec import from_tuple, to_tuple

SEED1 = load_scenario(BUNDLED / "seed-1-two-round-hw.yaml")
GOOD = [{**row, "raw": None} for row in scenario_rows(SEED1)]
TOPIC = GOOD[0]["topic"]

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70), st.floats(allow_nan=False),
              st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
args_text = st.one_of(
    json_values.map(json.dumps),
    st.fixed_dictionaries({}, optional={"replica": st.integers(-3, 5), "values": st.lists(st.text(max_size=5), max_size=3),
                                        "acks": st.sampled_from(["all", "1", 1, None]), "isr": st.lists(st.integers(0, 4), max_size=3),
                                        "kind": st.sampled_from(["process", "power", "x"]), "ms": st.integers(-5, 2**64),
                                        "leader": st.integers(-1, 4), "offset": st.integers(-1, 2**63)}).map(json.dumps),
    st.text(max_size=30),
    st.sampled_from([5, 2000, 100_000]).map(lambda n: "[" * n + "]" * n),  # nested past json's recursion limit
    st.none(),
)
header_args = st.one_of(
    st.just(GOOD[0]["args"]),
    st.fixed_dictionaries({"scenario": st.one_of(st.text(max_size=8), st.integers()),
                           "replicas": st.one_of(st.lists(st.integers(-2, 2**40), max_size=5), st.text(max_size=3)),
                           "config": st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=3))}).map(json.dumps),
    args_text,
)
hostile_row = st.fixed_dictionaries({
    "seq": st.one_of(st.none(), st.integers(0, 12), st.integers(0, 2**63 - 1)),
    "type": st.one_of(st.none(), st.sampled_from(STEP_KINDS + ("partition",)), st.text(max_size=8)),
    "args": args_text,
    "raw": st.none(),
})


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(GOOD), hostile_row,
                          header_args.map(lambda a: {"seq": 0, "type": "partition", "args": a, "raw": None})),
                min_size=1, max_size=14),
       st.integers(1, 3), st.sampled_from(["hw", "kip320"]))
def test_hostile_rows_never_raise_and_every_row_is_applied_quarantined_or_waiting(rows, cuts, protocol):
    # Mostly in sequence after a good header, so hostile steps reach the core, not just the gap buffer.
    events = [{"topic": TOPIC, "partition": 0, **GOOD[0]}] + [
        {"topic": TOPIC, "partition": 0, **row, "seq": seq + 1 if row["seq"] is not None and row["seq"] <= 12 else row["seq"]}
        for seq, row in enumerate(rows)]
    state, out = None, []
    size = -(-len(events) // cuts)
    for start in range(0, len(events), size):  # the rows over `cuts` micro-batches
        batch_rows, new_state, _ = process_batch(TOPIC, 0, events[start:start + size],
                                                 from_tuple(state) if state else None, stream_protocol(protocol))
        state = to_tuple(new_state)
        out.extend(batch_rows)
    final = from_tuple(state)
    waiting_rows = len(json.loads(bytes(final["waiting"]).decode("utf-8")))
    quarantined = [r for r in out if r["kind"] == "quarantine"]
    assert all(r["reason"] for r in quarantined)
    applied_steps = final["steps_applied"]
    header_applied = int(final["header"] == "ok")
    # Each row is used once: a step applied, the header accepted, a row quarantined, or one waiting.
    assert applied_steps + header_applied + len(quarantined) + waiting_rows == len(events)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({"topic": st.none(), "partition": st.one_of(st.none(), st.integers(0, 3)),
                                       "seq": st.none(), "type": st.none(), "args": st.none(),
                                       "raw": st.one_of(st.none(), st.text(max_size=20)),
                                       "reason": st.one_of(st.none(), st.text(min_size=1, max_size=20))}), max_size=8))
def test_unkeyed_rows_are_all_quarantined_in_an_order_that_does_not_depend_on_arrival(rows):
    forward, _, _ = process_batch(None, None, rows, None, stream_protocol("kip320"))
    backward, _, _ = process_batch(None, None, list(reversed(rows)), None, stream_protocol("kip320"))
    assert len(forward) == len(rows) and all(r["kind"] == "quarantine" and r["reason"] for r in forward)
    assert [(r["reason"], r["raw"]) for r in forward] == [(r["reason"], r["raw"]) for r in backward]


def test_a_lone_surrogate_in_a_value_is_quarantined_not_a_failed_state_write():
    """``"\\ud800"`` is valid JSON but not Unicode text: applied, it could not be written to the
    state (UTF-8) and failed the query; it is a bad argument like any other."""
    events = [{"topic": TOPIC, "partition": 0, **GOOD[0]},
              {"topic": TOPIC, "partition": 0, "seq": 1, "type": "produce", "args": '{"value": "m\\ud800"}', "raw": None}]
    rows, state, _ = process_batch(TOPIC, 0, events, None, stream_protocol("kip320"))
    (q,) = [r for r in rows if r["kind"] == "quarantine"]
    assert q["seq"] == 1 and "'value' must be a string" in q["reason"]
    to_tuple(state)  # the state encodes
