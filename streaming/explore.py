"""The Spark engine of ``replemu explore``: the same breadth-first search as
``emulator.search.search_local``, level by level, with the frontier and the visited set on disk.
It runs any family's ``SearchSpace`` (``emulator.search``): the space is pickled to the executors
with the closure that expands it, and its hooks are all an executor calls.

Per depth ``d`` (the work directory holds ``levels/d=0 .. d-1``, each a Parquet table of
``key`` (16-byte digest), ``path`` (step codes) and ``state`` (packed canonical bytes)), one
Spark job:

1. the frontier ``levels/d=<d-1>`` is split into ranges of paths (``repartitionByRange``: siblings
   and cousins together) and expanded by an Arrow function per range (``mapInArrow``,
   ``emulator.search.expand``); each task merges the diamonds among its states' children, drops
   the children whose key is in the latest levels (read by each Python worker once per level, up
   to ``FILTER_KEYS`` keys) and emits one row per remaining key (its smallest path), plus marker
   rows: the smallest violating path per invariant, and its transition count;
2. those rows (and, unless the tasks' filter held every earlier level, the keys of the earlier
   levels: the visited set is the levels themselves, read by column, never collected to the
   driver) meet in one aggregation by key: the smallest ``(path, state)``, and whether an
   earlier level has the key; the unseen ones (and the markers, whose keys are not 16 bytes
   long) are the new level;
3. it is written aside and renamed into place (a level exists whole or not at all), and
   ``progress.json`` records the level's counts and the violations first found there.

A search that stops (Ctrl-C, ``--max-states``, a failure) resumes from its last whole level when
the same command runs again; ``identity.json`` refuses a work directory of another search.  The
driver holds only counts and one path per violated invariant, so its memory stays flat as the
visited set grows.  The counts and violations are the local engine's, state for state: both
keep the smallest path per state and per invariant (see ``emulator.search``).
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

from emulator.levels import WorkDirError, claim  # noqa: F401  (WorkDirError: what the CLI catches)
from emulator.search import (
    Level,
    Outcome,
    SearchSpace,
    expand,
    note_violations,
    pack,
    reached,
    root_entry,
)

from .storage import LocalStore

PROGRESS = "progress.json"
LEVEL_SCHEMA = "key binary, path string, state binary"
TASK_STATES = 5000  # frontier states per expansion task, at most (bounds a task's memory)
BATCH_ROWS = 10_000  # rows per Arrow batch an expansion task returns
# zlib level of the states the engine writes: 0 (stored blocks) costs ~2 us a state against ~11 us
# at 1; the shuffle (lz4) and the Parquet files (LEVEL_CODEC) compress them instead.  Levels of
# either level read alike (a zlib stream).
PACK_LEVEL = 0
LEVEL_CODEC = "zstd"
FILTER_KEYS = 4_000_000  # keys of the latest levels each Python worker holds (16 bytes each) to drop visited children
TRANSITIONS = b"#"  # marker rows: key TRANSITIONS + task id, path = the task's transition count
VIOLATION = b"!"  # marker rows: key VIOLATION + invariant name, path = the smallest violating path
KEY_BYTES = 16  # a state's key; marker keys have other lengths, so they never meet a state


def _expander(space: SearchSpace, filter_dirs: tuple[str, ...] = (), pack_level: int = PACK_LEVEL) -> Callable[[Iterator], Iterator]:
    """The Arrow function run per frontier partition (``mapInArrow``).

    The frontier is partitioned by parent path, so siblings meet in one task and the diamonds
    among their children (``a b`` and ``b a``) are merged here, before the shuffle: per task one
    row per key (its smallest path), one marker row per violated invariant (its smallest path)
    and one with the task's transition count.  Children whose key is in one of the levels
    ``filter_dirs`` (the last levels, read once per Python worker: ``_level_keys``) are counted
    and judged but not emitted: the aggregation would drop them as visited anyway, and most
    children that are not new are found there (a state's successors mostly lie one level up,
    down or beside it).  States are emitted packed at zlib level ``pack_level``.
    """

    def run(batches: Iterator) -> Iterator:
        import numpy as np
        import pyarrow as pa
        from pyspark import TaskContext

        context = space.context()
        best: dict[bytes, tuple[str, bytes]] = {}
        broken: dict[str, str] = {}
        transitions = 0
        for batch in batches:
            for path, state in zip(batch.column("path").to_pylist(), batch.column("state").to_pylist()):
                for s in expand(space, state, "", context):
                    transitions += 1
                    child = f"{path} {s.code}" if path else s.code
                    for name in s.broken:
                        if name not in broken or child < broken[name]:
                            broken[name] = child
                    old = best.get(s.key)
                    if old is None or child < old[0]:
                        best[s.key] = (child, s.state)
        keys = list(best)
        if filter_dirs and keys:
            visited = _level_keys(filter_dirs)
            if len(visited):
                wanted = np.frombuffer(b"".join(keys), dtype=f"S{KEY_BYTES}")
                at = np.minimum(np.searchsorted(visited, wanted), len(visited) - 1)
                keys = [k for k, seen in zip(keys, (visited[at] == wanted).tolist()) if not seen]
        ctx = TaskContext.get()
        task = f"{ctx.stageId()}-{ctx.partitionId()}".encode() if ctx is not None else b"0"
        markers = [VIOLATION + n.encode() for n in broken] + [TRANSITIONS + task]
        marker_paths = list(broken.values()) + [str(transitions)]
        for i in range(0, len(keys), BATCH_ROWS):
            part = keys[i:i + BATCH_ROWS]
            rows = [best[k] for k in part]
            yield pa.RecordBatch.from_arrays(
                [pa.array(part, pa.binary()), pa.array([p for p, _ in rows], pa.string()),
                 pa.array([zlib.compress(st, pack_level) for _, st in rows], pa.binary())], names=["key", "path", "state"])
        yield pa.RecordBatch.from_arrays([pa.array(markers, pa.binary()), pa.array(marker_paths, pa.string()),
                                          pa.array([b""] * len(markers), pa.binary())], names=["key", "path", "state"])

    return run


_LEVEL_KEYS: dict[tuple[str, ...], Any] = {}  # per Python worker: the keys of the last filter levels read


def _level_keys(dirs: tuple[str, ...]):
    """The state keys of the levels ``dirs``, sorted (a numpy array of ``S16``), read once per
    Python worker process and level (Spark reuses its Python workers across tasks)."""
    keys = _LEVEL_KEYS.get(dirs)
    if keys is None:
        import numpy as np
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        parts = []
        for d in dirs:
            col = pq.read_table(d, columns=["key"]).column("key")
            parts += col.filter(pc.equal(pc.binary_length(col), KEY_BYTES)).to_pylist()
        keys = np.sort(np.frombuffer(b"".join(parts), dtype=f"S{KEY_BYTES}"))
        _LEVEL_KEYS.clear()
        _LEVEL_KEYS[dirs] = keys
    return keys


def _filter_levels(levels_dir: Path, per_depth: list[int]) -> tuple[tuple[str, ...], bool]:
    """The levels whose keys the expansion tasks drop (the latest ones, at most ``FILTER_KEYS``
    keys together), and whether they are all the levels (then nothing visited reaches the
    aggregation, which needs no visited side)."""
    chosen: list[str] = []
    total = 0
    for d in range(len(per_depth) - 1, -1, -1):
        if total + per_depth[d] > FILTER_KEYS:
            return tuple(chosen), False
        total += per_depth[d]
        chosen.append(str(levels_dir / f"d={d}"))
    return tuple(chosen), True


def _write_json(path: Path, data: Any) -> None:
    """Write aside, then rename into place (``LocalStore.write_bytes``)."""
    LocalStore(path.parent).write_bytes(path.name, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def open_work_dir(work: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The progress of the search in ``work`` (created when new); ``WorkDirError`` when it holds
    another search.  Levels beyond the recorded progress (a level renamed into place just before
    a stop) are removed: they are recomputed."""
    claim(work, identity)
    progress_file = work / PROGRESS
    progress = json.loads(progress_file.read_text()) if progress_file.exists() else {"levels": [], "violations": {}}
    levels = work / "levels"
    if levels.exists():
        for d in levels.iterdir():
            if d.name.startswith("d=") and int(d.name[2:]) >= len(progress["levels"]):
                shutil.rmtree(d)
    return progress


def search_spark(spark, space: SearchSpace, work: str | Path, on_level: Callable[[Level], None] = lambda _l: None,
                 should_stop: Callable[[int], str | None] = lambda _n: None,
                 clock: Callable[[], float] = lambda: 0.0, slices: int | None = None,
                 found: dict[str, tuple[int, str]] | None = None, until: frozenset[str] = frozenset()) -> Outcome:
    """Breadth-first search of ``space`` on ``spark``, checkpointed per level in ``work``
    (``on_level``, ``should_stop``, ``clock``, ``found`` and ``until`` as for ``search_local``)."""
    from pyspark.sql import functions as F

    work = Path(work)
    progress = open_work_dir(work, space.identity())  # all but the depth: a deeper search continues
    levels_dir = work / "levels"
    slices = slices or max(2, spark.sparkContext.defaultParallelism * 4)
    merge_slices = max(2, spark.sparkContext.defaultParallelism)  # the aggregation by key and the level's files
    if not progress["levels"]:
        key, state, broken = root_entry(space)
        frame = spark.createDataFrame([(key, "", pack(state))], "key binary, path string, state binary")
        _write_level(frame, levels_dir, 0)
        first: dict[str, tuple[int, str]] = {}
        note_violations(first, 0, "", broken)
        progress = {"levels": [{"depth": 0, "new_states": 1, "transitions": 0}],
                    "violations": {k: list(v) for k, v in first.items()}}
        _write_json(work / PROGRESS, progress)
    violations: dict[str, tuple[int, str]] = {} if found is None else found
    violations.update({k: (v[0], v[1]) for k, v in progress["violations"].items()})
    per_depth = [lv["new_states"] for lv in progress["levels"]]
    transitions = sum(lv["transitions"] for lv in progress["levels"])
    if len(per_depth) > 1:
        on_level(Level(len(per_depth) - 1, per_depth[-1], progress["levels"][-1]["transitions"], 0.0, sum(per_depth),
                       resumed=True))
    for depth in range(len(per_depth), space.depth() + 1):
        if per_depth[-1] == 0:
            return Outcome(per_depth, transitions, True, True, violations)
        reason = should_stop(sum(per_depth)) or reached(until, violations)
        if reason:
            return Outcome(per_depth, transitions, False, False, violations, reason)
        began = clock()
        frontier = _states(spark.read.parquet(str(levels_dir / f"d={depth - 1}")))
        # ranges of the frontier sorted by path: siblings, cousins and most of the states that share
        # a prefix meet in one task, whose diamonds are merged before the shuffle
        spread = frontier.repartitionByRange(max(slices, per_depth[-1] // TASK_STATES + 1), "path")
        filter_dirs, covered = _filter_levels(levels_dir, per_depth)
        candidates = spread.mapInArrow(_expander(space, filter_dirs, PACK_LEVEL), LEVEL_SCHEMA)
        if covered:  # every earlier level's keys were dropped in the tasks: per key the smallest (path, state)
            new = (candidates.repartition(merge_slices, "key").groupBy("key")
                   .agg(F.min(F.struct("path", "state")).alias("s"))
                   .select("key", F.col("s.path").alias("path"), F.col("s.state").alias("state")))
        else:
            visited = (spark.read.parquet(*[str(levels_dir / f"d={d}") for d in range(depth)]).select("key")
                       .where(F.length("key") == KEY_BYTES)
                       .select("key", F.lit("").alias("path"), F.lit(b"").alias("state"), F.lit(True).alias("seen")))
            # one shuffle: per key the smallest (path, state), and whether an earlier level has it
            new = (candidates.withColumn("seen", F.lit(False)).unionByName(visited).repartition(merge_slices, "key")
                   .groupBy("key")
                   .agg(F.min(F.struct("path", "state")).alias("s"), F.max("seen").alias("seen"))
                   .where(~F.col("seen") | (F.length("key") != KEY_BYTES))
                   .select("key", F.col("s.path").alias("path"), F.col("s.state").alias("state")))
        _write_level(new, levels_dir, depth)
        written = spark.read.parquet(str(levels_dir / f"d={depth}"))
        new_states = _states(written).count()
        level_transitions = 0
        for row in written.where(F.length("key") != KEY_BYTES).select("key", "path").collect():
            key = bytes(row["key"])
            if key.startswith(TRANSITIONS):
                level_transitions += int(row["path"])
            else:
                note_violations(violations, depth, row["path"], [key[len(VIOLATION):].decode()])
        transitions += level_transitions
        per_depth.append(new_states)
        progress["levels"].append({"depth": depth, "new_states": new_states, "transitions": level_transitions})
        progress["violations"] = {k: list(v) for k, v in violations.items()}
        _write_json(work / PROGRESS, progress)
        on_level(Level(depth, new_states, level_transitions, clock() - began, sum(per_depth)))
    return Outcome(per_depth, transitions, True, per_depth[-1] == 0, violations)


def _states(level):
    """The state rows of a level (without the marker rows)."""
    from pyspark.sql import functions as F

    return level.where(F.length("key") == KEY_BYTES)


def _write_level(frame, levels_dir: Path, depth: int) -> None:
    """Write one level aside and rename it into place: it exists whole or not at all."""
    target = levels_dir / f"d={depth}"
    aside = levels_dir / f".d={depth}.tmp"
    shutil.rmtree(aside, ignore_errors=True)
    frame.write.mode("overwrite").option("compression", LEVEL_CODEC).parquet(str(aside))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(aside, target)
