"""A replica's log: records by absolute offset (oldest maybe compacted away), and its write path.

Long streaming runs compact the prefix that no step can change any more (see
``Partition.compact``).  ``Log`` keeps the records from ``start`` on, plus the last compacted
record (offset ``start - 1``) so that epoch-monotonicity checks at the boundary still work.
``len(log)`` is the log end offset, as for a plain list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from ._build import mypyc_attr
from .effects import Appended, CacheChanged, Truncated

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition
    from .replica import Replica

Record = tuple[int, str]


class CompactedOffsetError(IndexError):
    """An offset below the compacted prefix was read: an emulator bug, never a finding."""


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled too, Cls.__new__(Cls) then does not run __init__ (copies)
class Log:
    __slots__ = ("start", "end", "_records", "_before")

    def __init__(self, records: Iterable[Record] = (), start: int = 0, before: Record | None = None) -> None:
        self.start = start
        self._records: list[Record] = list(records)
        self._before = before
        self.end = start + len(self._records)  # the log end offset, kept by every write

    def copy(self) -> "Log":
        """An independent copy (records are immutable tuples, shared)."""
        new = Log.__new__(Log)
        new.start, new.end, new._records, new._before = self.start, self.end, list(self._records), self._before
        return new

    def __len__(self) -> int:
        return self.end

    def __getitem__(self, key):
        if type(key) is int and key >= self.start:
            return self._records[key - self.start]
        if isinstance(key, slice):
            lo = 0 if key.start is None else key.start
            hi = self.end if key.stop is None else key.stop
            if lo < self.start:
                raise CompactedOffsetError(f"offsets {lo}..{hi} reach below the compacted prefix (start {self.start})")
            return self._records[lo - self.start:hi - self.start]
        if key >= self.start:
            return self._records[key - self.start]
        if key == self.start - 1 and self._before is not None:
            return self._before
        raise CompactedOffsetError(f"offset {key} is in the compacted prefix (start {self.start})")

    def __delitem__(self, key: slice) -> None:
        if not isinstance(key, slice) or key.stop is not None:
            raise TypeError("only a log's suffix can be deleted: del log[offset:]")
        lo = key.start or 0
        if lo < self.start:
            raise CompactedOffsetError(f"cannot truncate to {lo}: below the compacted prefix (start {self.start})")
        del self._records[lo - self.start:]
        self.end = self.start + len(self._records)

    def __eq__(self, other) -> bool:
        if isinstance(other, Log):
            return (self.start, self._records, self._before) == (other.start, other._records, other._before)
        return NotImplemented

    def append(self, record: Record) -> None:
        self._records.append(record)
        self.end += 1

    def extend(self, records: Iterable[Record]) -> None:
        self._records.extend(records)
        self.end = self.start + len(self._records)

    def items(self) -> Iterator[tuple[int, Record]]:
        """``(offset, record)`` for every record still held, oldest first."""
        return enumerate(self._records, start=self.start)

    def retained(self) -> list[Record]:
        return list(self._records)

    def records_tuple(self) -> tuple[Record, ...]:
        """The records still held, oldest first, as a tuple."""
        return tuple(self._records)

    @property
    def before(self) -> Record | None:
        return self._before

    def compact(self, upto: int) -> list[Record]:
        """Drop the records below ``upto``; returns them (for the prefix digest)."""
        if upto <= self.start:
            return []
        removed = self._records[:upto - self.start]
        del self._records[:upto - self.start]
        self._before = removed[-1]
        self.start = upto
        return removed


# -- the write path (UnifiedLog.append / truncateTo): every change of a replica's log ----------


def append(p: "Partition", rep: "Replica", base: int, records: list[Record]) -> None:
    """Append at ``base`` (which must be the LEO), assigning each new epoch in the cache."""
    log = rep.log
    previous = log.end
    log.extend(records)
    cache = rep.cache
    last_epoch = None
    changed = False
    kept = len(cache)  # entries no assignment popped
    for i, (epoch, _) in enumerate(records):
        if epoch != last_epoch:
            if cache.assign(epoch, base + i):
                changed = True
                kept = min(kept, len(cache) - 1)
            last_epoch = epoch
    p.effect(Appended(rep.id, base, previous, log.end))
    if changed:
        p.effect(CacheChanged(rep.id, cache.changed_from(kept)))


def cut(p: "Partition", rep: "Replica", new_leo: int) -> None:
    """Remove every record at or above ``new_leo`` (nothing else changes)."""
    del rep.log[new_leo:]
    p.effect(Truncated(rep.id, rep.leo))


def truncate_to(p: "Partition", rep: "Replica", offset: int, rule: str) -> None:
    """``UnifiedLog.truncateTo``: cut the log to ``min(offset, LEO)``; always trims the cache.

    The cache is trimmed from ``offset`` even when ``offset >= LEO`` (that removes a leader's
    election-time entry and ends the KIP-279 loop); HW and recovery point are capped at
    ``offset``.  An offset below the compacted prefix is clamped to it (``BELOW_COMPACTED_PREFIX``).
    """
    if offset < rep.log.start:
        p.error("BELOW_COMPACTED_PREFIX")
        offset = rep.log.start
    before = rep.leo
    new_leo = min(offset, before)
    if new_leo < before:
        cut(p, rep, new_leo)
        p.event("Truncation", replica=rep.id, from_leo=before, to=new_leo, rule=rule)
    if rep.cache.truncate_from_end(offset):
        p.effect(CacheChanged(rep.id, rep.cache.changed_from(len(rep.cache))))
    rep.hw = min(rep.hw, offset)
    rep.recovery_point = min(rep.recovery_point, offset)
