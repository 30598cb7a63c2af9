"""The reductions of a partition search (``replemu explore --reduce``, docs/explore.md
"Reductions"); each keeps every verdict.

* ``symmetry``: under ZooKeeper, states that differ by a renaming of the replicas are one state:
  the visited set holds one key per class (``symmetric_form``), while the frontier keeps real
  states, so every path is real;
* ``sleep``: sleep sets (Godefroid) over steps that commute (``independent``): only transitions
  are saved, every state is still reached at its depth by its smallest path.

``tests/test_explore_reduce.py`` checks the facts they rest on, state by state.
"""

from __future__ import annotations

import itertools
import marshal
from dataclasses import dataclass
from typing import Any

from ._build import rebuilt
from .run import Replay
from .search import MARSHAL_VERSION, ExploreError, digest

REDUCTIONS: tuple[str, ...] = ("sleep", "symmetry")  # the names ``--reduce`` takes (``none``, ``all``: none or both)


@dataclass(frozen=True, slots=True)
class Reduction:
    """The reductions a search applies; each keeps every verdict (docs/explore.md "Reductions").

    ``sleep``: sleep sets (Godefroid) over steps that commute (``independent``): a step is not
    taken from a state when the same successor is reached at the same depth by the two steps in
    the other order.  Every state is still reached at its depth, by its smallest path: only
    transitions are saved.  ``symmetry``: states that differ by a renaming of the replicas are
    one state (ZooKeeper variants: the search's controller may elect any ISR member, so no rule
    reads the assignment order; under KRaft the controller elects in assignment order and no
    renaming is sound).  Counts are then of classes of states; violations and their paths are
    the same.
    """

    sleep: bool = False
    symmetry: bool = False

    @classmethod
    def parse(cls, text: str) -> "Reduction":
        """``none``, ``all`` or a comma list of ``REDUCTIONS`` (ExploreError names a wrong one)."""
        names = [t.strip() for t in text.split(",") if t.strip()]
        if names == ["none"]:
            return cls()
        if names == ["all"]:
            return cls(True, True)
        unknown = [n for n in names if n not in REDUCTIONS]
        if unknown or not names:
            raise ExploreError(f"--reduce: unknown reduction {', '.join(unknown) or repr(text)} "
                               f"(known: none, all, {', '.join(REDUCTIONS)})")
        return cls(sleep="sleep" in names, symmetry="symmetry" in names)

    @property
    def names(self) -> list[str]:
        return [n for n in REDUCTIONS if getattr(self, n)]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)


# -- symmetry: the same state up to a renaming of the replicas --------------------------------------


def _signature(r: tuple) -> tuple:
    """What a replica's canonical tuple says about it without naming any replica (its id, its
    believed leader, its requests' and leadership's replica sets left out): equal under every
    renaming, so ordering replicas by it is the same in every state of one class."""
    ls = r[19]
    return (r[1:11], r[12:17], len(r[17]), r[18], None if ls is None else (len(ls[0]), ls[1:3], ls[7:9]), r[20:22])


def renamed(t: tuple, m: dict[int, int]) -> tuple:
    """The canonical tuple ``t`` with every replica id ``r`` renamed ``m[r]``: sets of replicas
    and items keyed by replica re-sorted, the replicas re-ordered by their new ids."""
    now_ms, compacted_offset, prefix, ctl, replicas, checker, counters = t

    def one(r):
        return None if r is None else m[r]

    def ids(rs):
        return tuple(sorted([m[r] for r in rs]))

    def keyed(items):
        return tuple(sorted([(m[k], v) for k, v in items]))

    leader, epoch, isr, pe, highest, elr, last_elr, fenced, broker_epochs, next_be, log_info, shutting_down, lagging = ctl
    ctl2 = (one(leader), epoch, ids(isr), pe, highest, ids(elr), ids(last_elr), ids(fenced), keyed(broker_epochs), next_be,
            keyed(log_info), ids(shutting_down), ids(lagging))
    out: list[Any] = [None] * len(replicas)
    for r in replicas:
        (rid, log, start, before, hw, hwc, rp, cache, alive, halted, role, believed, lepoch, rpe, fresh, processed, fetch_state,
         pending, last_hw, ls, be, cse) = r
        if ls is not None:
            lisr, lpe, eso, remote_leo, caught_up, fetch_leo, fetch_ms, acks, highest_hw, remote_be, in_flight = ls
            if in_flight is not None:
                q_leader, q_epoch, q_pe, q_isr, added, why, rejected = in_flight
                in_flight = (m[q_leader], q_epoch, q_pe, ids(q_isr), keyed(added), why, rejected)
            ls = (ids(lisr), lpe, eso, keyed(remote_leo), keyed(caught_up), keyed(fetch_leo), keyed(fetch_ms), acks, highest_hw,
                  keyed(remote_be), in_flight)
        pending2 = tuple([(one(q[0]), q[1], ids(q[2]), q[3]) for q in pending])
        out[m[rid] - 1] = (m[rid], log, start, before, hw, hwc, rp, cache, alive, halted, role, one(believed), lepoch, rpe,
                           fresh, processed, fetch_state, pending2, last_hw, ls, be, cse)
    (committed, cstart, cbefore, twice, acked, unclean, faultless, pair_mismatch, committed_mismatch, covered, suspects,
     lossy) = checker
    pairs = tuple(sorted([((min(m[a], m[b]), max(m[a], m[b])), v) for (a, b), v in pair_mismatch]))
    checker2 = (committed, cstart, cbefore, twice, tuple(sorted([(o, rec, ids(h), lost) for o, rec, h, lost in acked])),
                unclean, faultless, pairs, keyed(committed_mismatch), keyed(covered), ids(suspects), lossy)
    return (now_ms, compacted_offset, prefix, ctl2, tuple(out), checker2, counters)


def symmetric_form(t: tuple) -> tuple:
    """The representative of ``t``'s class under renamings of the replicas: replicas ordered by
    ``_signature`` (ties tried in every order), the smallest encoding wins.  Two states that
    differ by a renaming get the same form."""
    replicas = t[4]
    sigs = sorted([(marshal.dumps(_signature(r), MARSHAL_VERSION), r[0]) for r in replicas])
    groups: list[list[int]] = []
    previous = None
    for sig, rid in sigs:
        if groups and sig == previous:
            groups[-1].append(rid)
        else:
            groups.append([rid])
        previous = sig
    if len(groups) == len(replicas) and all(g[0] == i + 1 for i, g in enumerate(groups)):
        return t  # one order, and it renames nothing (a form that is not the class's smallest merges less, never wrongly)
    best: tuple | None = None
    best_bytes = b""
    for orders in itertools.product(*[itertools.permutations(g) for g in groups]):
        m = {rid: i + 1 for i, rid in enumerate(itertools.chain.from_iterable(orders))}
        form = renamed(t, m)
        encoded = marshal.dumps(form, MARSHAL_VERSION)
        if best is None or encoded < best_bytes:
            best, best_bytes = form, encoded
    assert best is not None
    return best


def symmetric_key(t: tuple) -> bytes:
    """The visited-set key of a canonical tuple's class: the digest of its ``symmetric_form``."""
    return digest(marshal.dumps(symmetric_form(t), MARSHAL_VERSION))


# -- sleep sets: steps that commute ---------------------------------------------------------------

# Steps that touch only their own replica (ZooKeeper variants): a process crash (its log stays),
# a restart (reads the controller's current request), an explicit HW checkpoint or flush.
_LOCAL = frozenset("CRHU")
# What a step on another replica may be for a local step to commute with it.
_BESIDE_LOCAL = frozenset("CRHUFPL")


def independent(replay: Replay, t: str, a: str) -> bool:
    """Whether steps ``t`` and ``a``, both enabled in this state, commute here: each stays
    enabled after the other and both orders reach the same state (the sleep sets'
    independence).  Conservative: only a *local* step (``_LOCAL``, not a power loss) of a
    replica that nobody follows, leads or is told about, beside a step of another replica that
    does not read it; never under KRaft (a restart or shutdown is a controller write there).
    ``tests/test_explore_reduce.py`` checks every pair declared here on every reachable state
    of the small spaces: the two orders give the same canonical state."""
    p = replay.partition
    if p.variant.metadata == "kraft":
        return False
    suspects = replay.checker.suspects
    return _commutes(p, suspects, t, a) or _commutes(p, suspects, a, t)


def _commutes(p, suspects: set[int], t: str, a: str) -> bool:
    """``t`` local on its replica, ``a`` a step of another replica that cannot see it."""
    kt, ka = t[0], a[0]
    if kt not in _LOCAL or ka not in _BESIDE_LOCAL or t.endswith("p") or a.endswith("p"):
        return False
    r, q = int(t[1]), int(a[1])
    if r == q or (kt == "C" and ka == "C") or r in suspects:  # two crashes share one budget; a suspect's
        return False  # clearing reads the leader's HW
    if kt == "R" and ka not in "CRHUP":  # a fetch can write the ISR, and a restart reads the controller's request
        return False
    c, reps = p.controller, p.replicas
    if c.leader == r or c.leader == q and ka == "C":
        return False  # a crash of the controller's leader is a controller change (ZooKeeper: no leader)
    for x in reps.values():
        if x.presumes_leadership and x.id in (r, q) and (ka == "C" or x.id == r):
            return False
        if x.believed_leader == r or any(req.leader == r for req in x.pending_requests):
            return False
    return True

