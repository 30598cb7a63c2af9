"""``replemu checkpoint check`` / ``repair`` (streaming.checkpoint_check) on real checkpoints of the
job, HDFS-backed and RocksDB state stores: a whole checkpoint has no problems; each corruption is
named with its file, batch and kind; a batch in flight is not a problem; the repair moves the
right files aside (every byte still exists somewhere) and the stream restarted on the repaired
checkpoint ends with the output bytes of an uninterrupted run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.checkpoint_check import (
    REPAIR_MANIFEST,
    apply_repair,
    format_plan,
    format_report,
    inspect_checkpoint,
    plan_repair,
    repair_folder,
)
from streaming.job import run_stream
from streaming.storage import LocalStore

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS, STEPS_PER_BATCH, MAX_STEPS, SEED = 20, 5, 20, 11  # micro-batches 0..3
LAST = MAX_STEPS // STEPS_PER_BATCH - 1
STAMP = "20250101T000000Z"


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def all_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def workload():
    from scenario_io.profiles import load_profiles
    from streaming.workload_source import WorkloadSpec

    return WorkloadSpec.of(load_profiles()["clean"], SEED, PARTITIONS, STEPS_PER_BATCH, max_steps=MAX_STEPS)


# A "store" of these tests: a state store, or "tws": --operator transformWithState (RocksDB, with
# changelog checkpointing: its state versions are .changelog files, snapshots now and then).
TWS = "transformWithState"


def operator_of(store: str) -> str | None:
    return TWS if store == "tws" else None


def state_store_of(store: str) -> str:
    return "rocksdb" if store == "tws" else store


def stream(spark, root: Path, store: str):
    return run_stream(None, root / "out", root / "ck", "kip320", spark=spark, quiet=True, workload=workload(),
                      state_store=state_store_of(store), operator=operator_of(store))


@pytest.fixture(scope="module")
def made(spark, tmp_path_factory):
    """``made(store)``: the directory of an uninterrupted run (``ck``, ``out``), made once per store,
    its checkpoint claimed as ``replemu stream`` claims it (the run identity recorded)."""
    from streaming.checkpoint import claim_run, run_identity

    runs: dict[str, Path] = {}

    def make(store: str) -> Path:
        if store not in runs:
            root = tmp_path_factory.mktemp(f"straight-{store}")
            w = workload()
            identity = run_identity(protocol="kip320", knobs=None, input_dir=None, workload=w, shuffle_partitions=2,
                                    state_store=state_store_of(store), compact_min_records=None, gap_timeout_ms=60000,
                                    operator=operator_of(store))
            claim_run(root / "ck", root / "out", identity).release()
            assert [s.batch_id for s in stream(spark, root, store)] == list(range(LAST + 1))
            runs[store] = root
        return runs[store]

    return make


def copy_of(made_root: Path, tmp_path: Path) -> Path:
    shutil.copytree(made_root / "ck", tmp_path / "ck")
    shutil.copytree(made_root / "out", tmp_path / "out")
    return tmp_path


def cut(path: Path, keep) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep(len(data))])


def sst_of(ck: Path, partition: int, version: int) -> Path:
    import json
    import zipfile

    meta = zipfile.ZipFile(ck / f"state/0/{partition}/{version}.zip").read("metadata").decode().splitlines()[1]
    return ck / f"state/0/{partition}/SSTs" / json.loads(meta)["sstFiles"][0]["dfsSstFileName"]


@pytest.mark.parametrize("store", ["hdfs", "rocksdb"])
def test_a_whole_checkpoint_has_no_problems(made, store):
    ck = made(store) / "ck"
    report = inspect_checkpoint(ck)
    assert report.whole and report.problems == ()
    assert report.last_committed == LAST == report.last_whole and report.in_flight is None
    assert report.identity["identity"]["state_store"] == store and report.identity["identity"]["protocol"] == "kip320"
    assert (report.state_store, report.partitions) == (store, 2)
    ext = "delta" if store == "hdfs" else "zip"
    assert {"offsets/3", "offsets/2", "commits/3", f"state/0/0/4.{ext}", f"state/0/1/4.{ext}"} <= set(report.needed)
    assert "whole: no problems" in format_report(report)
    plan = plan_repair(report)
    assert plan.moves == () and "nothing to repair" in format_plan(plan)
    assert inspect_checkpoint(ck, full=True).problems == ()


def test_a_batch_in_flight_is_not_a_problem_and_spark_runs_it_again(made, spark, tmp_path):
    straight = made("hdfs")
    root = copy_of(straight, tmp_path)
    (root / "ck/commits/3").unlink()  # the job died after the sink, before Spark's commit
    (root / "ck/commits/.3.crc").unlink()
    report = inspect_checkpoint(root / "ck")
    assert report.whole
    assert (report.last_committed, report.in_flight, report.last_whole) == (2, 3, 2)
    assert "in flight: batch 3" in format_report(report)
    assert plan_repair(report).moves == ()
    for kind_dir in (root / "out").glob("*/batch_id=3"):
        shutil.rmtree(kind_dir)
    assert [s.batch_id for s in stream(spark, root, "hdfs")] == [3]
    assert tree_bytes(root / "out") == tree_bytes(straight / "out")


def _offsets_cut(ck):
    cut(ck / "offsets/3", lambda n: n // 2)


CASES = {
    # name: (store, corrupt(ck), expected problems (batch, path, kind), batch kept, moved files besides the rolled-back logs)
    "last offsets emptied": ("hdfs", lambda ck: (ck / "offsets/3").write_bytes(b""),
                             [(3, "offsets/3", "empty")], 2),
    "last offsets truncated": ("hdfs", _offsets_cut, [(3, "offsets/3", "torn")], 2),
    "last commit torn": ("hdfs", lambda ck: cut(ck / "commits/3", lambda n: 6), [(3, "commits/3", "torn")], 2),
    "metadata emptied": ("hdfs", lambda ck: (ck / "metadata").write_bytes(b""), [(None, "metadata", "empty")], 3),
    "last delta torn": ("hdfs", lambda ck: cut(ck / "state/0/1/4.delta", lambda n: n - 25),
                        [(3, "state/0/1/4.delta", "torn")], 2),
    "last delta missing": ("hdfs", lambda ck: (ck / "state/0/0/4.delta").unlink(),
                           [(3, "state/0/0/4.delta", "missing")], 2),
    "first delta torn (none is whole)": ("hdfs", lambda ck: cut(ck / "state/0/0/1.delta", lambda n: n - 30),
                                         [(0, "state/0/0/1.delta", "torn")], None),
    "last zip torn": ("rocksdb", lambda ck: cut(ck / "state/0/1/4.zip", lambda n: n - 100),
                      [(3, "state/0/1/4.zip", "torn")], 2),
    "an SST missing": ("rocksdb", lambda ck: sst_of(ck, 0, 4).unlink(), None, 2),
    "last changelog torn (transformWithState)": ("tws", lambda ck: cut(ck / "state/0/1/4.changelog", lambda n: n - 12),
                                                 [(3, "state/0/1/4.changelog", "torn")], 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_check_names_the_problem_and_repair_rolls_back_to_the_uninterrupted_bytes(made, spark, tmp_path, case):
    store, corrupt, expected, kept = CASES[case]
    straight = made(store)
    root = copy_of(straight, tmp_path)
    ck = root / "ck"
    if expected is None:  # the SST the last zip names
        expected = [(3, str(sst_of(ck, 0, 4).relative_to(ck)), "missing")]
    corrupt(ck)

    report = inspect_checkpoint(ck)
    assert not report.whole
    assert [(p.batch, p.path, p.kind) for p in report.problems] == expected
    assert report.last_whole == kept
    text = format_report(report)
    for batch, path, kind in expected:
        assert f"{'checkpoint' if batch is None else f'batch {batch}'}: {path}: {kind}" in text

    plan = plan_repair(report)
    rerun = tuple(range((-1 if kept is None else kept) + 1, LAST + 1))
    assert plan.keep_through == kept and plan.rerun == rerun
    rolled_back = {f"{log}/{n}" for log in ("offsets", "commits") for n in rerun}
    ext = {"hdfs": "delta", "rocksdb": "zip", "tws": "changelog"}[store]
    if kept is None:  # Spark wants no state at batch 0: the whole directory goes
        rolled_back.add("state")
        broken = set()
    else:
        rolled_back |= {f"state/0/{p}/{n + 1}.{ext}" for p in (0, 1) for n in rerun}
        if store == "tws":  # a snapshot RocksDB's maintenance made meanwhile, the operator's metadata of the batch
            rolled_back |= {f"state/0/{p}/{n + 1}.zip" for p in (0, 1) for n in rerun if (ck / f"state/0/{p}/{n + 1}.zip").exists()}
            rolled_back |= {f"state/0/_metadata/v2/{n}" for n in rerun if (ck / f"state/0/_metadata/v2/{n}").exists()}
        rolled_back -= {path for _, path, kind in expected if kind == "missing"}
        broken = {path for _, path, kind in expected if kind != "missing"}
    assert {m for m in plan.moves if "/." not in m and not m.startswith(".")} == rolled_back | broken
    assert all(m.replace("/.", "/").endswith(".crc") for m in plan.moves if "/." in m or m.startswith("."))

    before = {k: v for k, v in all_bytes(ck).items() if k != "replemu.lock"}
    folder = apply_repair(plan, LocalStore(ck), STAMP)
    assert folder == repair_folder(str(ck), STAMP) == f"{ck}.repair-{STAMP}"
    assert (Path(folder) / REPAIR_MANIFEST).exists()
    for rel, data in before.items():  # nothing deleted: every byte still exists somewhere
        assert data in [p.read_bytes() for p in (ck / rel, Path(folder) / rel) if p.exists()], rel
    if case == "metadata emptied":  # Spark refuses offsets without it: a new one, with a new query id
        assert plan.query_id and (ck / "metadata").read_text() == '{"id":"%s"}' % plan.query_id
    else:
        assert plan.query_id is None
    moved = [p for p in all_bytes(Path(folder)) if p != REPAIR_MANIFEST]
    assert all(any(p == m or p.startswith(m + "/") for m in plan.moves) for p in moved)
    assert all(any(p == m or p.startswith(m + "/") for p in moved) for m in plan.moves)
    assert inspect_checkpoint(ck).whole

    for n in rerun:  # the rerun writes them again
        for kind_dir in (root / "out").glob(f"*/batch_id={n}"):
            shutil.rmtree(kind_dir)
    assert [s.batch_id for s in stream(spark, root, store)] == list(rerun)
    assert tree_bytes(root / "out") == tree_bytes(straight / "out")
    after = inspect_checkpoint(ck)
    assert after.whole and after.last_committed == LAST


def test_check_of_a_local_path_needs_no_spark(made, tmp_path):
    """No pyspark module, no Java: the check reads the files itself."""
    root = copy_of(made("hdfs"), tmp_path)
    (root / "ck/offsets/3").write_bytes(b"")
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "from streaming.checkpoint_check import inspect_checkpoint, format_report\n"
            f"print(format_report(inspect_checkpoint({str(root / 'ck')!r})), end='')\n"
            "assert not [m for m in sys.modules if m.startswith('py4j')]\n")
    from conftest import env_without_java

    env = {**env_without_java(), "SPARK_HOME": "/nonexistent",
           "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "batch 3: offsets/3: empty" in done.stdout


def test_a_hadoop_uri_is_checked_and_repaired_through_hadoop(made, spark, tmp_path):
    """``file://`` goes through the driver JVM's Hadoop filesystem, as hdfs:// or s3a:// would."""
    from streaming.storage import HadoopStore, open_store

    root = copy_of(made("hdfs"), tmp_path)
    ck = root / "ck"
    (ck / "state/0/1/4.delta").unlink()
    (ck / "offsets/3").write_bytes(b"")
    local = inspect_checkpoint(ck)
    store = open_store(f"file://{ck}", spark)
    assert isinstance(store, HadoopStore)
    remote = inspect_checkpoint(store)
    assert [(p.batch, p.path) for p in remote.problems] == [(p.batch, p.path) for p in local.problems] \
        == [(3, "offsets/3"), (3, "state/0/1/4.delta")]
    assert remote.last_whole == local.last_whole == 2
    plan = plan_repair(remote)
    assert set(plan.moves) == {m for m in plan_repair(local).moves if "/." not in m and not m.startswith(".")}
    folder = apply_repair(plan, store, STAMP)
    assert folder == f"file://{ck}.repair-{STAMP}"
    assert (Path(f"{ck}.repair-{STAMP}") / "offsets/3").exists() and not (ck / "offsets/3").exists()
    assert inspect_checkpoint(ck).whole


def replemu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replemu", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_cli_checks_and_repairs_and_refuses_a_running_job(made, tmp_path):
    import json

    from streaming.checkpoint import LOCK_FILE, claim_run, run_identity

    root = copy_of(made("hdfs"), tmp_path)
    ck = root / "ck"
    whole = replemu("checkpoint", "check", str(ck))
    assert whole.returncode == 0 and "last committed micro-batch: 3" in whole.stdout and "whole: no problems" in whole.stdout
    (ck / "offsets/3").write_bytes(b"")  # the torn checkpoint
    broken = replemu("checkpoint", "check", str(ck))
    assert broken.returncode == 1, broken.stderr
    assert "batch 3: offsets/3: empty" in broken.stdout and "rolls back to micro-batch 2 and runs 3 again" in broken.stdout
    as_json = json.loads(replemu("checkpoint", "check", "--json", str(ck)).stdout)
    assert as_json["problems"] == [{"batch": 3, "path": "offsets/3", "kind": "empty", "detail": as_json["problems"][0]["detail"]}]
    assert (as_json["last_committed"], as_json["last_whole"], as_json["whole"]) == (3, 2, False)

    dry = replemu("checkpoint", "repair", "--dry-run", str(ck))
    assert dry.returncode == 0 and "rolls back to micro-batch 2" in dry.stdout and "  offsets/3" in dry.stdout
    assert (ck / "offsets/3").exists() and not list(tmp_path.glob("ck.repair-*"))

    w = workload()
    identity = run_identity(protocol="kip320", knobs=None, input_dir=None, workload=w, shuffle_partitions=2,
                            state_store="hdfs", compact_min_records=None, gap_timeout_ms=60000)
    with claim_run(ck, root / "out", identity):  # a job runs on it
        busy = replemu("checkpoint", "repair", str(ck))
    assert busy.returncode == 2 and "in use by another running job" in busy.stderr
    assert (ck / "offsets/3").exists() and not list(tmp_path.glob("ck.repair-*"))

    done = replemu("checkpoint", "repair", str(ck))
    assert done.returncode == 0, done.stderr
    assert "rolled back to micro-batch 2" in done.stdout and "micro-batches that run again on the next start: 3" in done.stdout
    [folder] = tmp_path.glob("ck.repair-*")
    assert (folder / "offsets/3").read_bytes() == b"" and (folder / "commits/3").exists()
    assert (ck / LOCK_FILE).read_bytes() == b""  # released
    assert replemu("checkpoint", "check", str(ck)).returncode == 0
    again = replemu("checkpoint", "repair", str(ck))
    assert again.returncode == 0 and "nothing to repair" in again.stdout


def test_the_file_source_log_rolls_back_with_its_compact_file(spark, tmp_path):
    """The binaryFile source keeps its own log (``sources/0``, compacted every few entries): a torn
    compact file rolls the checkpoint back behind it, and the files are picked up again as before."""
    from conftest import BUNDLED
    from replemu.compile import compile_scenarios

    compile_scenarios(sorted(BUNDLED.glob("*.yaml"))[:3], tmp_path / "events", split=5)
    interval = "spark.sql.streaming.fileSource.log.compactInterval"

    def run(root: Path):
        spark.conf.set(interval, "3")  # read when the source starts: compact files at entries 2 and 5
        try:
            return run_stream(tmp_path / "events", root / "out", root / "ck", "kip320", spark=spark, quiet=True,
                              max_files_per_trigger=1)
        finally:
            spark.conf.unset(interval)

    straight = tmp_path / "straight"
    assert [s.batch_id for s in run(straight)] == [0, 1, 2, 3, 4]
    assert sorted(p.name for p in (straight / "ck/sources/0").iterdir() if not p.name.startswith(".")) == \
        ["0", "1", "2.compact", "3", "4"]
    root = tmp_path / "torn"
    shutil.copytree(straight / "ck", root / "ck")
    shutil.copytree(straight / "out", root / "out")
    cut(root / "ck/sources/0/2.compact", lambda n: n - 20)

    report = inspect_checkpoint(root / "ck")
    assert [(p.batch, p.path, p.kind) for p in report.problems] == [(2, "sources/0/2.compact", "torn")]
    assert report.last_whole == 1
    plan = plan_repair(report)
    assert plan.rerun == (2, 3, 4)
    assert {"sources/0/2.compact", "sources/0/3", "sources/0/4", "offsets/2", "commits/4"} <= set(plan.moves)
    assert not {"sources/0/0", "sources/0/1"} & set(plan.moves)
    apply_repair(plan, LocalStore(root / "ck"), STAMP)
    for n in plan.rerun:
        for kind_dir in (root / "out").glob(f"*/batch_id={n}"):
            shutil.rmtree(kind_dir)
    assert [s.batch_id for s in run(root)] == [2, 3, 4]
    assert tree_bytes(root / "out") == tree_bytes(straight / "out")


def test_a_commit_removed_by_hand_leaves_its_checksum_which_check_names_and_repair_moves(made, spark, tmp_path):
    """Removing ``commits/N`` by hand (a common tip for making Spark run a micro-batch again) leaves
    Hadoop's ``commits/.N.crc``, and Spark's rename of the new ``commits/N``'s checksum fails on it,
    a failure that points to check/repair; check names the orphan, repair moves it aside, and the
    same run then finishes with the uninterrupted bytes."""
    from streaming.failures import explain

    straight = made("hdfs")
    failing = copy_of(straight, tmp_path / "failing")
    (failing / "ck/commits/3").unlink()
    with pytest.raises(Exception) as failed:
        stream(spark, failing, "hdfs")
    failure = explain(failed.value)
    assert failure.kind == "checkpoint" and "commits/.3.crc" in failure.cause, failure
    assert "replemu checkpoint repair" in " ".join(failure.lines("kip320", str(failing / "ck"), str(failing / "out"), None))

    root = copy_of(straight, tmp_path / "repaired")
    ck = root / "ck"
    (ck / "commits/3").unlink()
    report = inspect_checkpoint(ck)
    assert [(p.batch, p.path, p.kind) for p in report.problems] == [(3, "commits/.3.crc", "orphan")]
    assert "commits/.3.crc: orphan" in format_report(report)
    plan = plan_repair(report)
    assert "commits/.3.crc" in plan.moves
    apply_repair(plan, LocalStore(ck), STAMP)
    assert inspect_checkpoint(ck).whole and not (ck / "commits/.3.crc").exists()

    for kind_dir in (root / "out").glob("*/batch_id=3"):
        shutil.rmtree(kind_dir)
    assert [s.batch_id for s in stream(spark, root, "hdfs")] == [3]
    assert tree_bytes(root / "out") == tree_bytes(straight / "out")
