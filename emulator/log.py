"""A log indexed by absolute offset, whose oldest records may have been compacted away.

Long streaming runs compact the prefix that no step can change any more (see
``Partition.compact``).  ``Log`` keeps the records from ``start`` on, plus the last compacted
record (offset ``start - 1``) so that epoch-monotonicity checks at the boundary still work.
``len(log)`` is the log end offset, as for a plain list.
"""

from __future__ import annotations

from typing import Iterable, Iterator

Record = tuple[int, str]


class CompactedOffsetError(IndexError):
    """An offset below the compacted prefix was read: an emulator bug, never a finding."""


class Log:
    __slots__ = ("start", "_records", "_before")

    def __init__(self, records: Iterable[Record] = (), start: int = 0, before: Record | None = None) -> None:
        self.start = start
        self._records: list[Record] = list(records)
        self._before = before

    def __len__(self) -> int:
        return self.start + len(self._records)

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo = 0 if key.start is None else key.start
            hi = len(self) if key.stop is None else key.stop
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

    def __eq__(self, other) -> bool:
        if isinstance(other, Log):
            return (self.start, self._records, self._before) == (other.start, other._records, other._before)
        return NotImplemented

    def append(self, record: Record) -> None:
        self._records.append(record)

    def extend(self, records: Iterable[Record]) -> None:
        self._records.extend(records)

    def items(self) -> Iterator[tuple[int, Record]]:
        """``(offset, record)`` for every record still held, oldest first."""
        return enumerate(self._records, start=self.start)

    def retained(self) -> list[Record]:
        return list(self._records)

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
