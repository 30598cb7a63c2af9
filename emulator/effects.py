"""What a step did, as the checker needs to know it: the partition reports, the checker observes.

A step returns its effects in the order they happened.  Each carries the facts of that moment
that a later part of the same step could change (who held an acknowledged record, the records
a power failure destroyed); everything else the checker reads from the partition after the step.

Effects are named tuples: immutable, built in C (a step builds one or more), and told apart by
their type (``type(e) is Appended``), never by comparing two effects.
"""

from __future__ import annotations

from typing import NamedTuple

Record = tuple[int, str]  # (epoch, value)


class Appended(NamedTuple):
    """``replica`` appended records at ``[base, end)``; its LEO before was ``previous_leo``."""

    replica: int
    base: int
    previous_leo: int
    end: int


class Truncated(NamedTuple):
    """``replica``'s log was cut to ``to`` records."""

    replica: int
    to: int


class CacheChanged(NamedTuple):
    """``replica``'s epoch cache changed; its entries starting below ``from_offset`` (but the
    last of them) are as they were (0: any entry may have changed)."""

    replica: int
    from_offset: int


class LeaderHw(NamedTuple):
    """A replica presuming leadership has HW ``hw`` (it became leader, or its HW rose)."""

    replica: int
    hw: int


class LeadershipEnded(NamedTuple):
    replica: int


class Acked(NamedTuple):
    """Offsets ``first..last`` of ``leader`` were acknowledged to an acks=all producer.

    ``records`` are the leader's records there; ``holders[i]`` the replicas holding
    ``records[i]`` at that moment; ``short`` the leader's ISR members whose LEO did not reach
    ``last``.
    """

    leader: int
    first: int
    last: int
    produce_step: int
    isr: tuple[int, ...]
    records: tuple[Record, ...]
    holders: tuple[frozenset[int], ...]
    short: tuple[int, ...]


class UncleanElection(NamedTuple):
    leader: int


class PowerLoss(NamedTuple):
    """``replica`` lost ``records`` (from offset ``first`` on) in a power failure."""

    replica: int
    first: int
    records: tuple[Record, ...]


class EpochReused(NamedTuple):
    """The controller wrote a leader epoch it had already used."""

    epoch: int
    detail: str


class IsrWritten(NamedTuple):
    """``leader`` wrote an ISR change to the controller (expand, shrink or lag)."""

    leader: int


class RoleChanged(NamedTuple):
    """``replica``'s fetcher state changed within a fetch: its truncation phase ended, or it halted."""

    replica: int


class MetadataChanged(NamedTuple):
    """KRaft: the controller wrote a partition change (ISR, ELR, leader) with this partition epoch."""

    partition_epoch: int


Effect = (Appended | Truncated | CacheChanged | LeaderHw | LeadershipEnded | Acked | UncleanElection | PowerLoss
          | EpochReused | IsrWritten | RoleChanged | MetadataChanged)
