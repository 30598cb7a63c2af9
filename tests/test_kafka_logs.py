"""Kafka formats in and out (kafka-python): export, inspect, import."""

import json
import os
import struct
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.util import calc_crc32c

from conftest import BUNDLED, replemu
from emulator import parse_scenario, run_scenario
from replemu.cli import main
from scenario_io.kafka_logs import (
    Finding,
    ReplicaDirError,
    build_batch,
    divergence,
    export_result,
    find_replica_dirs,
    read_checkpoint,
    read_initial_state,
    read_replica_dir,
    read_segment,
    replay_seeder,
    seeder_for,
)

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
    """inspect reports corruption as findings (exit 0, the log recovered as Kafka would);
    starting a scenario from the same directories is refused (exit 2)."""
    _, dirs = s1_hw
    seg = dirs / "broker-1" / "s1-kip101-scenario-1-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    second = len(build_batch(0, 0, ["m1"]))
    data[second + 40] ^= 0xFF  # inside the CRC-covered part of the second batch
    seg.write_bytes(bytes(data))
    out = replemu("inspect", str(dirs))
    assert out.returncode == 0, out.stderr
    assert f"  finding: segment {seg}: batch at offset 1 (byte position {second}): CRC mismatch (stored " in out.stdout
    assert "recovery truncates here" in out.stdout and "Traceback" not in out.stderr
    seg.write_bytes(bytes(data[:second + 10]))
    out = replemu("inspect", str(dirs))
    assert out.returncode == 0, out.stderr
    assert (f"  finding: segment {seg}: torn batch at byte position {second} (needs at least {second + 61} bytes, file has {second + 10}): "
            f"recovery truncates the log to offset 1") in out.stdout
    out = replemu("run", str(BUNDLED / "seed-1-two-round-hw.yaml"), "--from-dirs", str(dirs))
    assert out.returncode == 2 and "invalid initial state" in out.stderr and "Traceback" not in out.stderr
    assert f"{seg}: torn batch at byte position {second}" in out.stderr


# -- Recovery as Kafka's log loader does it: findings instead of exceptions ----------------------
#
# Directories are written by export_result from a result-shaped dict (no subprocess), then
# corrupted.  Replica 1's log below is three batches: offsets 0-1 (epoch 0), 2 (epoch 1), 3-5
# (epoch 2).


LOG_1 = [[0, 0, "a"], [1, 0, "b"], [2, 1, "c"], [3, 2, "d"], [4, 2, "e"], [5, 2, "f"]]
SIZES = [len(build_batch(0, 0, ["a", "b"])), len(build_batch(2, 1, ["c"])), len(build_batch(3, 2, ["d", "e", "f"]))]


def _result(log_1=LOG_1, log_2=None):
    log_2 = log_2 if log_2 is not None else LOG_1[:3] + [[3, 1, "x"]]
    return {"scenario": "t", "final": {"replicas": {
        "1": {"log": log_1, "epoch_cache": [[0, 0], [1, 2], [2, 3]], "hw": 3},
        "2": {"log": log_2, "epoch_cache": [[0, 0], [1, 2]], "hw": 3},
    }}}


@pytest.fixture
def dirs(tmp_path):
    export_result(_result(), tmp_path / "dirs")
    return tmp_path / "dirs"


def _rep(dirs, broker=1) -> Path:
    return dirs / f"broker-{broker}" / "t-0"


def _seg(dirs, broker=1) -> Path:
    return _rep(dirs, broker) / "00000000000000000000.log"


def _kinds(files) -> list[str]:
    return [f.kind for f in files.findings]


def _inspect(capsys, *paths) -> tuple[int, str, str]:
    code = main(["inspect", *map(str, paths)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _with_crc(batch: bytes) -> bytes:
    """A v2 batch with its CRC-32C recomputed (so a corruption inside passes ensureValid)."""
    return batch[:17] + struct.pack(">I", calc_crc32c(memoryview(batch)[21:])) + batch[21:]


def test_a_clean_directory_has_no_findings_and_strict_reading_accepts_it(dirs, capsys):
    files = read_replica_dir(_rep(dirs))
    assert files.findings == [] and files.leo == 6 and [b["position"] for b in files.batches] == [0, SIZES[0], SIZES[0] + SIZES[1]]
    code, out, err = _inspect(capsys, dirs)
    assert code == 0 and err == ""
    assert f"broker 1 t-0 ({_rep(dirs)}): LEO 6, HW 3, epochs (0,0) (1,2) (2,3), 3 valid batches, no findings" in out
    assert "brokers 1 and 2 diverge at offset 3: broker 1 has epoch 2 ('d'), broker 2 epoch 1 ('x')" in out
    assert "finding" not in out.replace("no findings", "")


def test_a_torn_last_batch_is_truncated_as_kafka_recovery_does(dirs, capsys):
    seg = _seg(dirs)
    data = seg.read_bytes()
    seg.write_bytes(data[:-7])  # the last batch lost its last 7 bytes
    files = read_replica_dir(_rep(dirs), recover=True)
    torn = files.findings[0]
    assert (torn.kind, torn.offset, torn.position, torn.cut) == ("torn-batch", 3, SIZES[0] + SIZES[1], "recovery")
    assert str(torn) == (f"segment {seg}: torn batch at byte position {SIZES[0] + SIZES[1]} (needs {len(data)} bytes, file has "
                         f"{len(data) - 7}): recovery truncates the log to offset 3")
    assert files.leo == 3 and [v for _, _, v in files.log] == ["a", "b", "c"]
    # LogLoader then drops the epoch-cache entries at or past the new log end (truncateFromEnd).
    assert files.epoch_cache == [(0, 0), (1, 2)] and _kinds(files) == ["torn-batch", "epoch-cache-truncated"]
    code, out, err = _inspect(capsys, dirs)
    assert code == 0 and err == ""
    assert f"LEO 3, HW 3, epochs (0,0) (1,2), 2 valid batches, 2 findings\n  finding: {torn}\n  finding: " in out
    assert "brokers 1 and 2 agree on their common prefix" in out  # divergence on the recovered log
    assert "  if 2 leads, follower 1 (LEO 3) -> hw: keeps 3" in out


def test_a_flipped_byte_is_a_crc_mismatch_naming_that_batch(dirs, capsys):
    seg = _seg(dirs)
    data = bytearray(seg.read_bytes())
    data[SIZES[0] + SIZES[1] - 1] ^= 0x01  # the last byte of the second batch: inside its record
    seg.write_bytes(bytes(data))
    files = read_replica_dir(_rep(dirs), recover=True)
    crc = files.findings[0]
    assert (crc.kind, crc.offset, crc.position) == ("crc-mismatch", 2, SIZES[0])
    assert str(crc).startswith(f"segment {seg}: batch at offset 2 (byte position {SIZES[0]}): CRC mismatch (stored ")
    assert str(crc).endswith("): recovery truncates here")
    assert files.leo == 2 and files.epoch_cache == [(0, 0)]  # the batches after it are gone too
    code, out, _ = _inspect(capsys, dirs)
    assert code == 0 and f"  finding: {crc}" in out


def test_a_corrupt_segment_drops_the_segments_after_it(tmp_path):
    d = tmp_path / "broker-1" / "t-0"
    d.mkdir(parents=True)
    first = build_batch(0, 0, ["a", "b"]) + build_batch(2, 0, ["c"])
    (d / "00000000000000000000.log").write_bytes(first)
    (d / "00000000000000000003.log").write_bytes(build_batch(3, 1, ["d"]) + build_batch(4, 1, ["e"]))
    (d / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n1 3\n")
    (d / "replication-offset-checkpoint").write_text("0\n1\nt 0 5\n")
    assert read_replica_dir(d).leo == 5  # two clean segments read as one log
    broken = bytearray(first)
    broken[len(build_batch(0, 0, ["a", "b"])) + 30] ^= 0xFF
    (d / "00000000000000000000.log").write_bytes(bytes(broken))
    files = read_replica_dir(d, recover=True)
    assert _kinds(files) == ["crc-mismatch", "dropped-segment", "epoch-cache-truncated"]
    assert files.findings[0].offset == 2 and files.leo == 2
    assert str(files.findings[1]) == (f"segment {d / '00000000000000000003.log'}: dropped, after the truncation point at offset 2 "
                                      f"(Kafka's recovery deletes the segments after the one it truncates)")
    # A torn tail in the last segment keeps the first one whole.
    (d / "00000000000000000000.log").write_bytes(first)
    second = (d / "00000000000000000003.log").read_bytes()
    (d / "00000000000000000003.log").write_bytes(second[:len(second) - 3])
    files = read_replica_dir(d, recover=True)
    assert [(f.kind, f.offset) for f in files.findings] == [("torn-batch", 4)] and files.leo == 4


@pytest.mark.parametrize("content, kinds", [
    (b"", []),                                       # an empty (active) segment is normal
    (b"\x00" * 5, ["torn-batch"]),                  # shorter than a batch header
    (b"\xff" * 64, ["bad-length"]),                 # length field -1
    (b"garbage! " * 40, ["torn-batch"]),            # length field 0x6520676172 bytes: beyond the file
    (bytes(range(256)) * 2, ["torn-batch"]),
])
def test_garbage_or_empty_segments_give_findings_not_exceptions(dirs, capsys, content, kinds):
    _seg(dirs).write_bytes(content)
    files = read_replica_dir(_rep(dirs), recover=True)
    assert [k for k in _kinds(files) if k != "epoch-cache-truncated"] == kinds
    assert files.leo == 0 and all(f.offset == 0 for f in files.findings if f.cut)
    code, _, err = _inspect(capsys, dirs)
    assert code == 0 and err == ""


@pytest.mark.parametrize("length, kind, text", [
    (2**31 - 1, "torn-batch", "torn batch at byte position {p} (needs {n} bytes"),
    (-1, "bad-length", "batch at offset 2 (byte position {p}): length field -1 is below the minimum 14"),
    (-(2**31), "bad-length", "length field -2147483648 is below the minimum 14"),
    (30, "bad-length", "length field 30 makes a 42-byte batch, below the minimum 61 of a v2 batch"),
])
def test_absurd_or_negative_length_fields(dirs, length, kind, text):
    seg = _seg(dirs)
    data = bytearray(seg.read_bytes())
    struct.pack_into(">i", data, SIZES[0] + 8, length)  # the second batch's length field
    seg.write_bytes(bytes(data))
    files = read_replica_dir(_rep(dirs), recover=True)
    f = files.findings[0]
    assert (f.kind, f.offset, f.position, f.cut) == (kind, 2, SIZES[0], "recovery")
    assert text.format(p=SIZES[0], n=SIZES[0] + 12 + length) in str(f)
    assert files.leo == 2


def test_records_that_cannot_be_decoded_in_a_batch_with_a_valid_crc(dirs):
    seg = _seg(dirs)
    data = seg.read_bytes()
    second = bytearray(data[SIZES[0]:SIZES[0] + SIZES[1]])
    second[61] = 0x7E  # the record's length varint: 63 bytes, the batch holds 8
    seg.write_bytes(data[:SIZES[0]] + _with_crc(bytes(second)) + data[SIZES[0] + SIZES[1]:])
    files = read_replica_dir(_rep(dirs), recover=True)
    f = files.findings[0]
    assert (f.kind, f.offset, f.cut) == ("bad-records", 2, "replemu")
    assert "the CRC is valid but the records cannot be read: record 0 declares 63 bytes" in str(f)
    assert "Kafka's recovery does not decode records and keeps the batch" in str(f) and files.leo == 2


def test_a_record_count_that_disagrees_with_the_records(dirs):
    seg = _seg(dirs)
    data = seg.read_bytes()
    first = bytearray(data[:SIZES[0]])
    struct.pack_into(">i", first, 57, 1)  # says one record, holds two
    seg.write_bytes(_with_crc(bytes(first)) + data[SIZES[0]:])
    f = read_replica_dir(_rep(dirs), recover=True).findings[0]
    assert f.kind == "bad-records" and f.offset == 0 and "bytes remain after the declared 1 records" in str(f)


def test_offsets_going_backwards(dirs):
    seg = _seg(dirs)
    data = seg.read_bytes()
    seg.write_bytes(data + build_batch(1, 2, ["late"]))
    files = read_replica_dir(_rep(dirs), recover=True)
    f = files.findings[0]
    assert (f.kind, f.offset, f.position, f.cut) == ("offsets", 6, len(data), "replemu")
    assert "base offset 1 where the log continues at 6 (offsets go backwards" in str(f) and files.leo == 6


def test_bad_magic(dirs):
    seg = _seg(dirs)
    data = bytearray(seg.read_bytes())
    data[SIZES[0] + 16] = 7  # magic is outside the CRC
    seg.write_bytes(bytes(data))
    f = read_replica_dir(_rep(dirs), recover=True).findings[0]
    assert f.kind == "bad-magic" and f.offset == 2 and "magic 7 with a valid CRC" in str(f)
    data[SIZES[0] + 16] = 1  # a legacy message: its CRC-32 (over other bytes) does not match
    seg.write_bytes(bytes(data))
    f = read_replica_dir(_rep(dirs), recover=True).findings[0]
    assert f.kind == "crc-mismatch" and f.offset == 2 and "magic 1 message, CRC mismatch" in str(f)


def test_a_value_that_is_not_utf8_is_a_finding_that_keeps_the_log(tmp_path):
    from kafka.record import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=0, key=None, value=b"\xff\xfe", headers=[])
    builder.close()
    d = tmp_path / "broker-1" / "t-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(bytes(builder.buffer()) + build_batch(1, 0, ["ok"]))
    (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (d / "replication-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    files = read_replica_dir(d, recover=True)
    assert _kinds(files) == ["value-not-utf8"] and files.findings[0].cut is None
    assert [v for _, _, v in files.log] == ["\\xff\\xfe", "ok"]


@pytest.mark.parametrize("content, line, text", [
    (b"0\n2\n0 0\n1 \xff\n", 4, "bytes that are not UTF-8 (byte 10: b'\\xff\\n')"),
    (b"1\n1\n0 0\n", 1, "unrecognised version 1, expected 0"),
    (b"zero\n1\n0 0\n", 1, "malformed version line 'zero'"),
    (b"0\nmany\n0 0\n", 2, "malformed count line 'many'"),
    (b"0\n-1\n", 2, "negative count -1"),
    (b"0\n3\n0 0\n1 2\n", 2, "the count line says 3 entries, the file has 2"),
    (b"0\n2\n0 0\n1 2 3\n", 4, "malformed line '1 2 3', expected 2 fields 'epoch startOffset'"),
    (b"0\n2\n0 0\n\n", 4, "malformed line '', expected 2 fields"),
    (b"0\n2\n0 0\n 1 2\n", 4, "malformed line ' 1 2'"),  # Java's split keeps a leading empty field
    (b"0\n1\n-1 0\n", 3, "negative epoch -1"),
    (b"0\n1\n0 -5\n", 3, "negative startOffset -5"),
    (b"0\n1\n2147483648 0\n", 3, "epoch '2147483648' is not a number within int32"),
    (b"0\n1\n0 9223372036854775808\n", 3, "startOffset '9223372036854775808' is not a number within int64"),
    (b"0\n1\n0 0x1\n", 3, "startOffset '0x1' is not a number within int64"),
])
def test_a_malformed_leader_epoch_checkpoint_names_file_and_line(dirs, capsys, content, line, text):
    path = _rep(dirs) / "leader-epoch-checkpoint"
    path.write_bytes(content)
    files = read_replica_dir(_rep(dirs), recover=True)
    [f] = files.findings
    assert (f.kind, f.file, f.line) == ("checkpoint", str(path), line)
    assert str(f).startswith(f"{path} line {line}: {text}")
    assert str(f).endswith("the epoch cache is reported unreadable (empty)")
    assert files.epoch_cache == [] and files.unreadable == ["leader-epoch-checkpoint"] and files.leo == 6
    code, out, err = _inspect(capsys, dirs)
    assert code == 0 and err == "" and "LEO 6, HW 3, epochs unreadable (empty), 3 valid batches, 1 finding" in out
    with pytest.raises(ReplicaDirError, match=f"leader-epoch-checkpoint line {line}: "):
        read_replica_dir(_rep(dirs))


@pytest.mark.parametrize("content, epochs", [
    (b"", []),                       # CheckpointReadBuffer: no line at all is an empty checkpoint
    (b"0\n", []),                    # so is the version line alone
    (b"+0\r\n1\r\n0\t0\r\n", [(0, 0)]),  # Integer.parseInt takes a sign; readLine any line end; \\s+ a tab
])
def test_checkpoints_kafka_reads_without_complaint(dirs, content, epochs):
    (_rep(dirs) / "leader-epoch-checkpoint").write_bytes(content)
    files = read_replica_dir(_rep(dirs))
    assert files.findings == [] and files.epoch_cache == epochs


def test_an_unreadable_or_missing_hw_checkpoint(dirs, capsys):
    path = _rep(dirs) / "replication-offset-checkpoint"
    path.write_bytes(b"0\n1\nt 0 -3\n")
    files = read_replica_dir(_rep(dirs), recover=True)
    assert [(f.line, f.kind) for f in files.findings] == [(3, "checkpoint")] and "negative offset -3" in str(files.findings[0])
    assert files.hw == 0 and files.unreadable == ["replication-offset-checkpoint"]
    code, out, _ = _inspect(capsys, dirs)
    assert code == 0 and "LEO 6, HW unreadable (0), epochs (0,0) (1,2) (2,3)" in out
    path.unlink()
    [f] = read_replica_dir(_rep(dirs), recover=True).findings
    assert str(f) == f"{path}: missing: Kafka finds no checkpointed HW and starts from 0 (Partition.createLog); the HW is reported as 0"


def test_a_recovery_point_checkpoint_is_read_when_present(dirs, capsys):
    (_rep(dirs) / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 4\n")
    assert read_replica_dir(_rep(dirs)).recovery_point == 4
    (dirs / "broker-2" / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 x\n")  # Kafka's place: the log dir
    files = read_replica_dir(_rep(dirs, 2), recover=True)
    assert files.recovery_point == 0 and "Kafka resets the recovery point to 0" in str(files.findings[0])
    code, out, _ = _inspect(capsys, dirs)
    assert code == 0 and "HW 3, recovery point 4, epochs" in out


def test_strict_callers_refuse_a_directory_with_findings(dirs):
    seg = _seg(dirs)
    seg.write_bytes(seg.read_bytes()[:-1])
    with pytest.raises(ReplicaDirError) as exc:
        read_replica_dir(_rep(dirs))
    assert str(exc.value).startswith(f"segment {seg}: torn batch at byte position {SIZES[0] + SIZES[1]}")
    assert str(exc.value).endswith("recovery truncates the log to offset 3 (and 1 more finding)")
    with pytest.raises(ReplicaDirError, match="torn batch"):
        seeder_for(None, [str(dirs)])
    with pytest.raises(ReplicaDirError, match="torn batch"):
        read_initial_state([str(dirs)])


def test_inspect_exits_2_with_one_line_when_a_path_is_not_a_readable_replica_directory(tmp_path, dirs, capsys, monkeypatch):
    cases = [
        (tmp_path / "nowhere", f"replemu: error: {tmp_path / 'nowhere'}: no such file or directory"),
        (_seg(dirs), f"replemu: error: {_seg(dirs)}: not a directory"),
        (tmp_path, f"replemu: error: {tmp_path}: no broker-<id>/<topic>-<partition> directories"),
    ]
    empty = dirs / "broker-3" / "t-0"
    empty.mkdir(parents=True)
    cases.append((empty, f"replemu: error: {empty}: no segment (*.log) file"))
    for path, message in cases:
        code, out, err = _inspect(capsys, path)
        assert (code, out, err) == (2, "", message + "\n"), path
    empty.rmdir()
    # Permissions (the tests may run as root, so the denial is simulated where replemu reads).
    real_listdir = os.listdir

    def denied(path="."):
        if Path(path) == _rep(dirs, 2):
            raise PermissionError(13, "Permission denied", str(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", denied)
    code, out, err = _inspect(capsys, dirs)
    assert (code, err) == (2, f"replemu: error: {_rep(dirs, 2)}: cannot read: Permission denied\n")
    monkeypatch.setattr(os, "listdir", real_listdir)
    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                        if self.name.endswith(".log") else real_read(self))
    code, out, err = _inspect(capsys, dirs)
    assert (code, err) == (2, f"replemu: error: {_seg(dirs)}: cannot read: Permission denied\n")


def test_inspect_of_a_log_not_starting_at_0_or_two_copies_of_a_broker(tmp_path, dirs, capsys):
    d = tmp_path / "other" / "broker-1" / "t-0"
    d.mkdir(parents=True)
    (d / "00000000000000000005.log").write_bytes(build_batch(5, 0, ["z"]))
    (d / "leader-epoch-checkpoint").write_text("0\n1\n0 5\n")
    (d / "replication-offset-checkpoint").write_text("0\n1\nt 0 6\n")
    code, out, err = _inspect(capsys, d, _rep(dirs, 2), _rep(dirs, 1))
    assert code == 0 and err == ""
    assert "LEO 6, HW 6, epochs (0,5), 1 valid batch, no findings" in out
    assert "  if 1 leads: no truncation outcomes (" in out and "only logs from offset 0 can be imported" in out
    assert "brokers 1 and 1 diverge" in out or "brokers 1 and 1 agree" in out
    assert "  no truncation outcomes: both directories are broker 1's" in out
    # A broker directory is accepted too.
    code, out, _ = _inspect(capsys, dirs / "broker-2")
    assert code == 0 and out.startswith(f"broker 2 t-0 ({_rep(dirs, 2)}): LEO 4")


# -- Any bytes at all: findings or a clean read, never another exception ---------------------------

_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _fuzz_dir(root: Path, segment: bytes, lec: bytes | None = None, hw: bytes | None = None) -> Path:
    export_result(_result(), root)
    if segment is not None:
        _seg(root).write_bytes(segment)
    if lec is not None:
        (_rep(root) / "leader-epoch-checkpoint").write_bytes(lec)
    if hw is not None:
        (_rep(root) / "replication-offset-checkpoint").write_bytes(hw)
    return root


def _check_recovery(root: Path, capsys=None) -> None:
    files = read_replica_dir(_rep(root), recover=True)  # nothing may raise here, not even ReplicaDirError
    assert all(isinstance(f, Finding) and str(f) for f in files.findings)
    assert files.leo == len(files.log) and [o for o, _, _ in files.log] == list(range(files.leo))
    cuts = [f for f in files.findings if f.cut]
    assert not cuts or cuts[0].offset == files.leo  # the log ends where the first cutting finding says
    if files.findings:
        with pytest.raises(ReplicaDirError):
            read_replica_dir(_rep(root))
    if capsys is not None:
        before = os.environ.get("REPLEMU_DEBUG")
        os.environ["REPLEMU_DEBUG"] = "1"  # a bug raises instead of becoming exit 3
        try:
            code, _, err = _inspect(capsys, root)
        finally:
            if before is None:
                del os.environ["REPLEMU_DEBUG"]
            else:
                os.environ["REPLEMU_DEBUG"] = before
        assert code == 0 and err == ""


@_FUZZ
@given(segment=st.binary(max_size=300))
def test_any_bytes_as_a_segment(capsys, segment):
    with tempfile.TemporaryDirectory() as tmp:
        _check_recovery(_fuzz_dir(Path(tmp), segment), capsys)


@_FUZZ
@given(data=st.data())
def test_any_corruption_of_a_valid_segment(capsys, data):
    """Byte flips, cuts and insertions in a valid segment: the records recovered are a prefix of
    the original's, keeping at least every batch before the first byte touched.  (Epochs may
    change: partitionLeaderEpoch is outside the CRC, in Kafka's format as here.)"""
    original = b"".join(build_batch(b, e, v) for b, e, v in [(0, 0, ["a", "b"]), (2, 1, ["c"]), (3, 2, ["d", "e", "f"])])
    seg = bytearray(original)
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, max(len(seg) - 1, 0)))
        if action == "flip" and seg:
            seg[at] ^= data.draw(st.integers(1, 255))
        elif action == "cut":
            del seg[at:]
        else:
            seg[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    first_change = next((i for i, (x, y) in enumerate(zip(seg, original)) if x != y), min(len(seg), len(original)))
    with tempfile.TemporaryDirectory() as tmp:
        root = _fuzz_dir(Path(tmp), bytes(seg))
        _check_recovery(root, capsys)
        files = read_replica_dir(_rep(root), recover=True)
        ends = [0, SIZES[0], SIZES[0] + SIZES[1], sum(SIZES)]
        kept = max(i for i, e in enumerate(ends) if e <= first_change)  # whole batches before the first change
        assert files.log[:[0, 2, 3, 6][kept]] == [tuple(r) for r in LOG_1[:[0, 2, 3, 6][kept]]]
        assert [(o, v) for o, _, v in files.log] == [(o, v) for o, _, v in LOG_1[:files.leo]]


@_FUZZ
@given(records=st.binary(max_size=80), count=st.integers(-2, 4), attributes=st.sampled_from([0, 1, 2, 3, 4, 5, 7, 0x20]),
       last_delta=st.integers(-1, 4), epoch=st.integers(-(2**31), 2**31 - 1))
def test_any_records_inside_a_batch_with_a_valid_crc(capsys, records, count, attributes, last_delta, epoch):
    batch = bytearray(build_batch(0, 0, ["a"])[:61] + records)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 12, epoch)
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 23, last_delta)
    struct.pack_into(">i", batch, 57, count)
    with tempfile.TemporaryDirectory() as tmp:
        _check_recovery(_fuzz_dir(Path(tmp), _with_crc(bytes(batch))), capsys)


@_FUZZ
@given(lec=st.one_of(st.binary(max_size=60), st.lists(st.sampled_from(
    ["0", "1", "2", "-1", "0 0", "1 5", " 1 2", "1\t2", "1 2 3", "", "x", "99999999999 0", "0 99999999999999999999",
     "\u0663 0", "0 0 ", "+1 2"]), max_size=5).map(lambda ls: "\n".join(ls).encode())), hw=st.binary(max_size=40))
def test_any_bytes_as_checkpoint_files(capsys, lec, hw):
    with tempfile.TemporaryDirectory() as tmp:
        root = _fuzz_dir(Path(tmp), None, lec, hw)
        _check_recovery(root, capsys)
        rows, findings = read_checkpoint(_rep(root) / "leader-epoch-checkpoint", (("epoch", (-(2**31), 2**31 - 1)),
                                                                                  ("startOffset", (-(2**63), 2**63 - 1))))
        assert (rows is None) == bool(findings) and len(findings) <= 1
        if findings:
            assert findings[0].message.startswith(str(_rep(root) / "leader-epoch-checkpoint"))


def test_read_segment_alone_returns_batches_and_findings(dirs):
    batches, findings = read_segment(_seg(dirs))
    assert [b["base_offset"] for b in batches] == [0, 2, 3] and findings == []
    with pytest.raises(ReplicaDirError, match="cannot read"):
        read_segment(_rep(dirs) / "missing.log")
