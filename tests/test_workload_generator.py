"""The resumable workload generator (``emulator.workload.WorkloadGenerator``): the streaming job
keeps one per partition in the partition's state, so it must hand out exactly the sequence
``step_bursts`` always gave (campaigns and earlier streams), however often it is cut into bytes
and resumed."""

import hashlib
import json
import random
from dataclasses import replace

import pytest

from emulator.workload import (
    GENERATOR_LAYOUT,
    Draws,
    WorkloadGenerator,
    generate_partition,
    partition_header,
    splitmix64,
    step_bursts,
    stream_key,
)
from scenario_io.profiles import load_profiles
from streaming.state_codec import pack_generator, unpack_generator

PROFILES = load_profiles()

# sha256 (first 16 hex digits) of the first 3,000 steps of step_bursts(seed, k, profile), as
# JSON with sorted keys: any change to the sequence shows here.  Generator 2 (counter-based draws,
# GENERATOR_VERSION) draws other numbers than generator 1's Mersenne Twisters, so every workload
# changed with it; these digests were computed with generator 2 when it was written, and the
# draws beneath them are pinned to SplitMix64's published outputs (test_draws_are_splitmix64).
GOLDEN = {
    "clean/1/0": "5588bc3e49446609", "clean/7/3": "fa8e8af285ac73c8", "clean/2026/11": "bf26c73f5710bdf8",
    "hard/1/0": "9fec5c67a02b0a05", "hard/7/3": "c448dbbd0443b875", "hard/2026/11": "5682dc30524adc7e",
    "unclean/1/0": "2b6d932dc17ee986", "unclean/7/3": "203d9afccefe48a5", "unclean/2026/11": "206ef2a5392b5798",
    "kraft/1/0": "5b006fa5ee0d2f96", "kraft/7/3": "a2b8e06cb89be059", "kraft/2026/11": "a9cecc47923c42c5",
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
        data = pack_generator(g)
        g = unpack_generator(data)
        assert pack_generator(g) == data  # the bytes say everything the generator holds
        assert g.next_seq == last + 1
        first = last + 1
    assert got == expected


def test_the_bytes_are_small_and_of_a_named_layout():
    g = WorkloadGenerator(1, 0, PROFILES["hard"])
    g.steps(1, 2000)
    data = pack_generator(g)
    assert data.startswith(GENERATOR_LAYOUT.encode())
    # no random state (generator 1 kept 7.5 KB of Mersenne Twister words): counters, the steps
    # not handed out and the shadow partition compacted to a window of its log
    assert len(data) < 2_000
    with pytest.raises(ValueError, match="layout"):
        unpack_generator(b"not a generator")


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


def test_draws_are_splitmix64():
    """Draw i of the burst that starts at step n is SplitMix64's output number n * 2^20 + i of
    the stream keyed by its name: the reference outputs of Vigna's splitmix64.c for seed 1234567."""
    assert [splitmix64(1234567, i) for i in range(5)] == [
        6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821]
    key = stream_key(1, 0, "faults")
    d = Draws(key, 7)
    assert [d.next64() for _ in range(3)] == [splitmix64(key, (7 << 20) + i) for i in range(3)]
    assert Draws(key, 7).random() == Draws(key, 7).random()  # a function of where it is drawn, not of a state
    assert stream_key(1, 0, "faults") != stream_key(1, 0, "workload") != stream_key(1, 1, "workload")


def test_draws_are_uniform_enough_for_the_rates_of_a_profile():
    """A profile's rates are probabilities: over many bursts, a draw lands under a rate that often."""
    draws = [Draws(stream_key(3, 9, "workload"), step) for step in range(20_000)]
    below = sum(d.random() < 0.3 for d in draws)
    assert 0.28 < below / len(draws) < 0.32
    faces = [Draws(stream_key(3, 9, "scheduling"), step).randint(1, 3) for step in range(9_000)]
    assert set(faces) == {1, 2, 3} and all(2_700 < faces.count(f) < 3_300 for f in (1, 2, 3))


def test_a_workload_stream_names_its_generator_in_its_identity():
    """A checkpoint of another generator's workload would continue other steps: the generator's
    version is part of the run's identity (and of run.json, which records the workload options)."""
    from emulator.workload import GENERATOR_VERSION
    from streaming.checkpoint import identity_differences, run_identity
    from streaming.workload_source import WorkloadSpec

    options = WorkloadSpec.of(PROFILES["clean"], 1, 10, 20, 40)
    assert options.generator == GENERATOR_VERSION

    def identity(workload):
        return run_identity(protocol="kip320", knobs=None, input_dir=None, workload=workload, shuffle_partitions=2,
                            state_store=None, compact_min_records=None, gap_timeout_ms=None)

    assert identity(options)["workload"]["generator"] == GENERATOR_VERSION
    assert identity_differences(identity(replace(options, generator=1)), identity(options)) == ["workload"]


def test_the_opt_in_reassignment_profile_moves_replicas_and_resumes_from_bytes():
    """kraft-reassign (issue 49): the only profile that draws reassign steps (the others' sequences
    are the GOLDEN ones above); its partitions have a spare broker, its shadow follows the moves,
    and a generator cut anywhere resumes the same sequence."""
    from emulator import run_scenario
    from emulator.scenario import parse_scenario

    profile = PROFILES["kraft-reassign"]
    assert all(not p.reassign for name, p in PROFILES.items() if name != "kraft-reassign")
    header = partition_header(5, 2, profile)
    assert header["brokers"] == header["replicas"] + [len(header["replicas"]) + 1]
    expected = _bursts(5, 2, profile, 600)
    kinds = [next(iter(s)) for s in expected]
    assert kinds.count("reassign") >= 5
    assert any(s.get("reassign", {}).get("cancel") for s in expected)
    g, got, first, cuts = WorkloadGenerator(5, 2, profile), [], 1, random.Random(7)
    while first <= 600:
        last = min(600, first + cuts.randint(0, 36))
        got.extend(g.steps(first, last))
        g = unpack_generator(pack_generator(g))
        first = last + 1
    assert got == expected
    moved = set()
    for k in range(6):
        sc = parse_scenario(generate_partition(3, k, profile), "generated")
        for protocol in ("kip903", "kip966"):
            result = run_scenario(sc, protocol)  # no refused step
            moved.add(result["final"]["controller"].get("replicas") is not None)
    assert True in moved
