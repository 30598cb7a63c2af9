"""The Spark engine of ``replemu explore``: the same breadth-first search as
``emulator.explore.search_local``, level by level, with the frontier and the visited set on disk.

Per depth ``d`` (the work directory holds ``levels/d=0 .. d-1``, each a Parquet table of
``key`` (16-byte digest), ``path`` (step codes) and ``state`` (packed canonical bytes)), one
Spark job:

1. the frontier ``levels/d=<d-1>`` is partitioned by parent path (siblings together) and
   expanded by a pandas function per partition (``emulator.explore.expand``); each task merges
   the diamonds among its siblings' children and emits one row per key (its smallest path),
   plus marker rows: the smallest violating path per invariant, and its transition count;
2. those rows and the keys of every earlier level (the visited set is the levels themselves,
   read by column, never collected to the driver) meet in one aggregation by key: the smallest
   ``(path, state)``, and whether an earlier level has the key; the unseen ones (and the
   markers, whose keys are not 16 bytes long) are the new level;
3. it is written aside and renamed into place (a level exists whole or not at all), and
   ``progress.json`` records the level's counts and the violations first found there.

A search that stops (Ctrl-C, ``--max-states``, a failure) resumes from its last whole level when
the same command runs again; ``identity.json`` refuses a work directory of another search.  The
driver holds only counts and one path per violated invariant, so its memory stays flat as the
visited set grows.  The counts and violations are the local engine's, state for state: both
keep the smallest path per state and per invariant (see ``emulator.explore``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

from emulator.explore import (
    STATE_ENCODING, Level, Outcome, Space, digest, encode, expand, note_violations, pack, reached, root,
)

from .storage import LocalStore

IDENTITY = "identity.json"
PROGRESS = "progress.json"
LEVEL_SCHEMA = "key binary, path string, state binary"
TASK_STATES = 5000  # frontier states per expansion task, at most (bounds a task's memory)


class WorkDirError(ValueError):
    """A work directory that belongs to another search (the message says which setting differs)."""


TRANSITIONS = b"#"  # marker rows: key TRANSITIONS + task id, path = the task's transition count
VIOLATION = b"!"  # marker rows: key VIOLATION + invariant name, path = the smallest violating path
KEY_BYTES = 16  # a state's key; marker keys have other lengths, so they never meet a state


def _expander(space: Space) -> Callable[[Iterator], Iterator]:
    """The pandas function run per frontier partition (``mapInPandas``).

    The frontier is partitioned by parent path, so siblings meet in one task and the diamonds
    among their children (``a b`` and ``b a``) are merged here, before the shuffle: per task one
    row per key (its smallest path), one marker row per violated invariant (its smallest path)
    and one with the task's transition count.
    """

    def run(frames: Iterator) -> Iterator:
        import pandas as pd
        from pyspark import TaskContext

        template = space.template
        best: dict[bytes, tuple[str, bytes]] = {}
        broken: dict[str, str] = {}
        transitions = 0
        for frame in frames:
            for path, state in zip(frame["path"], frame["state"]):
                for s in expand(space, bytes(state), template):
                    transitions += 1
                    child = f"{path} {s.code}" if path else s.code
                    for name in s.broken:
                        if name not in broken or child < broken[name]:
                            broken[name] = child
                    old = best.get(s.key)
                    if old is None or child < old[0]:
                        best[s.key] = (child, s.state)
        ctx = TaskContext.get()
        task = f"{ctx.stageId()}-{ctx.partitionId()}".encode() if ctx is not None else b"0"
        keys = list(best) + [VIOLATION + n.encode() for n in broken] + [TRANSITIONS + task]
        paths = [p for p, _ in best.values()] + list(broken.values()) + [str(transitions)]
        states = [pack(st) for _, st in best.values()] + [b""] * (len(broken) + 1)
        for i in range(0, len(keys), 20000):
            yield pd.DataFrame({"key": keys[i:i + 20000], "path": paths[i:i + 20000], "state": states[i:i + 20000]})

    return run


def _write_json(path: Path, data: Any) -> None:
    """Write aside, then rename into place (``LocalStore.write_bytes``)."""
    LocalStore(path.parent).write_bytes(path.name, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def open_work_dir(work: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The progress of the search in ``work`` (created when new); ``WorkDirError`` when it holds
    another search.  Levels beyond the recorded progress (a level renamed into place just before
    a stop) are removed: they are recomputed."""
    work.mkdir(parents=True, exist_ok=True)
    ident = work / IDENTITY
    if ident.exists():
        recorded = json.loads(ident.read_text())
        differs = sorted(k for k in set(recorded) | set(identity) if recorded.get(k) != identity.get(k))
        if differs:
            raise WorkDirError(f"{work} holds another search (differs in {', '.join(differs)}): "
                               f"use another --out or remove it")
    else:
        _write_json(ident, identity)
    progress_file = work / PROGRESS
    progress = json.loads(progress_file.read_text()) if progress_file.exists() else {"levels": [], "violations": {}}
    levels = work / "levels"
    if levels.exists():
        for d in levels.iterdir():
            if d.name.startswith("d=") and int(d.name[2:]) >= len(progress["levels"]):
                shutil.rmtree(d)
    return progress


def search_spark(spark, space: Space, work: str | Path, on_level: Callable[[Level], None] = lambda _l: None,
                 should_stop: Callable[[int], str | None] = lambda _n: None,
                 clock: Callable[[], float] = lambda: 0.0, slices: int | None = None,
                 found: dict[str, tuple[int, str]] | None = None, until: frozenset[str] = frozenset()) -> Outcome:
    """Breadth-first search of ``space`` on ``spark``, checkpointed per level in ``work``
    (``on_level``, ``should_stop``, ``clock``, ``found`` and ``until`` as for ``search_local``)."""
    from pyspark.sql import functions as F

    work = Path(work)
    identity = {"replicas": list(space.replicas), "protocol": space.variant.name, "knobs": space.variant.knobs(),
                "config": repr(space.config), "alphabet": [k.value for k in space.alphabet], "encoding": STATE_ENCODING,
                **{k: v for k, v in space.bounds.as_dict().items() if k != "depth"}}  # a deeper search continues
    progress = open_work_dir(work, identity)
    levels_dir = work / "levels"
    slices = slices or max(2, spark.sparkContext.defaultParallelism * 4)
    if not progress["levels"]:
        replay, counters, _steps, broken = root(space)
        state = encode(replay, counters)
        frame = spark.createDataFrame([(digest(state), "", pack(state))], "key binary, path string, state binary")
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
    for depth in range(len(per_depth), space.bounds.depth + 1):
        if per_depth[-1] == 0:
            return Outcome(per_depth, transitions, True, True, violations)
        reason = should_stop(sum(per_depth)) or reached(until, violations)
        if reason:
            return Outcome(per_depth, transitions, False, False, violations, reason)
        began = clock()
        frontier = _states(spark.read.parquet(str(levels_dir / f"d={depth - 1}")))
        parent = F.regexp_replace("path", r"( |^)[^ ]*$", "")
        spread = frontier.repartition(max(slices, per_depth[-1] // TASK_STATES + 1), parent)
        candidates = spread.mapInPandas(_expander(space), LEVEL_SCHEMA).withColumn("seen", F.lit(False))
        visited = (spark.read.parquet(*[str(levels_dir / f"d={d}") for d in range(depth)]).select("key")
                   .where(F.length("key") == KEY_BYTES)
                   .select("key", F.lit("").alias("path"), F.lit(b"").alias("state"), F.lit(True).alias("seen")))
        # one shuffle: per key the smallest (path, state), and whether an earlier level has it
        new = (candidates.unionByName(visited).groupBy("key")
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
    frame.write.mode("overwrite").parquet(str(aside))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(aside, target)
