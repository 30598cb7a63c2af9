"""The bundled scenarios of protocol.md §B replay to the outcomes their tables state."""

import json

import pytest

from conftest import BUNDLED, log_of, replemu, violated
from emulator import VARIANT_NAMES, run_scenario
from emulator.report import check_expectation
from scenario_io.yaml_files import load_scenario

FILES = sorted(BUNDLED.glob("*.yaml"))
NAMES = {
    "s0-basic-epoch-workflow", "s1-kip101-scenario-1", "s2-kip101-scenario-2",
    "s3-kip279-fast-failover-clean", "s4-kip279-unclean-elections", "seed-1-two-round-hw",
    "seed-2-divergence-lagging-replica-first",
}


def test_every_public_scenario_is_bundled_with_expectations_for_every_variant():
    scenarios = [load_scenario(f) for f in FILES]
    assert {s.name for s in scenarios} >= NAMES
    for s in scenarios:
        assert set(s.expect) == set(VARIANT_NAMES), s.name


@pytest.mark.parametrize("protocol", VARIANT_NAMES)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_bundled_scenario_matches_its_expect_block(path, protocol):
    """Final logs, HWs, caches, losses and verdict invariants as protocol.md §B states them."""
    s = load_scenario(path)
    result = run_scenario(s, protocol)
    assert check_expectation(result, s.expect[protocol]) == []


S1 = BUNDLED / "s1-kip101-scenario-1.yaml"


def test_s1_hw_loses_acked_m2_and_diverges():
    result = run_scenario(load_scenario(S1), "hw")
    assert {"NoCommittedDataLoss", "StrongIsr", "EventualConvergence", "NoAckedDataLoss"} <= violated(result)
    assert log_of(result, 1) == [(0, 0, "m1"), (1, 1, "m3")]
    assert log_of(result, 2) == [(0, 0, "m1"), (1, 0, "m2")]
    # The committed record is lost when A truncates at its restart (step 12), before B fails.
    strong = next(v for v in result["violations"] if v["invariant"] == "StrongIsr")
    assert strong["step"] == 12
    assert result["losses"] == [{"offset": 1, "value": "m2", "acked": True, "allowed": False, "step": 14}]


@pytest.mark.parametrize("protocol", ["kip101", "kip279", "kip320"])
def test_s1_epoch_variants_are_clean(protocol):
    result = run_scenario(load_scenario(S1), protocol)
    assert result["violations"] == [] and result["losses"] == []
    assert log_of(result, 1) == log_of(result, 2) == [(0, 0, "m1"), (1, 0, "m2"), (2, 1, "m3")]


def test_s1_protocol_all_matrix_shows_hw_column():
    """`replemu run S1 --protocol all` ends with the scenario x variant matrix."""
    out = replemu("run", str(S1), "--protocol", "all")
    assert out.returncode == 0, out.stderr
    matrix = out.stdout[out.stdout.rindex("scenario "):]
    header, _, *rows = matrix.splitlines()
    assert header.split() == ["scenario", "hw", "kip101", "kip279", "kip320", "kip903", "kip966"]
    assert rows[0].split() == ["s1-kip101-scenario-1", "NoCommittedDataLoss", "ok", "ok", "ok", "ok", "ok"]
    hw_column = [r.split()[0] for r in rows[1:]]
    assert "StrongIsr" in hw_column and "EventualConvergence" in hw_column


SEED1_TABLE = [
    # leader LEO, leader remote LEO[2], leader HW, follower LEO, follower HW  (protocol.md SEED-1)
    (0, -1, 0, 0, 0),
    (1, -1, 0, 0, 0),
    (1, 0, 0, 1, 0),
    (1, 1, 1, 1, 1),
]


@pytest.mark.parametrize("protocol", VARIANT_NAMES)
def test_seed1_step_table_row_by_row_through_trace(protocol):
    out = replemu("run", str(BUNDLED / "seed-1-two-round-hw.yaml"), "--protocol", protocol, "--json", "--trace")
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)["trace"]
    rows = [
        (t["replicas"]["1"]["leo"], t["replicas"]["1"]["remote_leo"]["2"], t["replicas"]["1"]["hw"],
         t["replicas"]["2"]["leo"], t["replicas"]["2"]["hw"])
        for t in trace
    ]
    assert rows == SEED1_TABLE


@pytest.mark.parametrize(
    "protocol, leader_cache_after_bounce_of_2, leader_cache_after_bounce_of_1",
    [
        # S0 rows 2 and 4: before 2.1 an epoch gets its entry on the first append; from 2.1 at election.
        ("kip101", [[0, 0]], [[0, 0], [1, 1]]),
        ("kip279", [[0, 0]], [[0, 0], [1, 1]]),
        ("kip320", [[0, 0], [1, 1]], [[0, 0], [1, 1], [2, 2]]),
    ],
)
def test_s0_cache_entries_appear_on_append_before_2_1_and_at_election_after(
    protocol, leader_cache_after_bounce_of_2, leader_cache_after_bounce_of_1
):
    result = run_scenario(load_scenario(BUNDLED / "s0-basic-epoch-workflow.yaml"), protocol, trace=True)
    after_bounce_of_2 = result["trace"][8]  # step 9: fetch(2) after LAI(2)
    assert after_bounce_of_2["replicas"]["1"]["epoch_cache"] == leader_cache_after_bounce_of_2
    assert after_bounce_of_2["replicas"]["2"]["epoch_cache"] == [[0, 0]]
    after_bounce_of_1 = result["trace"][15]  # step 16: LAI(1), new leader 2
    assert after_bounce_of_1["replicas"]["2"]["epoch_cache"] == leader_cache_after_bounce_of_1
    assert after_bounce_of_1["replicas"]["1"]["epoch_cache"] == [[0, 0], [1, 1]]


def test_s3_kip101_answer_lies_above_the_divergence_point():
    """S3 step 7: KIP-101 answers 'start of epoch 2' = 2 >= B's LEO, so B keeps m2."""
    s = load_scenario(BUNDLED / "s3-kip279-fast-failover-clean.yaml")
    after_lai = {p: run_scenario(s, p, trace=True)["trace"][9]["replicas"]["2"]["log"] for p in VARIANT_NAMES}
    assert after_lai["kip101"] == [[0, 0, "m0"], [1, 1, "m2"]]
    for p in ("hw", "kip279", "kip320"):
        assert after_lai[p] == [[0, 0, "m0"]], p


def test_s4_kip279_truncation_iterates_two_rounds():
    """S4 step 7: round 1 truncates B to 2 (epochs differ), round 2 to 1."""
    s = load_scenario(BUNDLED / "s4-kip279-unclean-elections.yaml")
    trace = run_scenario(s, "kip279", trace=True)["trace"]
    truncations = [e for e in trace[23]["outcome"]["events"] if e["event"] == "Truncation"]
    assert [(e["from_leo"], e["to"]) for e in truncations] == [(3, 2), (2, 1)]
