"""The Spark job, on a real local SparkSession: parity with `replemu run`, checkpointed restarts,
quarantine of bad rows."""

import glob
import json
import shlex
import shutil
from pathlib import Path

import pytest

import readme
from conftest import BUNDLED, gap_then_late_row
from emulator import VARIANT_NAMES, run_scenario
from replemu.compile import compile_scenarios
from scenario_io.yaml_files import load_scenario
from streaming.events import scenario_rows, write_event_files
from streaming.job import run_stream
from streaming.results import quarantine_rows, read_results

FILES = sorted(BUNDLED.glob("*.yaml"))


def stream(spark, events: Path, out: Path, protocol: str, **kw):
    return run_stream(events, out / "output", out / "checkpoint", protocol, max_files_per_trigger=1, spark=spark, quiet=True, **kw)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


README_TOUR = "tests/test_stream.py::test_the_readme_streaming_tour_matches_replemu_run"


def readme_tour_protocol() -> str:
    """The variant the README's streaming tour streams (its ``replemu stream --protocol``)."""
    argv = [shlex.split(c.text) for b in readme.blocks_run_by(README_TOUR) for c in b.commands]
    stream_argv = next(a for a in argv if a[:2] == ["replemu", "stream"])
    return stream_argv[stream_argv.index("--protocol") + 1]


# The README's tour streams one variant through the command line (below); the others here.
@pytest.mark.parametrize("protocol", [p for p in VARIANT_NAMES if p != readme_tour_protocol()])
def test_streamed_scenarios_match_replemu_run(spark, tmp_path, protocol):
    """Every bundled scenario, split over 3 micro-batches, ends as `replemu run --json` does."""
    compile_scenarios(FILES, tmp_path / "events", split=3)
    stats = stream(spark, tmp_path / "events", tmp_path, protocol)
    assert [s.batch_id for s in stats] == [0, 1, 2]
    streamed = {r["scenario"]: r for r in read_results(tmp_path / "output")}
    for path in FILES:
        expected = run_scenario(load_scenario(path), protocol)
        assert streamed[expected["scenario"]] == expected


def test_the_readme_streaming_tour_matches_replemu_run(spark, tmp_path, monkeypatch, capsys):
    """The README's streaming tour, its commands run as written (``replemu compile``, ``stream``,
    ``results``: the command line in this process, on the suite's SparkSession), prints what the
    README shows, and every bundled scenario ends as `replemu run --json` does (the variant the
    parametrized test above leaves to this one)."""
    import streaming.session
    from replemu.cli import main

    monkeypatch.setattr(streaming.session, "build_spark", lambda *args, **kwargs: spark)
    monkeypatch.setattr(streaming.session, "stop_session", lambda session: None)  # the suite's session lives on
    # The suite's JVM keeps the directory it started in: relative paths are given from the README's
    # root (a view of the repository whose out/ is this test's), and read back relative in the output.
    root = readme.repo_view(tmp_path / "repo")
    protocol, output = readme_tour_protocol(), None
    for command in (c for b in readme.blocks_run_by(README_TOUR) for c in b.commands):
        argv = shlex.split(command.text)
        assert argv[0] == "replemu", f"README.md:{command.line}: not a replemu command: {command.text}"
        argv = [expanded for arg in argv[1:] for expanded in
                (sorted(glob.glob(str(root / arg))) if glob.has_magic(arg) else [arg])]
        argv = [str(root / arg) if "/" in arg and not arg.startswith(("/", "-")) else arg for arg in argv]
        if argv[0] == "stream":
            output = Path(argv[argv.index("--output") + 1])
        capsys.readouterr()
        assert main(argv) == 0, f"README.md:{command.line}: `{command.text}` failed: {capsys.readouterr()}"
        wrong = readme.mismatch(command.shown, capsys.readouterr().out.replace(f"{root}/", ""))
        assert wrong is None, f"README.md:{command.line}: `{command.text}`: {wrong}"
    assert output is not None, "the README's streaming tour runs no replemu stream"
    streamed = {r["scenario"]: r for r in read_results(output)}
    for path in FILES:
        expected = run_scenario(load_scenario(path), protocol)
        assert streamed[expected["scenario"]] == expected


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory):
    """The bundled scenarios' events in five files, and the output of one run over all of them."""
    root = tmp_path_factory.mktemp("uninterrupted")
    write_event_files([scenario_rows(load_scenario(p)) for p in FILES], root / "all", split=5)
    stream(spark, root / "all", root / "straight", "kip101")
    return root


@pytest.mark.parametrize("stop_after", [1, 2, 4])
def test_restart_from_checkpoint_gives_the_uninterrupted_output(spark, tmp_path, stop_after, uninterrupted):
    """Stop after k micro-batches (mid-scenario), restart from the checkpoint: same bytes, no
    duplicated or missing rows."""
    events = tmp_path / "events"
    events.mkdir()
    files = sorted((uninterrupted / "all").iterdir())
    for f in files[:stop_after]:
        shutil.copy2(f, events / f.name)  # keeps the mtime: the source's order
    first = stream(spark, events, tmp_path / "restarted", "kip101")
    assert [s.batch_id for s in first] == list(range(stop_after))
    for f in files[stop_after:]:
        shutil.copy2(f, events / f.name)  # keeps the mtime: the source's order
    second = stream(spark, events, tmp_path / "restarted", "kip101")
    assert [s.batch_id for s in second] == list(range(stop_after, 5))

    straight, restarted = tree_bytes(uninterrupted / "straight" / "output"), tree_bytes(tmp_path / "restarted" / "output")
    assert sorted(straight) == sorted(restarted)
    assert straight == restarted
    timeline = [r for r in read_results(tmp_path / "restarted" / "output")]
    assert len(timeline) == len(FILES)


def test_bad_rows_are_quarantined_and_good_partitions_proceed(spark, tmp_path):
    good = scenario_rows(load_scenario(BUNDLED / "s1-kip101-scenario-1.yaml"))
    bad_partition = scenario_rows(load_scenario(BUNDLED / "seed-1-two-round-hw.yaml"))
    topic = bad_partition[0]["topic"]
    bad_partition[2] = {**bad_partition[2], "type": "teleport"}                     # unknown step type
    bad_partition[3] = {**bad_partition[3], "args": json.dumps({"replica": 9})}      # not a replica
    bad_partition.append(dict(bad_partition[4]))                                     # duplicate seq 4
    bad_partition.append({"topic": topic, "partition": 0, "seq": 9, "type": "fetch", "args": json.dumps({"replica": 2})})  # gap
    events = tmp_path / "events"
    write_event_files([good, bad_partition], events, split=2)
    (events / "events-99999.jsonl").write_text("{not json\n")  # no line is an event: the whole file
    (events / "events-99998.jsonl").write_text(json.dumps(bad_partition[4]) + "\n[1, 2]\n")  # one bad line
    stream(spark, events, tmp_path, "hw")

    results = {r["scenario"]: r for r in read_results(tmp_path / "output")}
    assert results["s1-kip101-scenario-1"] == run_scenario(load_scenario(BUNDLED / "s1-kip101-scenario-1.yaml"), "hw")
    assert results["seed-1-two-round-hw"]["steps"] == 2  # elect and the last fetch were applied
    reasons = [(q["seq"], q["reason"]) for q in quarantine_rows(tmp_path / "output")]
    assert any(seq == 2 and "unknown step type 'teleport'" in r for seq, r in reasons)
    assert any(seq == 3 and "replica 9 is not one of the partition's replicas" in r for seq, r in reasons)
    assert any(seq == 4 and "duplicate or out-of-order sequence" in r for seq, r in reasons)
    assert any("unreadable file" in r and "events-99999.jsonl: not JSON lines" in r for _, r in reasons)
    assert any("unreadable row" in r and "events-99998.jsonl line 2): not a JSON object" in r for _, r in reasons)
    gaps = json.loads((tmp_path / "output" / "gaps.json").read_text())
    assert gaps == [{"topic": topic, "partition": 0, "missing_seq": 5, "waiting_seqs": [9]}]


def test_processing_time_trigger_reports_a_gap_after_the_timeout_and_keeps_running(spark, tmp_path):
    _reasons, _at_the_end, result = gap_then_late_row(spark, tmp_path)
    assert result == run_scenario(load_scenario(BUNDLED / "seed-1-two-round-hw.yaml"), "hw")


def workload_scenario(seed, k, profile, steps):
    from itertools import islice

    from emulator import parse_scenario
    from emulator.workload import partition_header, step_bursts
    from scenario_io.profiles import load_profiles

    p = load_profiles()[profile]
    doc = partition_header(seed, k, p)
    doc.pop("length")
    doc["steps"] = [s for burst in islice(step_bursts(seed, k, p), steps) for s in burst][:steps]
    return parse_scenario(doc)


def test_workload_stream_is_deterministic_across_restarts_and_matches_the_core(spark, tmp_path):
    """A generated stream (no input files), stopped after 2 batches and restarted, gives the bytes
    of an uninterrupted run, and every partition ends as the core replay of the same steps."""
    from scenario_io.profiles import load_profiles
    from streaming.workload_source import WorkloadSpec

    clean = load_profiles()["clean"]
    run_stream(None, tmp_path / "straight", tmp_path / "ck1", "kip101", spark=spark, quiet=True,
               workload=WorkloadSpec.of(clean, 5, 6, 10, max_steps=40))
    run_stream(None, tmp_path / "restarted", tmp_path / "ck2", "kip101", spark=spark, quiet=True,
               workload=WorkloadSpec.of(clean, 5, 6, 10, max_steps=20))
    second = run_stream(None, tmp_path / "restarted", tmp_path / "ck2", "kip101", spark=spark, quiet=True,
                        workload=WorkloadSpec.of(clean, 5, 6, 10, max_steps=40))
    assert [s.batch_id for s in second] == [2, 3]
    assert tree_bytes(tmp_path / "straight") == tree_bytes(tmp_path / "restarted")
    assert_partitions_end_as_the_core(tmp_path / "straight", seed=5, partitions=6, steps=40, protocol="kip101")


def assert_partitions_end_as_the_core(output: Path, seed: int, partitions: int, steps: int, protocol: str) -> None:
    """Every partition of a clean workload stream's ``output`` ends as the core's replay of its
    first ``steps`` steps: the same final state, errors and invariants broken."""
    results = {r["scenario"]: r for r in read_results(output)}
    assert len(results) == partitions
    for k in range(partitions):
        expected = run_scenario(workload_scenario(seed, k, "clean", steps), protocol)
        got = results[expected["scenario"]]
        assert got["final"] == expected["final"] and got["errors"] == expected["errors"]
        assert [v["invariant"] for v in got["violations"]] == [v["invariant"] for v in expected["violations"]]


def test_campaign_on_spark_finds_what_the_local_engine_finds(spark, tmp_path):
    from replemu.campaign import run_campaign

    local = run_campaign(1, "clean", 60, ["hw", "kip320"], tmp_path / "local", engine="local", progress=False)
    streamed = run_campaign(1, "clean", 60, ["hw", "kip320"], tmp_path / "spark", engine="spark", progress=False, spark=spark)
    for report in (local, streamed):
        for r in report["protocols"].values():
            for e in r["examples"]:
                e["scenario_file"] = Path(e["scenario_file"]).name
    assert streamed == local


def test_the_stream_applies_knobs_and_records_them_like_replemu_run(spark, tmp_path):
    """The zombie re-election streamed twice: the kip320 preset breaks StrongIsr; with the job's
    knob reset_remote_leo_on_reelection (and one scenario setting a knob in its config) every
    partition equals `replemu run --knob ...`, knobs recorded in the results and run.json."""
    import json

    import yaml

    from test_kafka_rules import ZOMBIE_REELECTION

    files = []
    for name, knobs in (("zombie", None), ("zombie-flat", {"isr_shrink_exempts_leo_equal": False})):
        f = tmp_path / f"{name}.yaml"
        f.write_text(yaml.safe_dump({"name": name, "replicas": [1, 2, 3], "steps": ZOMBIE_REELECTION,
                                     **({"config": {"knobs": knobs}} if knobs else {})}))
        files.append(f)
    compile_scenarios(files, tmp_path / "events", split=2)
    for label, job_knobs in (("preset", None), ("reset", {"reset_remote_leo_on_reelection": True})):
        out = tmp_path / label
        run_stream(tmp_path / "events", out / "output", out / "ckpt", "kip320", max_files_per_trigger=1, spark=spark,
                   quiet=True, knobs=job_knobs)
        streamed = {r["scenario"]: r for r in read_results(out / "output")}
        for f in files:
            assert streamed[f.stem] == run_scenario(load_scenario(f), "kip320", knobs=job_knobs)
        assert json.loads((out / "output" / "run.json").read_text())["knobs"] == (job_knobs or {})
    preset = {r["scenario"]: r for r in read_results(tmp_path / "preset" / "output")}
    assert "StrongIsr" in {v["invariant"] for v in preset["zombie"]["violations"]} and "knobs" not in preset["zombie"]
    assert preset["zombie-flat"]["knobs"]["isr_shrink_exempts_leo_equal"] is False
