"""The local engine's work directory: a breadth-first search's levels on disk, and its visited set.

``replemu explore`` (local engine) keeps, under ``DIR/PROTOCOL/local``:

* ``identity.json``: the search (replicas, protocol, knobs, config, alphabet, bounds but depth,
  reductions, state encoding); a work directory of another search is refused;
* ``progress.json``: per whole level its new states and transitions, and the violations so far
  (no timings: a work directory is the same bytes on every run); written (aside, then renamed) after the level's files, so it names only whole levels;
* ``keys-D.bin``: the 16-byte keys of the states first reached at depth ``D`` (the visited set is
  these files);
* ``frontier-D.bin`` / ``.idx``: the states of the deepest whole level (path, sleep set, packed
  state per record; the index holds the record offsets), which the next level expands.  An older
  frontier is deleted once the level after it is whole.

A stopped search (Ctrl-C, ``--max-seconds``, a kill) resumes from its last whole level when the
same command runs again; files of a level that was not whole are removed.

The visited set is a Python set of keys, all of them when no budget is given.  With a budget
(``--memory``, in keys: ``VisitedSet``) it holds at most half of it: when it fills up it is
written to disk as a sorted *run* and emptied, and the candidates of the level that were not
checked against everything (those that arrived after a run was written, or while older levels
were only on disk) are checked at the level's end, one budget-sized chunk of keys at a time.  A
search is then bounded by disk, not memory (the frontier file is read through ``mmap``).
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from array import array
from pathlib import Path
from typing import Any, BinaryIO

KEY = 16  # bytes of a state's key
HEAD = struct.Struct("<HHI")  # path bytes, sleep bytes, packed-state bytes
IDENTITY, PROGRESS = "identity.json", "progress.json"


class WorkDirError(ValueError):
    """A work directory that belongs to another search (the message says which setting differs)."""


def write_json(path: Path, value: Any) -> None:
    """Write aside, then rename: the file is whole or absent."""
    aside = path.with_name("." + path.name + ".tmp")
    aside.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
    os.replace(aside, path)


def claim(work: Path, identity: dict[str, Any]) -> None:
    """Make ``work`` the work directory of the search ``identity`` (``emulator.explore.identity``):
    created when new; ``WorkDirError`` naming the settings that differ when it holds another
    search.  Both engines' work directories are claimed this way."""
    work.mkdir(parents=True, exist_ok=True)
    ident = work / IDENTITY
    if ident.exists():
        recorded = json.loads(ident.read_text())
        differs = sorted(k for k in set(recorded) | set(identity) if recorded.get(k) != identity.get(k))
        if differs:
            raise WorkDirError(f"{work} holds another search (differs in {', '.join(differs)}): "
                               f"use another --out or remove it")
    else:
        write_json(ident, identity)


class Frontier:
    """The states of one level as a sequence of ``(path, packed, sleep)`` read from its file."""

    def __init__(self, records: Path) -> None:
        self.offsets = array("Q")
        with open(records.with_suffix(".idx"), "rb") as f:
            self.offsets.frombytes(f.read())
        self._file = open(records, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._data: Any = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i: int) -> tuple[str, bytes, str]:
        at = self.offsets[i]
        np, ns, nb = HEAD.unpack_from(self._data, at)
        at += HEAD.size
        path = self._data[at:at + np].decode("ascii")
        sleep = self._data[at + np:at + np + ns].decode("ascii")
        return path, self._data[at + np + ns:at + np + ns + nb], sleep

    def close(self) -> None:
        if isinstance(self._data, mmap.mmap):
            self._data.close()
        self._file.close()


class LevelWriter:
    """The candidates of one level as they are accepted: records (path order), their keys, and
    per candidate the run count at its arrival (``VisitedSet.runs``)."""

    def __init__(self, work: Path, depth: int) -> None:
        self.work, self.depth = work, depth
        self.records_path = work / f".frontier-{depth}.bin.tmp"
        self.keys_path = work / f".keys-{depth}.bin.tmp"
        self.records: BinaryIO = open(self.records_path, "wb")
        self.keys: BinaryIO = open(self.keys_path, "wb")
        self.offsets = array("Q")
        self.arrivals = array("I")
        self.position = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, path: str, packed: bytes, sleep: str, key: bytes, arrival: int) -> None:
        p, s = path.encode("ascii"), sleep.encode("ascii")
        self.records.write(HEAD.pack(len(p), len(s), len(packed)))
        self.records.write(p)
        self.records.write(s)
        self.records.write(packed)
        self.offsets.append(self.position)
        self.position += HEAD.size + len(p) + len(s) + len(packed)
        self.keys.write(key)
        self.arrivals.append(arrival)

    def close(self) -> None:
        self.records.close()
        self.keys.close()

    def discard(self) -> None:
        self.close()
        for f in (self.records_path, self.keys_path):
            f.unlink(missing_ok=True)


class VisitedSet:
    """The keys seen: in memory, or with ``budget`` (keys) at most half of it in memory and the
    rest in sorted runs on disk (see the module's docstring)."""

    def __init__(self, work: Path | None, budget: int | None) -> None:
        if budget is not None and budget < 2:
            raise ValueError("the memory budget must hold at least 2 keys")
        self.work, self.budget = work, budget
        self.hot: set[bytes] = set()
        self.cold_levels = 0  # levels below this are (partly) only on disk
        self.runs: list[Path] = []  # this level's runs, in the order written
        self.depth = 0  # the level being found
        self.peak = 0  # the most keys held in memory at once

    def __contains__(self, key: bytes) -> bool:
        return key in self.hot

    def __len__(self) -> int:
        return len(self.hot)

    def add(self, key: bytes) -> None:
        hot = self.hot
        hot.add(key)
        if self.budget is not None and len(hot) >= self.budget // 2:
            self.peak = max(self.peak, len(hot))
            self.spill()

    def spill(self) -> None:
        """Write the keys in memory to a sorted run of this level and forget them."""
        assert self.work is not None
        run = self.work / f".run-{self.depth}-{len(self.runs)}.bin"
        with open(run, "wb") as f:
            f.write(b"".join(sorted(self.hot)))
        self.runs.append(run)
        self.hot.clear()
        self.cold_levels = self.depth  # every earlier level is now only on disk

    def needs_check(self) -> bool:
        return bool(self.runs) or self.cold_levels > 0

    def chunk(self) -> int:
        return max(1, (self.budget or 2) // 2)


def _chunks(path: Path, keys: int):
    """The keys of a file, ``keys`` at a time, as sets."""
    with open(path, "rb") as f:
        while True:
            data = f.read(keys * KEY)
            if not data:
                return
            yield {data[i:i + KEY] for i in range(0, len(data), KEY)}


class LevelStore:
    """A search's work directory (see the module's docstring)."""

    def __init__(self, work: Path, identity: dict[str, Any]) -> None:
        self.work = work
        claim(work, identity)
        progress_file = work / PROGRESS
        self.progress: dict[str, Any] = (json.loads(progress_file.read_text()) if progress_file.exists()
                                         else {"levels": [], "violations": {}})
        whole = len(self.progress["levels"])
        for f in work.iterdir():  # what a stopped level left behind
            name = f.name
            if name.startswith("."):
                f.unlink()
            elif name.startswith(("keys-", "frontier-")) and int(name.split("-")[1].split(".")[0]) >= whole:
                f.unlink()

    @property
    def whole_levels(self) -> int:
        return len(self.progress["levels"])

    def keys_file(self, depth: int) -> Path:
        return self.work / f"keys-{depth}.bin"

    def frontier_file(self, depth: int) -> Path:
        return self.work / f"frontier-{depth}.bin"

    def load_visited(self, visited: VisitedSet) -> None:
        """A resumed search's visited set: every whole level's keys in memory, or with a budget
        none (they are all on disk: checked at each level's end)."""
        if visited.budget is None:
            for d in range(self.whole_levels):
                data = self.keys_file(d).read_bytes()
                visited.hot.update(data[i:i + KEY] for i in range(0, len(data), KEY))
        else:
            visited.cold_levels = self.whole_levels

    def frontier(self, depth: int) -> Frontier:
        return Frontier(self.frontier_file(depth))

    def begin(self, depth: int, visited: VisitedSet) -> LevelWriter:
        visited.depth, visited.runs = depth, []
        return LevelWriter(self.work, depth)

    def commit(self, writer: LevelWriter, visited: VisitedSet, level: dict[str, Any],
               violations: dict[str, tuple[int, str]]) -> tuple[int, int]:
        """Make a level whole: drop the candidates that were seen before (when the visited set
        is partly on disk), write its files, then the progress.  Returns (new states, dropped)."""
        writer.close()
        depth = writer.depth
        n = len(writer)
        dropped = bytearray(n)
        if visited.needs_check() and n:
            # The candidates' keys are read from their file (mmap) per chunk of the visited set:
            # in memory at once, the keys in memory and one chunk, never the whole level.
            with open(writer.keys_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as keys:
                sources = [(self.keys_file(d), -1) for d in range(min(visited.cold_levels, depth))]  # whole earlier levels
                sources += [(run, g) for g, run in enumerate(visited.runs)]  # this level's runs: what arrived after each
                arrivals = writer.arrivals
                for source, g in sources:
                    for chunk in _chunks(source, visited.chunk()):
                        visited.peak = max(visited.peak, len(visited.hot) + len(chunk))
                        for i in range(n):
                            if not dropped[i] and arrivals[i] > g and keys[i * KEY:(i + 1) * KEY] in chunk:
                                dropped[i] = 1
        kept = n - sum(dropped)
        records, index, keys_out = self.frontier_file(depth), self.frontier_file(depth).with_suffix(".idx"), self.keys_file(depth)
        if kept == n:
            os.replace(writer.keys_path, keys_out)
            with open(index, "wb") as out:
                writer.offsets.tofile(out)
            os.replace(writer.records_path, records)
        else:
            self._rewrite(writer, dropped, records, index, keys_out)
        for run in visited.runs:
            run.unlink(missing_ok=True)
        if visited.runs:
            visited.cold_levels = depth + 1  # this level's keys are whole only on disk
        visited.runs = []
        self.progress["levels"].append({**level, "new_states": kept})
        self.progress["violations"] = {k: list(v) for k, v in sorted(violations.items())}
        write_json(self.work / PROGRESS, self.progress)
        if depth >= 1:  # the frontier just expanded is no longer needed
            for old in (self.frontier_file(depth - 1), self.frontier_file(depth - 1).with_suffix(".idx")):
                old.unlink(missing_ok=True)
        return kept, n - kept

    def _rewrite(self, writer: LevelWriter, dropped: bytearray, records: Path, index: Path, keys_out: Path) -> None:
        offsets = array("Q")
        position = 0
        src, ksrc = open(writer.records_path, "rb"), open(writer.keys_path, "rb")
        out, kout = open(records, "wb"), open(keys_out, "wb")
        with src, ksrc, out, kout:
            for i in range(len(writer)):
                np, ns, nb = HEAD.unpack(src.read(HEAD.size))
                body = src.read(np + ns + nb)
                key = ksrc.read(KEY)
                if dropped[i]:
                    continue
                out.write(HEAD.pack(np, ns, nb))
                out.write(body)
                kout.write(key)
                offsets.append(position)
                position += HEAD.size + np + ns + nb
        with open(index, "wb") as idx:
            offsets.tofile(idx)
        writer.records_path.unlink()
        writer.keys_path.unlink()
