"""The bundled scenarios by name (replemu/bundled.py): ``replemu.run("s1-kip101-scenario-1")``
and ``replemu run s1-kip101-scenario-1`` from any directory, ``replemu scenarios`` and
``replemu.bundled_scenarios()`` to list them, a clear error for an argument that is neither a
file nor a name, a file of the same name winning, and a wheel that carries every bundled file."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

import replemu
from conftest import ROOT
from conftest import replemu as cli
from emulator.quorum.run import QuorumScenario

PACKAGE_DIR = ROOT / "replemu" / "scenarios"
MINE = "name: mine\nreplicas: [1]\nsteps:\n  - elect: {leader: 1}\n  - produce: {value: x}\n"


def _files() -> dict[str, Path]:
    """The bundled files as the source tree has them: name -> file."""
    found = {p.stem: p for p in PACKAGE_DIR.rglob("*.yaml")}
    assert len(found) == len(list(PACKAGE_DIR.rglob("*.yaml"))), "two bundled files share a name"
    return found


def test_every_bundled_file_is_listed_once_with_its_family_and_description():
    listed = replemu.bundled_scenarios()
    assert sorted(s["name"] for s in listed) == sorted(_files()) and len(listed) >= 8
    for entry in listed:
        scenario = replemu.load_scenario(entry["name"])
        assert scenario.name == entry["name"], "a bundled file's name is the name its YAML gives"
        assert entry["family"] == ("quorum" if isinstance(scenario, QuorumScenario) else "partition")
        assert Path(entry["path"]).read_bytes() == _files()[entry["name"]].read_bytes()
        assert entry["description"] and "\n" not in entry["description"]
    assert {s["family"] for s in listed} == {"partition", "quorum"}


def test_the_api_runs_a_bundled_scenario_by_name_as_by_its_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of the source tree reachable by a relative path
    by_file = replemu.run(_files()["s1-kip101-scenario-1"], "hw")
    assert replemu.run("s1-kip101-scenario-1", "hw") == by_file
    assert replemu.run("s1-kip101-scenario-1.yaml", "hw") == by_file
    assert replemu.run(Path("s1-kip101-scenario-1"), "hw") == by_file
    assert "NoCommittedDataLoss" in {v["invariant"] for v in by_file["violations"]}
    quorum = replemu.run("thesis-membership-change", "kraft853", knobs={"reconfig_requires_leader_epoch_commit": False})
    assert [v["invariant"] for v in quorum["violations"]] == ["LeaderCompleteness"]


def test_a_file_in_the_current_directory_wins_over_the_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s1-kip101-scenario-1").write_text(MINE)
    assert replemu.run("s1-kip101-scenario-1", "hw")["scenario"] == "mine"
    assert replemu.run("s1-kip101-scenario-1.yaml", "hw")["scenario"] == "s1-kip101-scenario-1"  # no such file here
    out = cli("run", "s1-kip101-scenario-1", "--protocol", "hw", "--json", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["scenario"] == "mine"


@pytest.mark.parametrize("argument, suggested", [
    ("s1-kip101", "s1-kip101-scenario-1"),
    ("seed-1-two-round", "seed-1-two-round-hw"),
    ("thesis-membership-chnage", "thesis-membership-change"),
])
def test_an_unknown_name_raises_naming_it_and_the_closest_names(argument, suggested):
    with pytest.raises(replemu.ScenarioError) as raised:
        replemu.run(argument, "hw")
    message = str(raised.value)
    assert message.startswith(f"{argument}: neither a scenario file nor a bundled scenario's name")
    assert f"did you mean {suggested}" in message and "replemu.bundled_scenarios()" in message


def test_the_cli_takes_names_in_every_command_that_takes_scenario_files(tmp_path):
    by_name = cli("run", "s1-kip101-scenario-1", "seed-1-two-round-hw", "--protocol", "hw", "--json", cwd=tmp_path)
    by_file = cli("run", *(str(_files()[n]) for n in ("s1-kip101-scenario-1", "seed-1-two-round-hw")),
                  "--protocol", "hw", "--json", cwd=tmp_path)
    assert by_name.returncode == 0 and by_name.stderr == ""
    assert by_name.stdout == by_file.stdout and len(json.loads(by_name.stdout)) == 2

    compiled = cli("compile", "s1-kip101-scenario-1", "seed-1-two-round-hw.yaml", "--out", "events", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    rows = [json.loads(line) for f in (tmp_path / "events").iterdir() for line in f.read_text().splitlines()]
    assert {r["topic"] for r in rows} == {"s1-kip101-scenario-1", "seed-1-two-round-hw"}

    shrunk = cli("shrink", "s1-kip101-scenario-1", "--protocol", "hw", "--invariant", "NoCommittedDataLoss", cwd=tmp_path)
    assert shrunk.returncode == 0, shrunk.stderr
    written = tmp_path / "s1-kip101-scenario-1-shrunk.yaml"  # here, not in the installed package's directory
    assert written.is_file() and "wrote s1-kip101-scenario-1-shrunk.yaml" in shrunk.stdout
    assert not list(PACKAGE_DIR.rglob("*-shrunk.yaml"))
    again = cli("run", written.name, "--protocol", "hw", "--check", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("command", [["run"], ["compile", "--out", "events"], ["shrink", "--protocol", "hw",
                                                                             "--invariant", "NoCommittedDataLoss"]])
def test_the_cli_refuses_an_unknown_name_with_exit_2_and_a_suggestion(tmp_path, command):
    out = cli(command[0], "s1-kip101-scenario", *command[1:], cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()  # one line, no traceback
    assert line.startswith("replemu: error: s1-kip101-scenario: neither a scenario file nor a bundled scenario's name; "
                           "did you mean s1-kip101-scenario-1")
    assert line.endswith("(`replemu scenarios` lists them)")
    assert not (tmp_path / "events").exists()


def test_a_missing_repository_path_points_at_the_name(tmp_path):
    """docs/api.md's old examples named a path inside the source tree: from elsewhere it says what to give."""
    out = cli("run", "replemu/scenarios/s1-kip101-scenario-1.yaml", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr == ("replemu: error: replemu/scenarios/s1-kip101-scenario-1.yaml: cannot read: no such file or "
                          "directory; the bundled scenario of that name is given by its name alone: s1-kip101-scenario-1 "
                          "(`replemu scenarios` lists them)\n")


def test_replemu_scenarios_lists_name_family_and_one_line(tmp_path):
    out = cli("scenarios", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "FAMILY", "DESCRIPTION"]
    for entry in replemu.bundled_scenarios():
        row = next(line for line in lines if line.split()[:1] == [entry["name"]])
        assert row.split()[1] == entry["family"]
        first_sentence = entry["description"].split(". ")[0]
        assert first_sentence.rstrip(".") in row
    as_json = cli("scenarios", "--json", cwd=tmp_path)
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == replemu.bundled_scenarios()
    for command in ("run", "compile", "shrink"):
        helped = cli(command, "--help")
        assert "(or a bundled scenario's name, e.g. s1-kip101-scenario-1" in " ".join(helped.stdout.split()), command


def test_the_wheel_carries_every_bundled_file():
    """pyproject.toml's package-data globs match every tracked data file of every package (the
    bundled scenarios of each family among them): a file they miss is not in the wheel, and its
    name would work from the source tree only."""
    try:
        tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]
    missed = []
    for name in tracked.split("\0"):
        parts = Path(name).parts
        if not name or parts[0] not in setuptools["packages"] or name.endswith(".py") or len(parts) < 2:
            continue
        shipped = {p for pattern in globs.get(parts[0], []) for p in (ROOT / parts[0]).glob(pattern)}
        if ROOT / name not in shipped:
            missed.append(name)
    assert not missed, f"files no package-data glob of pyproject.toml ships: {missed}"
