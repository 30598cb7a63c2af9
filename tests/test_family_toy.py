"""A third protocol family costs a module and one registry row (issue 48, docs/architecture.md):
``tests/toy_family.py`` (a register copied between servers) registered beside replemu's two runs
through ``replemu run``, ``campaign``, ``explore`` and the stream with no engine told about it.
Each engine must give the toy's own verdict: a write and a crash of the server that took it break
``AckedWriteKept`` under ``toy-volatile``, never under ``toy-durable``."""

from __future__ import annotations

import json

import pytest
import yaml

import toy_family
from emulator import families
from replemu.cli import main

STORY = {"name": "toy-story", "toy": [1, 2], "steps": [
    {"write": {"server": 1, "value": "a"}}, {"copy": {"source": 1, "destination": 2}},
    {"write": {"server": 2, "value": "b"}}, {"crash": {"server": 2}}]}


@pytest.fixture
def toy():
    families.register(toy_family.TOY)
    yield toy_family.TOY
    families.unregister("toy")


def cli_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_replemu_run_replays_a_toy_file_under_each_of_its_protocols(toy, tmp_path, capsys):
    path = tmp_path / "story.yaml"
    path.write_text(yaml.safe_dump({**STORY, "expect": {"toy-volatile": {"violations": ["AckedWriteKept"]},
                                                        "toy-durable": {"violations": []}}}))
    lossy = cli_json(capsys, "run", str(path), "--protocol", "toy-volatile", "--json")
    assert lossy["family"] == "toy" and lossy["final"] == {"acked": "b", "servers": {"1": "a", "2": None}}
    assert [(v["invariant"], v["step"]) for v in lossy["violations"]] == [("AckedWriteKept", 4)]
    assert cli_json(capsys, "run", str(path), "--protocol", "toy-durable", "--json")["violations"] == []
    for protocol in ("toy-volatile", "toy-durable"):  # --check reads the file's expect block through the family
        assert main(["run", str(path), "--protocol", protocol, "--check", "--json"]) == 0
    assert main(["run", str(path), "--protocol", "kip320"]) == 2  # another family's protocol is refused


def test_a_toy_campaign_finds_the_loss_and_writes_a_file_that_replays_to_it(toy, tmp_path, capsys):
    volatile = cli_json(capsys, "campaign", "--protocol", "toy-volatile", "--seed", "3", "--partitions", "30",
                        "--out", str(tmp_path), "--json")
    report = volatile["protocols"]["toy-volatile"]
    assert report["partitions"] == 30 and report["violations"].get("AckedWriteKept", 0) > 0
    example = report["examples"][0]
    replayed = cli_json(capsys, "run", example["scenario_file"], "--protocol", "toy-volatile", "--json")
    assert [(v["invariant"], v["step"]) for v in replayed["violations"]] == [(example["invariant"], example["step"])]
    again = cli_json(capsys, "campaign", "--protocol", "toy-volatile", "--seed", "3", "--partitions", "30",
                     "--out", str(tmp_path / "again"), "--json")
    assert again["protocols"] == {"toy-volatile": {**report, "examples": again["protocols"]["toy-volatile"]["examples"]}}
    durable = cli_json(capsys, "campaign", "--protocol", "toy-durable", "--seed", "3", "--partitions", "30",
                       "--out", str(tmp_path), "--json")
    assert durable["protocols"]["toy-durable"]["violations"] == {}


def test_explore_finds_the_shortest_loss_under_volatile_and_none_under_durable(toy, tmp_path, capsys):
    lossy = cli_json(capsys, "explore", "--protocol", "toy-volatile", "--depth", "3", "--out", str(tmp_path), "--json")
    found = {v["invariant"]: v for v in lossy["violations"]}
    assert set(found) == {"AckedWriteKept"} and found["AckedWriteKept"]["depth"] == 2  # a write, then its crash
    assert main(["run", found["AckedWriteKept"]["scenario_file"], "--protocol", "toy-volatile", "--check"]) == 0
    durable = cli_json(capsys, "explore", "--protocol", "toy-durable", "--depth", "3", "--out", str(tmp_path / "d"), "--json")
    assert durable["violations"] == [] and durable["complete"] and durable["distinct_states"] > 1


def test_the_stream_steps_toy_partitions_as_replemu_run_does(toy, spark):
    """A real SparkSession: the state function runs in Spark's Python workers, which get the family
    with the query (pickled by value here, as a notebook's own family would be)."""
    from pyspark import cloudpickle

    from replemu import api

    cloudpickle.register_pickle_by_value(toy_family)
    try:
        rows = [{"topic": "toy-story", "partition": 0, "seq": 0, "type": "toy",
                 "args": json.dumps({"scenario": "toy-story", "servers": [1, 2]})}]
        rows += [{"topic": "toy-story", "partition": 0, "seq": i, "type": kind, "args": json.dumps(args)}
                 for i, step in enumerate(STORY["steps"], 1) for kind, args in step.items()]
        rows.append({"topic": "toy-story", "partition": 0, "seq": 5, "type": "copy",
                     "args": json.dumps({"source": 2, "destination": 1})})  # 2 holds nothing: refused, quarantined
        events = spark.createDataFrame(rows, "topic string, partition int, seq long, type string, args string")
        out = api.replicate(events, "toy-volatile").collect()
    finally:
        cloudpickle.unregister_pickle_by_value(toy_family)
    by_kind: dict[str, list] = {}
    for r in out:
        by_kind.setdefault(r["kind"], []).append(r)
    scenario = toy.parse_scenario(STORY)
    result = toy.run(scenario, "toy-volatile")
    assert [(r["invariant"], r["at_step"]) for r in by_kind["violations"]] == [
        (v["invariant"], v["step"]) for v in result["violations"]]
    assert len(by_kind["timeline"]) == 2 * len(STORY["steps"])
    assert [r["reason"] for r in by_kind["quarantine"]] == ["seq 5 (copy(2, 1)): refused under toy-volatile: "
                                                            "server 2 holds nothing to copy"]
    assert json.loads(by_kind["summary"][0]["final"]) == result["final"]
