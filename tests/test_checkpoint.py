"""Checkpoints that know what they are: a restart that differs from the run that created the
checkpoint is refused naming each difference; a second job on a live checkpoint is refused; a
killed job's lock is taken over.  All of it before Spark starts."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replemu.cli import main
from streaming.checkpoint import IDENTITY_FILE, LOCK_FILE, CheckpointError, claim_run, run_identity

ROOT = Path(__file__).resolve().parent.parent


def identity(**changes):
    base = dict(protocol="kip101", knobs={}, input_dir="/data/events", workload=None, shuffle_partitions=2,
                state_store=None, compact_min_records=None, gap_timeout_ms=60000)
    return run_identity(**{**base, **changes})


def test_a_restart_with_the_same_identity_proceeds_and_another_protocol_is_refused_naming_it(tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    with claim_run(ck, out, identity()):
        pass
    assert json.loads((ck / IDENTITY_FILE).read_text())["identity"]["protocol"] == "kip101"
    with claim_run(ck, out, identity()):
        pass
    with pytest.raises(CheckpointError) as exc:
        claim_run(ck, out, identity(protocol="kip320", input_dir="/data/other", knobs={"unclean_election": True}))
    message = str(exc.value)
    assert "protocol: checkpoint \"kip101\", this run \"kip320\"" in message
    assert "input: checkpoint \"/data/events\", this run \"/data/other\"" in message
    assert "knobs: checkpoint {}" in message
    assert "--allow-change protocol --allow-change knobs --allow-change input" in message
    assert json.loads((ck / IDENTITY_FILE).read_text())["identity"]["protocol"] == "kip101"  # nothing written


def test_an_allowed_change_is_recorded_in_the_identity_history(tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    claim_run(ck, out, identity()).release()
    with pytest.raises(CheckpointError, match="--allow-change input"):
        claim_run(ck, out, identity(protocol="kip320", input_dir="/x"), allow_changes=("protocol",))
    with claim_run(ck, out, identity(protocol="kip320"), allow_changes=("protocol",)) as claim:
        assert any("allowed changes of protocol" in n for n in claim.notes)
    doc = json.loads((ck / IDENTITY_FILE).read_text())
    assert doc["identity"]["protocol"] == "kip320"
    assert doc["history"] == [{"identity": identity(), "changed": ["protocol"]}]


def test_the_state_schema_version_cannot_be_allowed_to_change(tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    claim_run(ck, out, identity()).release()
    doc = json.loads((ck / IDENTITY_FILE).read_text())
    doc["identity"]["state_schema_version"] = 1
    (ck / IDENTITY_FILE).write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="state_schema_version cannot change: start a new checkpoint"):
        claim_run(ck, out, identity(), allow_changes=("state_schema_version",))


def test_a_second_job_on_a_live_checkpoint_is_refused_naming_the_holder(tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    with claim_run(ck, out, identity()):
        with pytest.raises(CheckpointError, match=f"checkpoint {ck} is in use by another running job \\(pid {os.getpid()} on"):
            claim_run(ck, tmp_path / "out2", identity())
        with pytest.raises(CheckpointError, match="output directory .* is in use"):
            claim_run(tmp_path / "ck2", out, identity())
    claim_run(ck, out, identity()).release()  # released: free again


def test_a_killed_jobs_lock_is_taken_over(tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from tests.test_checkpoint import identity
from streaming.checkpoint import claim_run
claim = claim_run({str(ck)!r}, {str(out)!r}, identity())
print("locked", flush=True)
time.sleep(600)
"""], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(CheckpointError, match=f"pid {holder.pid}"):
        claim_run(ck, out, identity())
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with claim_run(ck, out, identity()) as claim:
        assert any(f"took over the lock of a job that ended without releasing it (pid {holder.pid}" in n for n in claim.notes)
    assert (ck / LOCK_FILE).read_text() == ""  # released in order


def test_misused_directories_are_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="--checkpoint .*file: exists and is not a directory"):
        claim_run(tmp_path / "file", tmp_path / "out", identity())
    with pytest.raises(CheckpointError, match="file is not a directory"):
        claim_run(tmp_path / "file" / "ck", tmp_path / "out", identity())
    (tmp_path / "out" / "timeline" / "batch_id=0").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="holds micro-batches of an earlier run, but the checkpoint .* is new"):
        claim_run(tmp_path / "new-ck", tmp_path / "out", identity())
    (tmp_path / "old-ck" / "offsets").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="holds a stream's offsets but no replemu-identity.json"):
        claim_run(tmp_path / "old-ck", tmp_path / "out2", identity())
    assert not (tmp_path / "new-ck" / IDENTITY_FILE).exists()
    with pytest.raises(CheckpointError, match="give two separate directories"):
        claim_run(tmp_path / "both", tmp_path / "both" / "out", identity())


def run_cli_without_java(*args, timeout=120):
    """``replemu ARGS`` where no JVM can start (``JAVA_HOME`` names a directory without Java, which
    pyspark's launcher would run): an answer that needed Spark fails on that instead."""
    # imported here: a subprocess imports this file (tests.test_checkpoint) without tests/ on its path
    from conftest import env_without_java

    return subprocess.run([sys.executable, "-m", "replemu", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env_without_java())


def test_replemu_stream_refuses_a_different_restart_and_a_live_checkpoint_before_spark_starts(tmp_path):
    from conftest import BUNDLED
    from replemu.compile import compile_scenarios

    compile_scenarios(sorted(BUNDLED.glob("*.yaml"))[:1], tmp_path / "in")
    ck, out = tmp_path / "ck", tmp_path / "out"
    first = identity(input_dir=tmp_path / "in", gap_timeout_ms=60000)
    claim_run(ck, out, first).release()  # as a kip101 run would have left it
    proc = run_cli_without_java("stream", "--input", tmp_path / "in", "--output", out, "--checkpoint", ck, "--protocol", "kip320")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert 'protocol: checkpoint "kip101", this run "kip320"' in proc.stderr
    assert "JAVA" not in proc.stderr.upper()  # refused before a JVM was asked for
    with claim_run(ck, out, first):
        proc = run_cli_without_java("stream", "--input", tmp_path / "in", "--output", out, "--checkpoint", ck, "--protocol", "kip101")
    assert proc.returncode == 2 and "is in use by another running job" in proc.stderr and "JAVA" not in proc.stderr.upper()


def test_replemu_state_of_a_missing_or_empty_checkpoint_is_a_clear_error(tmp_path, capsys):
    assert main(["state", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "ck" / "offsets").mkdir(parents=True)
    assert main(["state", str(tmp_path / "ck")]) == 2
    assert "has not committed a micro-batch yet" in capsys.readouterr().err
    (tmp_path / "all" / "kip320" / "offsets").mkdir(parents=True)
    assert main(["state", str(tmp_path / "all")]) == 2
    assert "holds one checkpoint per variant (kip320)" in capsys.readouterr().err


def test_a_new_checkpoint_gets_the_masters_cores_as_state_partitions_and_a_restart_reads_them_back(tmp_path, capsys, monkeypatch):
    from argparse import Namespace

    from replemu.stream import _shuffle_partitions

    def chosen(master, flag=None, remote=None, ck=tmp_path / "new"):
        return _shuffle_partitions(Namespace(checkpoint=str(ck), master=master, shuffle_partitions=flag, remote=remote))

    assert chosen("local[3]") == 3 and chosen("local-cluster[2,2,1024]") == 4 and chosen("local[*]") == os.cpu_count()
    assert chosen("local[3]", flag=7) == 7
    ck = tmp_path / "ck"
    claim_run(ck, tmp_path / "out", identity(shuffle_partitions=5)).release()
    assert chosen("local[3]", ck=ck) == 5  # the checkpoint's, whatever the master now has
    with pytest.raises(CheckpointError, match="give --shuffle-partitions N for --master spark://h:7077"):
        chosen("spark://h:7077")
    assert chosen("spark://h:7077", ck=ck) == 5
    # on a cluster master a new checkpoint needs the flag: refused before Spark starts
    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr("streaming.session.build_spark", no_spark)
    assert main(["stream", "--workload", "clean", "--partitions", "2", "--seed", "1", "--max-steps", "5", "--protocol", "hw",
                 "--master", "spark://h:7077", "--output", str(tmp_path / "o2"), "--checkpoint", str(tmp_path / "c2")]) == 2
    assert "give --shuffle-partitions N" in capsys.readouterr().err


def test_protocol_all_under_a_processing_time_trigger_is_refused_rather_than_running_one_variant_forever(tmp_path, capsys):
    assert main(["stream", "--workload", "clean", "--partitions", "2", "--seed", "1", "--protocol", "all",
                 "--trigger", "processing-time=5s", "--output", str(tmp_path / "o"), "--checkpoint", str(tmp_path / "c")]) == 2
    assert "start one stream per variant" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()  # refused before anything was written


@pytest.mark.parametrize("per_variant", [False, True])
def test_a_restart_into_an_output_that_lost_its_batches_is_refused(tmp_path, per_variant):
    """The output removed (or another one given) after the checkpoint committed micro-batches:
    Spark would never write those again, so the restart is refused instead of losing them."""
    ck, out = tmp_path / "ck", tmp_path / "out"
    claim_run(ck, out, identity()).release()
    sub = "kip101/" if per_variant else ""
    (ck / f"{sub}commits").mkdir(parents=True)
    (ck / f"{sub}commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (out / sub).mkdir(parents=True, exist_ok=True)
    (out / f"{sub}run.json").write_text("{}\n")
    claim_run(ck, out, identity()).release()  # the output the checkpoint wrote: a restart
    (out / f"{sub}run.json").unlink()
    with pytest.raises(CheckpointError, match=r"holds none of the 1 micro-batch\(es\) the checkpoint .* has committed"):
        claim_run(ck, out, identity())
