"""`replemu run` as users and tools call it: JSON contract, exit statuses, validation errors."""

import json

import pytest
import yaml

from conftest import BUNDLED, ROOT, replemu

S1 = str(BUNDLED / "s1-kip101-scenario-1.yaml")
SEED1 = str(BUNDLED / "seed-1-two-round-hw.yaml")


def test_json_is_exactly_the_contract_result_object():
    out = replemu("run", S1, "--protocol", "hw", "--json")
    assert out.returncode == 0 and out.stderr == ""
    result = json.loads(out.stdout)
    assert list(result) == ["format", "scenario", "protocol", "steps", "final", "violations", "losses", "errors"]
    assert (result["format"], result["scenario"], result["protocol"], result["steps"]) == (1, "s1-kip101-scenario-1", "hw", 20)
    assert list(result["final"]) == ["controller", "replicas"]
    assert result["final"]["controller"] == {"leader": 1, "epoch": 1, "isr": [1, 2]}
    r1 = result["final"]["replicas"]["1"]
    assert list(r1) == ["alive", "halted", "role", "leader_epoch", "leo", "hw", "log", "epoch_cache", "remote_leo"]
    assert r1["remote_leo"] == {"2": 2} and result["final"]["replicas"]["2"]["remote_leo"] is None
    assert r1["log"] == [[0, 0, "m1"], [1, 1, "m3"]]
    assert all(set(v) == {"invariant", "step", "detail"} for v in result["violations"])


def test_several_runs_print_a_json_array_in_file_then_variant_order():
    out = replemu("run", S1, SEED1, "--protocol", "all", "--json")
    runs = json.loads(out.stdout)
    assert [(r["scenario"], r["protocol"]) for r in runs] == [
        (s, p) for s in ("s1-kip101-scenario-1", "seed-1-two-round-hw")
        for p in ("hw", "kip101", "kip279", "kip320", "kip903", "kip966")
    ]


def test_json_is_byte_identical_across_runs():
    first = replemu("run", *map(str, sorted(BUNDLED.glob("*.yaml"))), "--protocol", "all", "--json", "--trace")
    second = replemu("run", *map(str, sorted(BUNDLED.glob("*.yaml"))), "--protocol", "all", "--json", "--trace")
    assert first.returncode == 0 and first.stdout == second.stdout


def test_human_output_has_step_table_final_logs_and_verdict():
    out = replemu("run", S1, "--protocol", "hw")
    lines = out.stdout.splitlines()
    assert any(line.startswith("step  event") and "r1 LEO/HW/e" in line for line in lines)
    assert any(line.startswith("12 ") and "!StrongIsr" in line and "truncate r1 2->1 (hw)" in line for line in lines)
    assert any(line.startswith("1 ") and "e0 m2" in line and "<- differs" in line for line in lines)
    assert [l for l in lines if l][-1].startswith("verdict s1-kip101-scenario-1 / hw: VIOLATED StrongIsr (step 12)")


def test_check_passes_on_bundled_and_fails_on_a_wrong_expectation(write_yaml):
    assert replemu("run", S1, "--protocol", "all", "--check").returncode == 0
    data = yaml.safe_load(open(S1))
    data["expect"]["hw"] = {"violations": ["StrongIsr"]}  # omits NoCommittedDataLoss, EventualConvergence
    data["expect"]["kip320"] = {"violations": ["StrongIsr"]}
    out = replemu("run", str(write_yaml(data)), "--protocol", "all", "--check")
    assert out.returncode == 1
    assert "--protocol hw: DISAGREES" in out.stdout and "NoCommittedDataLoss was violated at step 14" in out.stdout
    assert "--protocol kip320: DISAGREES" in out.stdout and "expected StrongIsr to be violated" in out.stdout
    assert "--protocol kip101: agrees" in out.stdout


def test_python_dash_m_and_the_console_script_agree():
    import subprocess
    script = subprocess.run([str(ROOT / ".venv" / "bin" / "replemu"), "run", SEED1, "--protocol", "hw", "--json"],
                            capture_output=True, text=True) if (ROOT / ".venv" / "bin" / "replemu").exists() else None
    module = replemu("run", SEED1, "--protocol", "hw", "--json")
    if script is None:
        pytest.skip("no installed console script next to the project")
    assert script.stdout == module.stdout


BASE = {"name": "bad", "replicas": [1, 2], "steps": [{"elect": {"leader": 1}}, {"produce": {"value": "a"}}]}


def with_step(step, n=3):
    data = {**BASE, "steps": BASE["steps"] + [step]}
    return data, n


@pytest.mark.parametrize(
    "data, needle",
    [
        ({**BASE, "replica": [1]}, "scenario: unknown key 'replica'"),
        ({**BASE, "config": {"acks": "some"}}, "config: 'acks' must be one of all, 1, 0"),
        ({**BASE, "config": {"min_insync_replicas": 3}}, "min_insync_replicas 3 exceeds the 2 replicas"),
        ({**BASE, "name": "Bad Name"}, "must match [a-z0-9._-]+"),
        ({**BASE, "replicas": [1, 1]}, "replica ids must be unique"),
        ({k: v for k, v in BASE.items() if k != "steps"}, "missing required key 'steps'"),
        (with_step({"fetch": {"replica": 3}})[0], "step 3 (fetch): replica 3 is not one of the partition's replicas [1, 2]"),
        (with_step({"fetch": {"replicas": 2}})[0], "step 3 (fetch): unknown key 'replicas'"),
        (with_step({"fetch": {"replica": "2"}})[0], "step 3 (fetch): 'replica' must be a replica id (int), got '2'"),
        (with_step({"fetch": {"replica": 2, "response": "dropped"}})[0], "'response' must be 'delivered' or 'lost'"),
        (with_step({"crash": {"replica": 2, "mode": "hard"}})[0], "step 3 (crash): 'mode' must be 'process' or 'power'"),
        (with_step({"teleport": {"replica": 2}})[0], "step 3: unknown step type 'teleport'"),
        (with_step({"fetch": {"replica": 2}, "crash": {"replica": 1}})[0], "step 3: a step is a mapping with exactly one key"),
        (with_step({"produce": {"value": "a", "values": ["b"]}})[0], "give exactly one of 'value'"),
        (with_step({"produce": {"value": 7}})[0], "'value' must be a string, got 7"),
        (with_step({"elect": {"leader": 1, "isr": [2]}})[0], "isr [2] does not contain the leader 1"),
        (with_step({"elect": {"epoch": -1}})[0], "'epoch' must be a leader epoch (int32, >= 0)"),
        (with_step({"elect": {"unclean": "yes"}})[0], "'unclean' must be a bool"),
        (with_step({"tick": {}})[0], "step 3 (tick): missing required key 'ms'"),
        (with_step({"flush": {"replica": 1, "offset": True}})[0], "'offset' must be an offset (int64, >= 0), got True"),
        ({**BASE, "expect": {"hw": {"violations": ["NoDataLoss"]}}}, "expect.hw: unknown invariant 'NoDataLoss'"),
        ({**BASE, "expect": {"kip999": {}}}, "expect: unknown key 'kip999'"),
    ],
)
def test_invalid_scenario_exits_2_naming_file_step_and_reason(write_yaml, data, needle):
    path = write_yaml(data)
    out = replemu("run", str(path), SEED1, "--protocol", "all", "--json")
    assert out.returncode == 2
    assert out.stdout == ""  # nothing replayed, nothing printed
    assert str(path) in out.stderr and needle in out.stderr, out.stderr


def test_yaml_syntax_error_names_line(write_yaml):
    path = write_yaml("name: x\nreplicas: [1, 2\nsteps: []\n")
    out = replemu("run", str(path))
    assert out.returncode == 2 and f"{path}: invalid YAML: line" in out.stderr


def test_missing_file_and_bad_protocol_exit_2(tmp_path):
    missing = replemu("run", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "nope.yaml: cannot read" in missing.stderr
    bad = replemu("run", SEED1, "--protocol", "kip999")
    assert bad.returncode == 2 and "invalid choice: 'kip999'" in bad.stderr


def test_run_and_help_do_not_load_spark():
    """``replemu run`` and ``--help`` answer without importing pyspark (its import alone costs
    0.1-0.3 s on every command)."""
    import subprocess
    import sys

    code = ("import sys, contextlib, io\nfrom replemu.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['run', 'replemu/scenarios/s1-kip101-scenario-1.yaml', '--json'])\n"
            "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
