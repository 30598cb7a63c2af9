"""`elect` under KRaft is Kafka's ElectLeaders (3.5.0 / 3.8.0 ReplicationControlManager.electLeader):
PREFERRED by default, UNCLEAN with `unclean: true`; no record and no new epoch when the election is
not needed or not possible, the answer in the step's errors; the partition's creation is the only
`elect` that may set an epoch or an ISR, and a step no KRaft controller takes is refused (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run
from emulator import ScenarioError

KRAFT = ["kip903", "kip966"]
REPLEMU = Path(sys.executable).with_name("replemu")
CREATE = {"elect": {"leader": 1, "epoch": 0, "isr": [1, 2, 3]}}


def fetch(r):
    return {"fetch": {"replica": r}}


def answers(result) -> list[tuple[int, str]]:
    return [(e["step"], e["error"]) for e in result["errors"]]


def writes(result, step) -> list[dict]:
    return [e for e in result["trace"][step - 1]["outcome"]["events"] if e["event"] == "PartitionChange"]


@pytest.mark.parametrize("protocol", KRAFT)
def test_preferred_election_while_the_preferred_replica_leads_writes_nothing(protocol):
    result = run([CREATE, {"produce": {"value": "a"}}, {"elect": {}}], protocol, replicas=(1, 2, 3), trace=True)
    assert answers(result) == [(3, "ELECTION_NOT_NEEDED")]
    assert writes(result, 3) == []
    assert result["final"]["controller"]["epoch"] == 0 and result["final"]["controller"]["leader"] == 1


@pytest.mark.parametrize("protocol", KRAFT)
def test_preferred_election_keeps_a_valid_leader_when_the_preferred_replica_is_out_of_the_isr(protocol):
    """1 fenced: 2 leads, 1 is not in the ISR, so PREFERRED keeps 2 and writes nothing
    (electPreferredLeader returns the current leader: a no-op record)."""
    steps = [CREATE, {"fence": {"replica": 1}}, {"unfence": {"replica": 1}}, {"elect": {}}]
    result = run(steps, protocol, replicas=(1, 2, 3), trace=True)
    assert answers(result) == [(4, "PREFERRED_LEADER_NOT_AVAILABLE")]
    assert writes(result, 4) == []
    assert result["final"]["controller"]["leader"] == 2 and result["final"]["controller"]["epoch"] == 1


@pytest.mark.parametrize("protocol", KRAFT)
def test_preferred_election_moves_leadership_back_once_the_preferred_replica_is_in_the_isr(protocol):
    steps = [CREATE, {"fence": {"replica": 1}}, {"unfence": {"replica": 1}}, fetch(1), {"elect": {}}]
    result = run(steps, protocol, replicas=(1, 2, 3), trace=True)
    assert answers(result) == []
    assert [(e["leader"], e["epoch"], e["clean"]) for e in writes(result, 5)] == [(1, 2, True)]
    assert result["final"]["replicas"]["1"]["role"] == "leader"


@pytest.mark.parametrize("protocol", KRAFT)
def test_unclean_election_is_not_needed_while_a_leader_is_registered(protocol):
    """The controller cannot see a crash: the crashed leader is still its leader."""
    steps = [CREATE, {"crash": {"replica": 1}}, {"elect": {"unclean": True}}]
    result = run(steps, protocol, replicas=(1, 2, 3), trace=True)
    assert answers(result) == [(3, "ELECTION_NOT_NEEDED")]
    assert writes(result, 3) == []


def test_unclean_election_elects_an_out_of_sync_replica_only_when_nobody_valid_is_left():
    """kip903: fencing the last ISR member leaves ISR [1] with no leader; PREFERRED finds nobody
    (PREFERRED_LEADER_NOT_AVAILABLE), UNCLEAN elects the first unfenced replica, ISR [it]."""
    steps = [
        {"elect": {"leader": 1, "epoch": 0, "isr": [1]}},
        {"fence": {"replica": 1}},
        {"elect": {}},
        {"elect": {"unclean": True}},
    ]
    result = run(steps, "kip903", replicas=(1, 2, 3), trace=True)
    assert answers(result) == [(3, "PREFERRED_LEADER_NOT_AVAILABLE")]
    assert [(e["leader"], e["isr"], e["clean"]) for e in writes(result, 4)] == [(2, [2], False)]


def test_unclean_election_with_every_broker_fenced_answers_eligible_leaders_not_available():
    steps = [
        {"elect": {"leader": 1, "epoch": 0, "isr": [1]}},
        {"fence": {"replica": 1}},
        {"fence": {"replica": 2}},
        {"elect": {"unclean": True}},
    ]
    result = run(steps, "kip903", replicas=(1, 2), trace=True)
    assert answers(result) == [(4, "ELIGIBLE_LEADERS_NOT_AVAILABLE")]
    assert writes(result, 4) == []


@pytest.mark.parametrize("protocol", KRAFT)
@pytest.mark.parametrize("later", [{"leader": 2, "epoch": 1}, {"isr": [1, 2]}, {"leader": 3}],
                         ids=["epoch", "isr", "leader-kafka-does-not-elect"])
def test_a_step_no_kraft_controller_takes_is_refused(protocol, later):
    """After the creation: an epoch, an ISR, or a leader other than the one ElectLeaders elects (1,
    the preferred replica, back in the ISR)."""
    steps = [CREATE, {"fence": {"replica": 1}}, {"unfence": {"replica": 1}}, fetch(1), {"elect": later}]
    with pytest.raises(ScenarioError, match=r"step 5 \(elect.*not a step the kip9\d\d controller can take"):
        run(steps, protocol, replicas=(1, 2, 3))


@pytest.mark.parametrize("protocol", KRAFT)
def test_the_partitions_creation_may_set_leader_epoch_and_isr(protocol):
    result = run([{"elect": {"leader": 2, "epoch": 100, "isr": [2, 3]}}], protocol, replicas=(1, 2, 3))
    assert result["final"]["controller"]["leader"] == 2
    assert result["final"]["controller"]["epoch"] == 100 and result["final"]["controller"]["isr"] == [2, 3]


def test_replemu_run_refuses_with_the_file_the_step_and_why(tmp_path):
    path = tmp_path / "forced.yaml"
    path.write_text(yaml.safe_dump({"name": "forced", "replicas": [1, 2], "steps": [
        {"elect": {"leader": 1, "epoch": 0, "isr": [1, 2]}}, {"elect": {"leader": 2, "epoch": 1, "isr": [2]}}]}))
    out = subprocess.run([str(REPLEMU), "run", str(path), "--protocol", "kip903"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert f"{path}: step 2 (elect(2, e1, isr=[2])): not a step the kip903 controller can take" in out.stderr
    assert "only the partition's creation may set" in out.stderr
    zk = subprocess.run([str(REPLEMU), "run", str(path), "--protocol", "kip320"], capture_output=True, text=True, cwd=ROOT)
    assert zk.returncode == 0, zk.stderr  # the same forced election is a ZooKeeper controller's step


@pytest.mark.parametrize("path", sorted((ROOT / "conf" / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_no_bundled_scenario_has_a_kraft_verdict_from_a_forced_step(path):
    """Every bundled scenario runs under KRaft (nothing refused), and no leader epoch is reused."""
    for protocol in KRAFT:
        out = subprocess.run([str(REPLEMU), "run", str(path), "--protocol", protocol, "--check"],
                             capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "UniqueLeaderPerEpoch" not in out.stdout


ZK_ERA = {"name": "zk-era", "replicas": [1, 2], "steps": [
    {"elect": {"leader": 1, "epoch": 0, "isr": [1, 2]}}, {"produce": {"value": "a"}},
    {"elect": {"leader": 2, "epoch": 1, "isr": [2]}}, {"fetch": {"replica": 1}}]}


def _zk_era_file(tmp_path, expect=None) -> Path:
    path = tmp_path / "zk-era.yaml"
    path.write_text(yaml.safe_dump({**ZK_ERA, **({"expect": expect} if expect else {})}))
    return path


def test_a_zookeeper_era_file_under_every_variant_is_not_expressible_under_kraft_only(tmp_path, capsys):
    """Issue 46 item 2: a forced election (epoch, ISR) is one KRaft variant's answer, "not
    expressible" with the step and why, beside the ZooKeeper variants' verdicts; exit 0."""
    import json

    from emulator import VARIANT_NAMES
    from emulator.result import check_result_document
    from replemu.cli import main

    path = _zk_era_file(tmp_path)
    assert main(["run", str(path), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["protocol"] for r in results] == list(VARIANT_NAMES)
    for r in results:
        if r["protocol"] in KRAFT:
            assert r["not_expressible"]["step"] == 3 and r["not_expressible"]["description"] == "elect(2, e1, isr=[2])"
            assert "only the partition's creation may set" in r["not_expressible"]["reason"]
            assert not {"final", "violations", "losses"} & set(r)  # no verdict from a step it cannot take
        else:
            assert "not_expressible" not in r and r["final"]["controller"]["leader"] == 2
    assert len(check_result_document(results, "zk.json")) == len(VARIANT_NAMES)  # export and dashboard read it
    (tmp_path / "zk.json").write_text(json.dumps(results))
    assert main(["export", str(tmp_path / "zk.json"), "--to", str(tmp_path / "logs")]) == 0
    assert "skipped zk-era under kip903: not expressible under kip903: step 3" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [f"zk-era-{p}" for p in VARIANT_NAMES if p not in KRAFT]
    assert main(["dashboard", str(tmp_path / "zk.json"), "--output", str(tmp_path / "dash")]) == 0
    assert (tmp_path / "dash" / "dashboard.html").is_file()
    capsys.readouterr()

    assert main(["run", str(path), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "verdict zk-era / kip903: not expressible under kip903: step 3 (elect(2, e1, isr=[2]))" in out
    assert "verdict zk-era / kip320: no invariant violated" in out
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("scenario ")))
    assert lines[header].split()[-2:] == KRAFT  # the matrix: the KRaft variants' cells last
    assert lines[header + 2].startswith("zk-era ") and lines[header + 2].endswith("not expressible  not expressible")
    assert lines[header + 3].split() == ["(step", "3)", "(step", "3)"]


def test_check_judges_the_variants_the_expect_block_names(tmp_path, capsys):
    from replemu.cli import main

    zk_only = _zk_era_file(tmp_path, {"kip320": {"violations": []}})
    assert main(["run", str(zk_only), "--check"]) == 0
    assert "--protocol kip903: no expectation" in capsys.readouterr().out
    named = _zk_era_file(tmp_path, {"kip320": {"violations": []}, "kip903": {"violations": []}})
    assert main(["run", str(named), "--check"]) == 1
    out = capsys.readouterr().out
    assert "--protocol kip903: DISAGREES" in out and "  - not expressible under kip903: step 3" in out


def test_a_file_no_variant_asked_for_can_replay_is_still_refused(tmp_path, capsys):
    from replemu.cli import main

    path = _zk_era_file(tmp_path)
    assert main(["run", str(path), "--protocol", "kip966", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "step 3 (elect(2, e1, isr=[2])): not a step the kip966 controller can take" in captured.err


def test_a_campaign_counts_a_partition_no_kraft_controller_can_replay_as_not_expressible(tmp_path):
    """A campaign over scenarios with a forced election (the generated workloads draw none): under
    kip903 such a partition counts as not expressible, never as a verdict; the others as before."""
    from emulator import parse_scenario, run_scenario
    from replemu.campaign import tally

    docs = [ZK_ERA, {**ZK_ERA, "name": "kraft-ok", "steps": ZK_ERA["steps"][:2]}]
    scenarios = [parse_scenario(d) for d in docs]
    report = tally(((k, run_scenario(s, "kip903", refusal_as_result=True)) for k, s in enumerate(scenarios)), "kip903",
                   docs.__getitem__, tmp_path, 1, "mixed")
    assert report["partitions"] == 2 and report["not_expressible"] == 1 and report["steps"] == 2
    zk = tally(((k, run_scenario(s, "kip320")) for k, s in enumerate(scenarios)), "kip320", docs.__getitem__, tmp_path, 1, "mixed")
    assert "not_expressible" not in zk and zk["steps"] == 6


def test_export_of_results_none_of_which_has_replicas_is_refused_and_writes_nothing(tmp_path, capsys):
    """A document whose every result is "not expressible" has nothing to export: exit 2 naming the
    step (as replemu run refuses a file no variant can replay), not exit 0 with nothing written; a
    directory given for the JSON (a stream's output) is named as such, with the way to its JSON."""
    import json

    from emulator import parse_scenario, run_scenario
    from replemu.cli import main

    scenario = parse_scenario(ZK_ERA)
    (tmp_path / "kraft.json").write_text(json.dumps([run_scenario(scenario, p, refusal_as_result=True) for p in KRAFT]))
    assert main(["export", str(tmp_path / "kraft.json"), "--to", str(tmp_path / "logs")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert "nothing to export" in captured.err and "zk-era: not expressible under kip903: step 3 (elect(2, e1, isr=[2]))" in captured.err
    assert not (tmp_path / "logs").exists()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "run.json").write_text("{}")
    assert main(["export", str(tmp_path / "out"), "--to", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"replemu: error: {tmp_path / 'out'}: a directory, not the JSON of replemu run --json") and "Errno" not in err
    assert f"replemu results {tmp_path / 'out'} --json" in err and not (tmp_path / "logs").exists()
