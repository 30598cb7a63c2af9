"""Kafka formats in and out (kafka-python): export, inspect, import."""

import json
import struct

import pytest
import yaml
from kafka.record import MemoryRecords

from emulator import parse_scenario, run_scenario
from scenario_io.kafka_logs import read_initial_state, replay_seeder, build_batch, divergence, find_replica_dirs, read_replica_dir

from conftest import BUNDLED, replemu

# The first v2 batch of kafka-python's test/record/test_records.py (dpkp/kafka-python,
# `record_batch_data_v2`), "real live data from Kafka 11 broker": base offset 0, partition
# leader epoch 1, one record, key null, value "123", timestamp 1503229838908.
KAFKA_11_BATCH = (
    b'\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03'
    b'\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]'
    b'\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00'
    b'\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00'
)


def test_a_batch_built_here_matches_a_real_kafka_v2_batch():
    from kafka.record import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1503229838908, key=None, value=b"123", headers=[])
    builder.close()
    ours = bytearray(builder.buffer())
    struct.pack_into(">i", ours, 12, 1)  # partitionLeaderEpoch, outside the CRC, as build_batch stamps it
    assert bytes(ours) == KAFKA_11_BATCH
    batch = MemoryRecords(bytes(build_batch(7, 3, ["a", "b"]))).next_batch()
    assert (batch.base_offset, batch.leader_epoch, batch.validate_crc()) == (7, 3, True)
    assert [(r.offset, r.value) for r in batch] == [(7, b"a"), (8, b"b")]


@pytest.fixture
def s1_hw(tmp_path):
    result = replemu("run", str(BUNDLED / "s1-kip101-scenario-1.yaml"), "--protocol", "hw", "--json")
    (tmp_path / "r.json").write_text(result.stdout)
    out = replemu("export", str(tmp_path / "r.json"), "--to", str(tmp_path / "dirs"))
    assert out.returncode == 0, out.stderr
    return json.loads(result.stdout), tmp_path / "dirs"


def test_export_writes_kafka_files_with_valid_crcs(s1_hw):
    result, dirs = s1_hw
    d = dirs / "broker-1" / "s1-kip101-scenario-1-0"
    assert sorted(p.name for p in d.iterdir()) == ["00000000000000000000.log", "leader-epoch-checkpoint", "replication-offset-checkpoint"]
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 1\n"
    assert (d / "replication-offset-checkpoint").read_text() == "0\n1\ns1-kip101-scenario-1 0 2\n"
    records = MemoryRecords((d / "00000000000000000000.log").read_bytes())
    batches = []
    while records.has_next():
        b = records.next_batch()
        assert b.validate_crc()
        batches.append((b.base_offset, b.leader_epoch, [r.value for r in b]))
    assert batches == [(0, 0, [b"m1"]), (1, 1, [b"m3"])]


def test_inspect_reports_the_s1_divergence_at_offset_1_epochs_0_vs_1(s1_hw):
    _, dirs = s1_hw
    out = replemu("inspect", str(dirs))
    assert out.returncode == 0, out.stderr
    assert "brokers 1 and 2 diverge at offset 1: broker 1 has epoch 1 ('m3'), broker 2 epoch 0 ('m2')" in out.stdout
    assert "if 1 leads, follower 2 (LEO 2) -> hw: keeps 2, kip101: truncates to 1, kip279: truncates to 1, kip320: truncates to 1" in out.stdout
    a, b = (read_replica_dir(p) for p in find_replica_dirs(dirs))
    assert divergence(b, a)["epochs"] == [0, 1]


def test_export_inspect_import_round_trips_exactly(s1_hw, tmp_path):
    result, dirs = s1_hw
    scenario = tmp_path / "replay.yaml"
    scenario.write_text(f"name: replay\nreplicas: [1, 2]\ninitial_state: {dirs}\nsteps: []\n")
    out = replemu("run", str(scenario), "--protocol", "hw", "--json")
    assert out.returncode == 0, out.stderr
    final = json.loads(out.stdout)["final"]
    for rid in ("1", "2"):
        for key in ("log", "epoch_cache", "hw", "leo"):
            assert final["replicas"][rid][key] == result["final"]["replicas"][rid][key]
    assert final["controller"] == {"leader": None, "epoch": 1, "isr": [1, 2]}


@pytest.mark.parametrize("protocol, follower_log", [
    ("hw", [[0, 0, "m1"], [1, 0, "m2"], [2, 2, "x"]]),          # keeps the divergent m2
    ("kip320", [[0, 0, "m1"], [1, 1, "m3"], [2, 2, "x"]]),      # truncates and converges
])
def test_a_real_incident_replays_forward_from_directories(s1_hw, tmp_path, protocol, follower_log):
    _, dirs = s1_hw
    steps = [{"elect": {"leader": 1}}, {"produce": {"value": "x"}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}}]
    s = parse_scenario({"name": "incident", "replicas": [1, 2], "steps": steps})
    result = run_scenario(s, protocol, prepare=replay_seeder(read_initial_state([str(dirs)])))
    assert result["final"]["replicas"]["2"]["log"] == follower_log


def test_shrinking_an_incident_keeps_its_initial_state_and_the_result_replays(s1_hw, tmp_path):
    """The shrunk file starts from the same directories and its expect block passes --check,
    even where other verdict invariants break alongside the one asked for."""
    _, dirs = s1_hw
    steps = [{"elect": {"leader": 1}}, {"produce": {"value": "x"}}, {"tick": {"ms": 5}}, {"produce": {"value": "y"}},
             {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}}, {"fetch": {"replica": 2}}]
    incident = tmp_path / "incident.yaml"
    incident.write_text(yaml.safe_dump({"name": "incident", "replicas": [1, 2], "initial_state": str(dirs), "steps": steps}))
    shrunk = tmp_path / "elsewhere" / "small.yaml"
    out = replemu("shrink", str(incident), "--protocol", "hw", "--invariant", "StrongIsr", "--out", str(shrunk))
    assert out.returncode == 0, out.stderr
    doc = yaml.safe_load(shrunk.read_text())
    assert doc["initial_state"] == str(dirs.resolve()) and len(doc["steps"]) < len(steps)
    assert "EventualConvergence" in doc["expect"]["hw"]["violations"]
    check = replemu("run", str(shrunk), "--protocol", "hw", "--check")
    assert check.returncode == 0, check.stdout + check.stderr


def test_corrupt_and_truncated_segments_name_file_and_byte_offset(s1_hw):
    _, dirs = s1_hw
    seg = dirs / "broker-1" / "s1-kip101-scenario-1-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    second = len(build_batch(0, 0, ["m1"]))
    data[second + 40] ^= 0xFF  # inside the CRC-covered part of the second batch
    seg.write_bytes(bytes(data))
    out = replemu("inspect", str(dirs))
    assert out.returncode == 2 and f"{seg}: CRC mismatch in the batch at byte {second}" in out.stderr
    assert "Traceback" not in out.stderr
    seg.write_bytes(bytes(data[:second + 10]))
    out = replemu("inspect", str(dirs))
    assert out.returncode == 2 and f"{seg}: truncated batch at byte {second}" in out.stderr
    out = replemu("run", str(BUNDLED / "seed-1-two-round-hw.yaml"), "--from-dirs", str(dirs))
    assert out.returncode == 2 and "invalid initial state" in out.stderr and "Traceback" not in out.stderr
