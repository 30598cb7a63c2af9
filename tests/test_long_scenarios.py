"""Long scenario files (issue 46, item 3): decoded once and without a node tree, so the memory a
replay needs follows the decoded data; what would not fit is refused at once, naming the limit.
(The 1,000,000-step file is scripts/bench_big_scenario.py's, not a test's.)"""

import tracemalloc

import pytest
import yaml

from conftest import replemu
from emulator.partition_family import PARTITION
from replemu.replay import MAX_TRACED_STEPS
from scenario_io import yaml_files
from scenario_io.yaml_files import MAX_FILE_BYTES, load_any_scenario, parse_yaml_text


def _workload_file(tmp_path, steps: int):
    """The first ``steps`` steps of a generated clean workload, as a user's long file has them."""
    from emulator.workload import first_steps_document
    from scenario_io.profiles import load_profiles

    doc = first_steps_document(3, 0, load_profiles()["clean"], steps)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120))
    return path


def test_a_long_file_is_decoded_once_in_memory_near_its_data(tmp_path, monkeypatch):
    path = _workload_file(tmp_path, 6_000)
    decoded = []
    real = yaml_files.parse_yaml_text
    monkeypatch.setattr(yaml_files, "parse_yaml_text", lambda *a, **k: decoded.append(a[1]) or real(*a, **k))
    tracemalloc.start()
    try:
        scenario = load_any_scenario(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(scenario.steps) == 6_000 and decoded == [str(path)]
    # The guarded loader's node tree (a node and two marks per value) peaked at ~140 bytes per byte
    # of YAML; the decoded data and the steps take ~25.
    assert peak < 50 * path.stat().st_size, f"peak {peak:,} bytes for {path.stat().st_size:,} bytes of YAML"


PLAIN_CASES = [
    "a: 0x1f\nb: 1_000\nc: yes\nd: ~\ne:\nf: 2001-12-14\ng: .inf\nh: '3'\ni: -0o17\nj: 1e3\nk: [1, 2.5, null, true, Off]\n"
    "l: {x: {y: [z]}}\nm: 010\nn: '007'\no: 12345678901234567890\np: 1:30\nq: -0\n",
    "- {replica: 3}\n- produce:\n    values: [v3, v4]\n- elect: {to: []}\n", "x", "", "# only a comment\n",
    "a: 1\na: 2\n", "{1: a, true: b}", "[" * 40 + "]" * 40, "a: 1\n---\nb: 2\n", "? [1]\n: 2\n", "a: !!str 3\n",
    "<<: {a: 1}\n", "a: &x [1]\nb: *x\n", "a: [1, 2\nb: 3\n", "a: 2001-13-45\n", "a: " + "9" * 5000 + "\n",
]


@pytest.mark.parametrize("text", PLAIN_CASES, ids=range(len(PLAIN_CASES)))
def test_the_fast_decoding_gives_the_guarded_loaders_value_or_error(text):
    def outcome(decode):
        try:
            return "value", repr(decode())
        except Exception as exc:  # noqa: BLE001 - the outcome compared is the error's text
            return "error", str(exc)

    def guarded():
        loader = yaml_files.GuardedLoader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
        if data is None:
            raise yaml_files.ScenarioError("x.yaml: the file is empty")
        return data

    fast = outcome(lambda: parse_yaml_text(text, "x.yaml"))
    slow = outcome(guarded)
    if slow[0] == "value":
        assert fast == slow
    else:
        assert fast[0] == "error" and fast[1].startswith("x.yaml: ")


def test_a_file_beyond_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written, and nothing may be read
    out = replemu("run", str(path), "--summary")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"replemu: invalid scenario: {path}: {MAX_FILE_BYTES + 1:,} bytes; a file may have at most "
                                  f"{MAX_FILE_BYTES:,} ({MAX_FILE_BYTES >> 20} MiB: the memory a replay needs grows with it)")


def test_a_document_beyond_the_value_limit_is_refused_naming_it(monkeypatch):
    monkeypatch.setattr(yaml_files, "MAX_VALUES", 50)
    with pytest.raises(yaml_files.ScenarioError, match=r"^x.yaml: invalid YAML: line 11, column 10: more than 50 values \(scalars, lists, maps\) in one file$"):
        parse_yaml_text("steps:\n" + "".join(f"- fetch: {{replica: {i}}}\n" for i in range(40)), "x.yaml")
    # an anchor takes the guarded loader, whose node tree has its own, lower limit
    monkeypatch.setattr(yaml_files, "MAX_GUARDED_NODES", 20)
    with pytest.raises(yaml_files.ScenarioError, match=r"^x.yaml: invalid YAML: line 2, column 47: more than 20 values in a "
                                                       r"file the guarded loader reads \(anchors, aliases"):
        parse_yaml_text("a: &x [1]\nb: [" + ", ".join(["2"] * 30) + "]\n", "x.yaml")


def test_step_by_step_outputs_beyond_their_limits_are_refused_at_once_and_verdicts_are_not(tmp_path):
    steps = MAX_TRACED_STEPS + 1
    path = tmp_path / "long.yaml"
    path.write_text("name: long\nreplicas: [1, 2]\nsteps:\n" + "- elect: {}\n" * steps)
    out = replemu("run", str(path), "--protocol", "kip320", "--json", "--trace")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"replemu: error: {path}: {steps:,} steps; --trace (every step's state with its logs) is "
                                  f"limited to {MAX_TRACED_STEPS:,} steps (--summary and --json (without --trace) replay any length)")
    out = replemu("run", str(path), "--protocol", "kip320", "--summary")
    assert (out.returncode, out.stdout, out.stderr) == (0, "verdict long / kip320: no invariant violated\n", "")
    assert PARTITION.max_table_steps > MAX_TRACED_STEPS  # the table's states carry no logs: it may be longer
