"""The resumable workload generator (``emulator.workload.WorkloadGenerator``): the streaming job
keeps one per partition in the partition's state, so it must hand out exactly the sequence
``step_bursts`` always gave (campaigns and earlier streams), however often it is cut into bytes
and resumed."""

import hashlib
import json
import random

import pytest

from emulator.workload import (
    GENERATOR_LAYOUT,
    WorkloadGenerator,
    generate_partition,
    partition_header,
    step_bursts,
)
from scenario_io.profiles import load_profiles

PROFILES = load_profiles()

# sha256 (first 16 hex digits) of the first 3,000 steps of step_bursts(seed, k, profile), as
# JSON with sorted keys, computed with the generator of commit 857ebf1 (a closure, before the
# resumable object): any change to the sequence shows here.
GOLDEN = {
    "clean/1/0": "8431b0abb88a0a2c", "clean/7/3": "23b52875a71916e3", "clean/2026/11": "7608390700d02811",
    "hard/1/0": "fe92f38bfd06b0fe", "hard/7/3": "a6fc0d1e40dede90", "hard/2026/11": "7cf035947ef72935",
    "unclean/1/0": "07f1e6a3832d338b", "unclean/7/3": "13db2272c3b87ecf", "unclean/2026/11": "4ffea4848b143e94",
    "kraft/1/0": "0f11cc6889b82739", "kraft/7/3": "fed35d50f8714173", "kraft/2026/11": "bbbed589ad914f7e",
}
STEPS = 3000


def _bursts(seed, k, profile, n):
    gen, steps = step_bursts(seed, k, profile), []
    while len(steps) < n:
        steps.extend(next(gen))
    return steps[:n]


def _digest(steps) -> str:
    return hashlib.sha256(json.dumps(steps, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_the_sequence_is_the_one_earlier_versions_generated_and_resumes_from_bytes_at_any_cut(key):
    name, seed, k = key.split("/")
    profile, seed, k = PROFILES[name], int(seed), int(k)
    expected = _bursts(seed, k, profile, STEPS)
    assert _digest(expected) == GOLDEN[key]
    cuts = random.Random(key)
    g, got, first = WorkloadGenerator(seed, k, profile), [], 1
    assert g.header == partition_header(seed, k, profile)
    while first <= STEPS:
        last = min(STEPS, first + cuts.randint(0, 36))  # 1..37 steps a call: cuts inside bursts too
        got.extend(g.steps(first, last))
        data = g.to_bytes()
        g = WorkloadGenerator.from_bytes(data)
        assert g.to_bytes() == data  # the bytes say everything the generator holds
        assert g.next_seq == last + 1
        first = last + 1
    assert got == expected


def test_the_bytes_are_small_and_of_a_named_layout():
    g = WorkloadGenerator(1, 0, PROFILES["hard"])
    g.steps(1, 2000)
    data = g.to_bytes()
    assert data.startswith(GENERATOR_LAYOUT.encode())
    assert len(data) < 12_000  # three Mersenne Twister states (7.5 KB) and a compacted shadow partition
    with pytest.raises(ValueError, match="layout"):
        WorkloadGenerator.from_bytes(b"not a generator")


def test_steps_skip_forward_but_never_hand_out_a_step_twice():
    profile = PROFILES["clean"]
    expected = _bursts(3, 5, profile, 60)
    g = WorkloadGenerator(3, 5, profile)
    assert g.steps(1, 10) == expected[:10]
    assert g.steps(21, 30) == expected[20:30]  # 11..20 generated and dropped
    assert g.steps(31, 30) == []
    with pytest.raises(ValueError, match="already|asked"):
        g.steps(25, 40)


def test_campaign_partitions_are_unchanged():
    doc = generate_partition(1, 4, PROFILES["unclean"])
    g = WorkloadGenerator(1, 4, PROFILES["unclean"])
    steps = g.steps(1, len(doc["steps"]))
    assert steps == doc["steps"]
