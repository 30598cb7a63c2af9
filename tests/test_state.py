"""A partition saved and restored between any two steps continues exactly as if never stopped."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import BUNDLED
from emulator import VARIANT_NAMES, VARIANTS, Replay
from emulator.result import state_snapshot
from emulator.state import StateVersionError, from_document, to_document
from generators import any_scenario
from scenario_io.yaml_files import load_scenario


def replay_with_restarts(scenario, protocol, cut_every: int):
    r = Replay(scenario.replicas, scenario.config, VARIANTS[protocol])
    outputs = []
    for i, step in enumerate(scenario.steps):
        if cut_every and i % cut_every == 0:
            r = from_document(json.loads(json.dumps(to_document(r))))  # through real JSON text
        before = len(r.checker.losses)
        out = r.apply(step)
        outputs.append((out.errors, out.events, out.violations, r.checker.losses[before:], state_snapshot(r.partition)))
    outputs.append(r.finish())
    return outputs


@pytest.mark.parametrize("protocol", VARIANT_NAMES)
@pytest.mark.parametrize("path", sorted(BUNDLED.glob("*.yaml")), ids=lambda p: p.stem)
def test_restore_after_every_step_changes_nothing(path, protocol):
    s = load_scenario(path)
    assert replay_with_restarts(s, protocol, 1) == replay_with_restarts(s, protocol, 0)


@settings(max_examples=150, deadline=None)
@given(any_scenario(), st.sampled_from(VARIANT_NAMES), st.integers(1, 5))
def test_restore_at_any_cadence_changes_nothing(scenario, protocol, cut_every):
    assert replay_with_restarts(scenario, protocol, cut_every) == replay_with_restarts(scenario, protocol, 0)


def test_other_state_versions_are_refused():
    doc = to_document(Replay((1, 2), load_scenario(BUNDLED / "seed-1-two-round-hw.yaml").config, VARIANTS["hw"]))
    doc["state_version"] = 99
    with pytest.raises(StateVersionError, match="version 99"):
        from_document(doc)
