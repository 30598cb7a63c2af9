"""The leader-epoch cache against protocol.md §A.10 (LeaderEpochFileCacheTest, HEAD)."""

import pytest

from emulator.epoch_cache import LeaderEpochCache


def cache(entries, semantics="v2"):
    return LeaderEpochCache(semantics, entries)


@pytest.mark.parametrize(
    "entries, leo, requested, version, expected",
    [
        ([(0, 10), (2, 13), (4, 17)], 20, 1, "v2", (0, 13)),
        ([(0, 10), (2, 13), (4, 17)], 20, 1, "v1", (0, 13)),
        ([(0, 10), (2, 13), (4, 17)], 20, 1, "v0", (-1, 13)),
        ([(0, 10), (2, 13), (4, 17)], 20, 2, "v2", (2, 17)),
        ([(0, 10), (2, 13), (4, 17)], 20, 2, "v1", (2, 17)),
        ([(0, 10), (2, 13), (4, 17)], 20, 3, "v2", (2, 17)),
        ([(0, 10), (2, 13), (4, 17)], 20, 3, "v1", (2, 17)),
        ([(5, 11), (6, 12), (7, 13)], 20, 4, "v2", (4, 11)),
        ([(5, 11), (6, 12), (7, 13)], 20, 4, "v1", (-1, -1)),
        ([(5, 11), (6, 12), (7, 13)], 20, 4, "v0", (-1, -1)),
        ([(2, 100)], 120, 3, "v2", (-1, -1)),
        ([(2, 100)], 120, 3, "v1", (-1, -1)),
        ([], 0, 7, "v2", (-1, -1)),
        ([], 0, 7, "v1", (-1, -1)),
        ([(2, 6)], 7, 2, "v2", (2, 7)),
        ([(2, 6)], 7, 2, "v0", (-1, 7)),
    ],
)
def test_end_offset_for(entries, leo, requested, version, expected):
    """endOffsetFor answers the largest epoch <= requested and that epoch's end offset."""
    assert cache(entries).end_offset_for(requested, leo, version) == expected


def test_v0_empty_cache_undefined_epoch_answers_leo():
    """The 0.11 hole KIP-279 closed: an empty leader cache answers epoch -1 with its LEO."""
    assert cache([], "v0").end_offset_for(-1, 5, "v0") == (-1, 5)
    assert cache([], "v0").end_offset_for(-1, 5, "v1") == (-1, -1)


@pytest.mark.parametrize(
    "assigns, expected",
    [
        ([(2, 9), (3, 9)], [(3, 9)]),
        ([(2, 6), (3, 5)], [(3, 5)]),
        ([(1, 5), (2, 6), (1, 7)], [(1, 7)]),
        ([(2, 6), (2, 10)], [(2, 6)]),
    ],
)
def test_v2_assign_enforces_monotonicity(assigns, expected):
    """v2 assign removes conflicting entries; an epoch's start never moves forward."""
    c = cache([], "v2")
    for e, s in assigns:
        c.assign(e, s)
    assert [(x.epoch, x.start_offset) for x in c.entries] == expected


def test_v2_assign_then_lookup_of_removed_epoch():
    c = cache([], "v2")
    for e, s in [(1, 5), (2, 6), (1, 7)]:
        c.assign(e, s)
    assert c.end_offset_for(2, 9, "v2") == (-1, -1)


def test_v0_assign_ignores_out_of_order_epochs():
    """0.11 – 2.0: a lower epoch, or a start below the latest, is ignored."""
    c = cache([], "v0")
    for e, s in [(2, 6), (1, 7), (3, 5), (2, 10), (4, 11)]:
        c.assign(e, s)
    assert c.as_pairs() == [[2, 6], [4, 11]]


@pytest.mark.parametrize(
    "op, offset, expected",
    [
        ("truncate_from_end", 8, [(2, 6)]),
        ("truncate_from_end", 9, [(2, 6), (3, 8)]),
        ("truncate_from_start", 8, [(3, 8), (4, 11)]),
        ("truncate_from_start", 9, [(3, 9), (4, 11)]),
    ],
)
@pytest.mark.parametrize("semantics", ["v0", "v2"])
def test_truncation(op, offset, expected, semantics):
    c = cache([(2, 6), (3, 8), (4, 11)], semantics)
    getattr(c, op)(offset)
    assert [(x.epoch, x.start_offset) for x in c.entries] == expected


# -- the ordered fast paths answer exactly as full scans --------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OPS = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 40)),
    st.tuples(st.just("truncate_from_end"), st.integers(0, 45)),
    st.tuples(st.just("truncate_from_start"), st.integers(0, 45)),
    st.tuples(st.just("drop_cold_entries"), st.integers(0, 45), st.integers(0, 14)),
    st.tuples(st.just("end_offset_for"), st.integers(-1, 14), st.integers(0, 45), st.sampled_from(["v0", "v1", "v2"])),
), max_size=60)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["v0", "v2"]), _OPS)
def test_ordered_caches_answer_every_operation_as_a_full_scan_does(semantics, ops):
    """A cache written only through its write path stays ordered and is served from its end and
    by bisection; the same operations on a copy forced onto the full-scan paths (as a cache read
    from an unordered file is) give the same entries and answers at every step."""
    fast, scan = LeaderEpochCache(semantics), LeaderEpochCache(semantics)
    scan._ordered = False
    for name, *args in ops:
        assert getattr(fast, name)(*args) == getattr(scan, name)(*args), (name, args)
        assert fast.as_pairs() == scan.as_pairs()
    assert fast._ordered


def test_an_unordered_cache_read_from_a_file_is_served_by_full_scans():
    c = cache([(5, 20), (3, 10), (7, 30)])
    assert not c._ordered
    assert c.end_offset_for(4, 40, "v2") == (3, 20)  # the scan's answer: floor (3, 10), first higher (5, 20)
