"""``replemu explore`` of the metadata quorum (emulator/quorum/explore.py, docs/explore.md "The metadata
quorum"): the rule-off search finds the thesis bug and its written file replays with ``--check``; the
rule-on search of a small space ends with no new state and no violation; KIP-996's claim holds under
kraft996 and breaks under kraft853; two runs give the same output; bad flags exit 2; the engine the
partition family's searches run on (``emulator.search``) gives a quorum search the same result with
forked workers and from a work directory, stopped and resumed."""

from __future__ import annotations

import json
import marshal

import pytest

from emulator import search as engine
from emulator.quorum.explore import (
    CODE_OF_KIND,
    STABLE_LEADER,
    QuorumBounds,
    QuorumSpace,
    candidate_codes,
    canonical,
    clone,
    restore,
    root,
    take,
)
from emulator.quorum.steps import QUORUM_STEP_TABLE, QuorumStepKind
from emulator.quorum.variants import KRAFT853, QUORUM_VARIANT_TABLE
from emulator.search import MARSHAL_VERSION, search_local
from replemu.cli import main

RULE_OFF = "reconfig_requires_leader_epoch_commit=false"
# The thesis bug from a stable leader of four voters: 1 removes 4 (only 1 has it), 3 is elected in
# epoch 2 by every voter but 1's vote, and removes 1 with the high watermark it inherited.
THESIS = ["--protocol", "kraft853", "--knob", RULE_OFF, "--voters", "4", "--stable", "--epochs", "3", "--records", "0",
          "--reconfigs", "2", "--steps", "election_timeout,fetch,remove_voter", "--prefix", "K14 E3124 K31"]


def _explore(capsys, tmp_path, *argv: str, out: str = "out") -> dict:
    status = main(["explore", *argv, "--out", str(tmp_path / out), "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out)


def test_every_quorum_step_kind_has_one_code_letter():
    assert set(CODE_OF_KIND) == set(QUORUM_STEP_TABLE)
    assert len(set(CODE_OF_KIND.values())) == len(QUORUM_STEP_TABLE)


def test_rule_off_finds_the_thesis_bug_and_its_file_replays_with_check(capsys, tmp_path):
    result = _explore(capsys, tmp_path, *THESIS, "--until", "LeaderCompleteness")
    found = {v["invariant"]: v for v in result["violations"]}
    assert {"ElectionSafety", "LeaderCompleteness"} <= set(found)
    assert found["LeaderCompleteness"]["depth"] == 3 and found["LeaderCompleteness"]["path"] == "E12 F4 F4"
    assert found["ElectionSafety"]["path"] == "E12 F4 E43"  # two leaders of epoch 3: disjoint majorities
    for name in ("ElectionSafety", "LeaderCompleteness"):
        path = found[name]["scenario_file"]
        assert main(["run", path, "--protocol", "kraft853", "--knob", RULE_OFF, "--check", "--json"]) == 0
        replay = json.loads(capsys.readouterr().out)
        assert name in [v["invariant"] for v in replay["violations"]]
        # the knob is in the file too: it replays without --knob
        assert main(["run", path, "--protocol", "kraft853", "--check", "--json"]) == 0
        capsys.readouterr()


def test_rule_on_small_space_is_exhausted_with_no_violation(capsys, tmp_path):
    """Three voters and a joining observer under the stable leader of epoch 1: every fetch, crash-free
    join and removal (one reconfiguration) searched until no new state remains."""
    result = _explore(capsys, tmp_path, "--protocol", "kraft853", "--voters", "3", "--observers", "1", "--stable",
                      "--epochs", "1", "--records", "0", "--reconfigs", "1")
    assert result["exhausted"] and result["complete"] and result["violations"] == []
    assert result["states_per_depth"][-1] == 0 and result["diameter"] == len(result["states_per_depth"]) - 2
    assert result["distinct_states"] == 327


def test_pre_vote_claim_holds_under_kraft996_and_breaks_under_kraft853(capsys, tmp_path):
    flags = ["--voters", "3", "--returning", "3", "--epochs", "3", "--records", "1", "--reconfigs", "0"]
    held = _explore(capsys, tmp_path, "--protocol", "kraft996", *flags, out="pv996")
    assert held["exhausted"] and held["violations"] == []
    broken = _explore(capsys, tmp_path, "--protocol", "kraft853", *flags, "--until", STABLE_LEADER, out="pv853")
    (v,) = [v for v in broken["violations"] if v["invariant"] == STABLE_LEADER]
    assert v["depth"] == 1 and v["path"] == "E31"
    assert main(["run", v["scenario_file"], "--protocol", "kraft853", "--check", "--json"]) == 0
    final = json.loads(capsys.readouterr().out)["final"]["servers"]["1"]
    assert final["role"] != "leader" and final["epoch"] == 2


def test_two_runs_give_the_same_output(capsys, tmp_path):
    runs = []
    for out in ("one", "two"):
        result = _explore(capsys, tmp_path, *THESIS, "--until", "LeaderCompleteness", out=out)
        result.pop("seconds")
        files = {v["invariant"]: open(v.pop("scenario_file")).read() for v in result["violations"]}
        runs.append((result, files))
    assert runs[0] == runs[1]


def test_canonical_encoding_survives_pack_restore_and_clone():
    space = QuorumSpace((1, 2, 3), (4,), KRAFT853, QuorumBounds(reconfigs=1, appends=1))
    node, _steps, broken = root(space)
    assert broken == []
    seen = 0
    for code in candidate_codes(space, node):
        child = clone(space, node)
        try:
            take(space, child, code)
        except Exception:  # refused actions are no edges
            continue
        t = canonical(child)
        assert canonical(restore(space, marshal.loads(marshal.dumps(t, MARSHAL_VERSION)))) == t
        assert marshal.dumps(canonical(clone(space, child)), MARSHAL_VERSION) == marshal.dumps(t, MARSHAL_VERSION)
        seen += 1
    assert seen


@pytest.mark.parametrize("argv, message", [
    (["--protocol", "kraft853", "--replicas", "3"], "--replicas is for partition protocols"),
    (["--protocol", "kraft853", "--steps", "produce"], "unknown quorum step kind"),
    (["--protocol", "kraft853", "--returning", "1"], "must not be the leader"),
    (["--protocol", "kraft853", "--prefix", "Z9"], "--prefix"),
    (["--protocol", "kraft853", "--until", "StrongIsr"], "unknown property"),
    (["--protocol", "hw", "--voters", "3", "--depth", "1"], "--voters is for the metadata-quorum protocols"),
    (["--protocol", "kraft853", "--knob", "pre_vote=maybe"], "pre_vote"),
])
def test_bad_flags_exit_2_with_a_message(capsys, tmp_path, argv, message):
    status = main(["explore", *argv, "--out", str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert status == 2 and message in err and "Traceback" not in err


def test_quorum_variants_route_to_the_quorum_search():
    space = QuorumSpace((1, 2, 3), (), QUORUM_VARIANT_TABLE.named("kraft996"), QuorumBounds(epochs=1, appends=0, reconfigs=0))
    outcome = search_local(space)
    assert outcome.exhausted and not outcome.violations
    assert QuorumStepKind.RESIGN not in space.alphabet


def test_the_engine_gives_a_quorum_search_the_same_result_with_workers_and_after_a_stop(tmp_path, monkeypatch):
    """The one engine (``emulator.search``) on a quorum space, as on a partition's: levels expanded
    by forked workers, and a search stopped in the middle of a level then resumed from its work
    directory, give the one-process search's counts, transitions and shortest paths."""
    rule_off = QUORUM_VARIANT_TABLE.named("kraft853", {"reconfig_requires_leader_epoch_commit": False})
    space = QuorumSpace((1, 2, 3, 4), (), rule_off, QuorumBounds(depth=3, epochs=3, appends=0, reconfigs=2),
                        (QuorumStepKind.ELECTION_TIMEOUT, QuorumStepKind.FETCH, QuorumStepKind.REMOVE_VOTER), stable=True,
                        prefix="K14 E3124 K31")  # THESIS's space, to the depth of its two violations
    whole = search_local(space)
    assert whole.violations == {"ElectionSafety": (3, "E12 F4 E43"), "LeaderCompleteness": (3, "E12 F4 F4")}
    monkeypatch.setattr(engine, "PARALLEL_FROM", 1)
    two = search_local(space, workers=2)
    assert (two.states_per_depth, two.transitions, two.violations) == (whole.states_per_depth, whole.transitions,
                                                                        whole.violations)

    def interrupt(distinct: int) -> None:
        if distinct >= whole.distinct_states // 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        search_local(space, should_stop=interrupt, work=tmp_path)
    resumed = search_local(space, work=tmp_path)
    assert (resumed.states_per_depth, resumed.transitions, resumed.violations) == (whole.states_per_depth,
                                                                                  whole.transitions, whole.violations)
