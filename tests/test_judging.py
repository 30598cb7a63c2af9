"""Incremental judging finds exactly what full judging finds, and the declarations behind it hold.

After a step the checker judges only the invariants whose declared inputs (``Invariant.reads``)
the step can change (``invariants.STEP_CHANGES``, widened by ``EFFECT_CHANGES``).  These tests
replay every corpus the project has under ``Judging.VERIFY`` — which compares the value of every
input before and after each step with what the step declares, and judges every invariant the
incremental pass skipped — and compare the result bytes of incremental and full judging:

* the bundled scenarios and apache/kafka's translated tests (``tests/kafka``), every variant;
* 1,800 generated partitions (600 from each workload profile of ``conf/workloads.yaml``, seed 1);
* Hypothesis over the deep property generator (``tests/generators.py``).

A step kind whose handler changes an input it does not declare fails the verification (the
negative control patches one in).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from conftest import ROOT
from emulator import VARIANT_NAMES
from emulator.checker import Judging, UndeclaredChange
from emulator.partition import HANDLERS
from emulator.result import dumps
from emulator.run import run_scenario
from emulator.scenario import StepRefused, parse_scenario
from emulator.steps import CheckpointHw, StepKind
from emulator.workload import generate_scenario
from generators import deep_scenario, variant_of
from scenario_io.profiles import load_profiles
from scenario_io.yaml_files import load_scenario

FILES = sorted((ROOT / "conf" / "scenarios").glob("*.yaml")) + sorted((ROOT / "tests" / "kafka").glob("*.yaml"))
CORPUS_SEED, PER_PROFILE = 1, 600


def judged_alike(scenario, protocol: str, knobs=None) -> None:
    """VERIFY raises on any undeclared change or skipped violation; incremental and full give the same bytes.
    A scenario with a step the variant's controller never takes (a KRaft election asking for an
    epoch or a leader) is refused under it: nothing to judge."""
    try:
        run_scenario(scenario, protocol, knobs=knobs, judging=Judging.VERIFY)
    except StepRefused:
        return
    incremental = dumps(run_scenario(scenario, protocol, trace=True, knobs=knobs))
    full = dumps(run_scenario(scenario, protocol, trace=True, knobs=knobs, judging=Judging.FULL))
    assert incremental == full


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_bundled_and_kafka_scenarios(path: Path):
    scenario = load_scenario(path)
    if scenario.initial_state:
        pytest.skip("starts from replica directories")
    for protocol in VARIANT_NAMES:
        judged_alike(scenario, protocol)


@pytest.mark.parametrize("profile", ["clean", "hard", "unclean", "kraft"])
def test_generated_corpus(profile: str):
    """600 generated partitions per profile (2,400 in all), every step verified under every variant."""
    spec = load_profiles()[profile]
    for k in range(PER_PROFILE):
        scenario = generate_scenario(CORPUS_SEED, k, spec)
        for protocol in VARIANT_NAMES:
            try:
                run_scenario(scenario, protocol, judging=Judging.VERIFY)
            except UndeclaredChange as e:
                raise AssertionError(f"{profile} partition {k} under {protocol}: {e}") from None


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(deep_scenario(wild=True))
def test_deep_generated_scenarios(scenario):
    for protocol in VARIANT_NAMES:
        judged_alike(scenario, protocol)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                   HealthCheck.large_base_example])
@given(deep_scenario(protocol="kip320"))
def test_deep_scenarios_random_draws(scenario):
    """Draws of their own, apart from the fixed sample above: the same ones on every CI run (the
    ``ci`` profile), new programs each run under ``REPLEMU_HYPOTHESIS=explore`` (docs/testing.md)."""
    variant = variant_of("kip320")
    judged_alike(scenario, variant.name)


SHORT = parse_scenario({
    "name": "undeclared", "replicas": [1, 2],
    "steps": [{"elect": {}}, {"produce": {"values": ["a", "b"]}}, {"fetch": {"replica": 2}}, {"checkpoint_hw": {}}],
})


def test_a_step_that_changes_an_undeclared_input_fails_verification(monkeypatch):
    """Negative control: checkpoint_hw declares it changes no input; a handler that also moves a
    HW (here: above the LEO, breaking HighWatermarkSanity) is caught by VERIFY, while incremental
    judging alone would miss the violation full judging reports."""
    def checkpoint_and_move_hw(p, step: CheckpointHw) -> None:
        for r in p.replicas.values():
            r.hw_checkpoint = r.hw
        p.replicas[2].hw = p.replicas[2].leo + 1

    monkeypatch.setitem(HANDLERS, StepKind.CHECKPOINT_HW, checkpoint_and_move_hw)
    incremental = {v["invariant"] for v in run_scenario(SHORT, "kip320")["violations"]}
    full = {v["invariant"] for v in run_scenario(SHORT, "kip320", judging=Judging.FULL)["violations"]}
    assert "HighWatermarkSanity" in full - incremental
    with pytest.raises(UndeclaredChange, match=r"step 4 \(checkpoint_hw\) changed \['hws'\]"):
        run_scenario(SHORT, "kip320", judging=Judging.VERIFY)
