"""The Spark engine's expansion tasks (``streaming.explore``): the visited filter in the tasks,
whether it covers every earlier level or only the latest ones, and work directories written
with either packing give the local engine's search, state for state; so does a metadata-quorum
search (the engine runs any family's space)."""

from __future__ import annotations

import pytest

from emulator.config import Config
from emulator.explore import Bounds, Space
from emulator.quorum.explore import QuorumBounds, QuorumSpace
from emulator.quorum.steps import QuorumStepKind
from emulator.quorum.variants import QUORUM_VARIANT_TABLE
from emulator.run import effective_variant
from emulator.search import search_local
from emulator.steps import StepKind
from streaming.explore import search_spark

ALPHABET = (StepKind.ELECT, StepKind.PRODUCE, StepKind.FETCH, StepKind.CRASH, StepKind.RESTART)


def hw_space(depth: int) -> Space:
    cfg = Config()
    return Space((1, 2), cfg, effective_variant("hw", cfg), Bounds(depth=depth, records=1, epochs=2, crashes=1), ALPHABET)


@pytest.fixture(scope="module")
def local():
    return search_local(hw_space(5))


def same(outcome, local) -> None:
    assert outcome.states_per_depth == local.states_per_depth
    assert outcome.transitions == local.transitions
    assert outcome.violations == local.violations


@pytest.mark.parametrize("filter_keys", [10 ** 9, 900, 0], ids=["every-level", "latest-levels", "none"])
def test_visited_filter_in_the_tasks_keeps_the_search(spark, tmp_path, monkeypatch, local, filter_keys):
    from streaming import explore

    monkeypatch.setattr(explore, "FILTER_KEYS", filter_keys)
    chosen = []
    real = explore._filter_levels
    monkeypatch.setattr(explore, "_filter_levels", lambda *a: chosen.append(real(*a)) or chosen[-1])
    same(explore.search_spark(spark, hw_space(5), tmp_path / "work"), local)
    covered = [c for _, c in chosen]
    if filter_keys == 10 ** 9:
        assert all(covered)
    elif filter_keys == 0:
        assert chosen and not any(dirs for dirs, _ in chosen)
    else:  # levels 1 / 12 / 83 / 332 / 782: at depth 5 only the latest fits, the aggregation reads the visited side
        assert covered[0] and not covered[-1] and len(chosen[-1][0]) == 1


def test_levels_packed_at_zlib_level_1_resume(spark, tmp_path, monkeypatch, local):
    """A work directory written before the states were packed at level 0 resumes and agrees."""
    from streaming import explore

    work = tmp_path / "work"
    monkeypatch.setattr(explore, "PACK_LEVEL", 1)
    explore.search_spark(spark, hw_space(3), work)
    monkeypatch.setattr(explore, "PACK_LEVEL", 0)
    seen = []
    same(explore.search_spark(spark, hw_space(5), work, on_level=lambda lv: seen.append(lv.depth)), local)
    assert seen == [3, 4, 5]


def test_the_spark_engine_searches_a_metadata_quorum_as_the_local_engine_does(spark, tmp_path):
    """The Spark engine runs any family's space (its hooks pickled to the executors): a quorum
    search, rule off, to the depth where ElectionSafety and LeaderCompleteness first break, gives
    the local engine's counts, transitions and shortest paths."""
    rule_off = QUORUM_VARIANT_TABLE.named("kraft853", {"reconfig_requires_leader_epoch_commit": False})
    space = QuorumSpace((1, 2, 3, 4), (), rule_off, QuorumBounds(depth=3, epochs=3, appends=0, reconfigs=2),
                        (QuorumStepKind.ELECTION_TIMEOUT, QuorumStepKind.FETCH, QuorumStepKind.REMOVE_VOTER), stable=True,
                        prefix="K14 E3124 K31")
    local = search_local(space)
    assert set(local.violations) == {"ElectionSafety", "LeaderCompleteness"}
    same(search_spark(spark, space, tmp_path / "work"), local)
