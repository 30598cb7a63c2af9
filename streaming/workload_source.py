"""A PySpark Python streaming data source of generated events: ``format("replemu_workload")``.

Options: ``seed``, ``profile`` (its name), ``profile_spec`` (the profile itself as JSON, so
executors on any host need no files), ``partitions`` (N generated partitions),
``steps_per_batch`` (each micro-batch carries the next S steps of every partition, default 20),
``max_steps`` (per partition; without it the stream is endless under a processing-time trigger).

Offsets are micro-batch numbers: batch b holds seq ``b*S+1 .. (b+1)*S`` of every partition (batch 0
also the header rows), computed only from (seed, profile, partition, b), so the same seed gives the
same events whatever the trigger and however often the query restarts from its checkpoint.  The
generator is incremental (``emulator.workload.step_bursts``) and runs where the reader plans a
micro-batch (``partitions``: Spark's one long-lived source process per query, on the driver), which
keeps each partition's generator between batches; the planned partitions carry the generated
rows to the executors. (Generating in ``read`` on the executors looked cheaper, but a task lands
on whichever Python worker is free, and a worker that had not served the partition before had to
regenerate its whole history: per-batch time grew with the length of the run.) After a restart
the prefix is regenerated once.  The generator's shadow partition is stepped without a checker and
its parsed steps are cached (``emulator.workload``): about half the cost per step of a full replay,
and a fraction of its memory.  With two read tasks or more the source process hands the work to
generator processes it forks once (``GENERATOR_PROCESSES``, one per core up to 4), each owning the
same read tasks for the query's life, so a batch is generated on every core of the driver and
no partition's generator ever moves.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

from emulator.workload import Profile, partition_header, profile_from_mapping, profile_to_mapping, step_bursts

from .schemas import EVENT_DDL, HEADER_TYPE

# Generated partitions per task of the read stage: each task only decodes the rows planned for it,
# so a few large tasks cost less than many small ones (64 made 157 tasks a batch at 10,000 partitions).
PARTITIONS_PER_TASK = 500

# Per process (the query's source process): (seed, profile spec, k) -> [bursts, buffered steps, seq before the first buffered one]
_GENERATORS: dict[tuple, list] = {}


def workload_options(profile: Profile, seed: int, partitions: int, steps_per_batch: int = 20,
                     max_steps: int | None = None) -> dict:
    """The source's options (``replemu stream --workload``), the profile itself included as JSON."""
    return {"seed": seed, "profile": profile.name, "partitions": partitions, "steps_per_batch": steps_per_batch,
            "max_steps": max_steps, "profile_spec": json.dumps(profile_to_mapping(profile), sort_keys=True)}


def _profile(name: str, spec: str) -> Profile:
    return profile_from_mapping(name, json.loads(spec))


def _steps(seed: int, profile: Profile, spec: str, k: int, first: int, last: int) -> list[dict]:
    """Steps ``first..last`` (seq numbers) of generated partition ``k``.

    The process keeps each partition's generator and only the steps from the batch it last
    served on (batches move forward, so an endless stream holds a bounded buffer); a request for
    an earlier batch (a replay after a restart) regenerates the prefix.
    """
    if last < first:
        return []
    key = (seed, spec, k)
    entry = _GENERATORS.get(key)
    if entry is None or first - 1 < entry[2]:
        entry = _GENERATORS[key] = [step_bursts(seed, k, profile), [], 0]
    bursts, buffered, before = entry
    while before + len(buffered) < last:
        buffered.extend(next(bursts))
    steps = buffered[first - 1 - before:last - before]
    del buffered[:first - 1 - before]  # forget the batches already served
    entry[2] = first - 1
    return steps


def _chunk_rows(seed: int, profile: Profile, spec: str, partitions_n: int, b: int, first: int, last: int, k0: int) -> str:
    """The rows of read task ``k0`` (partitions ``k0 .. k0 + PARTITIONS_PER_TASK - 1``) of batch ``b``
    (seq ``first..last``; batch 0 also the headers), as the JSON its ``InputPartition`` carries."""
    rows = []
    for k in range(k0, min(k0 + PARTITIONS_PER_TASK, partitions_n)):
        header = partition_header(seed, k, profile)
        topic = header["topic"]
        if b == 0:
            args = {"scenario": header["name"], "replicas": header["replicas"], "config": header["config"]}
            rows.append((topic, k, 0, HEADER_TYPE, json.dumps(args)))
        steps = _steps(seed, profile, spec, k, first, last)
        for seq, step in enumerate(steps, start=first):
            (kind, args), = step.items()
            rows.append((topic, k, seq, kind, json.dumps(args)))
    return json.dumps(rows)


def _plan(request: tuple, owner: int | None = None, owners: int = 1) -> list[tuple[int, int, str]]:
    """``(b, k0, rows)`` of every read task of batches ``start..end - 1`` (of the tasks that
    generator process ``owner`` of ``owners`` keeps, when given)."""
    seed, name, spec, partitions_n, steps_per_batch, max_steps, start, end = request
    profile = _profile(name, spec)
    out = []
    for b in range(start, end):
        first, last = b * steps_per_batch + 1, (b + 1) * steps_per_batch
        if max_steps is not None:
            last = min(last, max_steps)
        for task, k0 in enumerate(range(0, partitions_n, PARTITIONS_PER_TASK)):
            if owner is None or task % owners == owner:
                out.append((b, k0, _chunk_rows(seed, profile, spec, partitions_n, b, first, last, k0)))
    return out


# Generator processes: the source process forks them at its first batch with two read tasks or
# more, and each keeps the generators of the tasks it owns (task i: process i mod n) for the
# query's life, so a batch is generated on n cores at once and every partition's generator stays
# where it was (a process that had not served a partition would regenerate its whole history).
# They end with the source process: when their pipe closes, or within a second of it being gone.
GENERATOR_PROCESSES = max(1, min(4, os.cpu_count() or 1))
_WORKERS: list = []


def _serve(conn, owner: int, owners: int, inherited: list) -> None:
    """A generator process: plan requests in, its tasks' rows out, until the source process is gone."""
    for c in inherited:  # the source process's ends of every pipe: held here, they would never close
        c.close()
    source = os.getppid()
    while True:
        try:
            while not conn.poll(1.0):
                if os.getppid() != source:
                    return
            request = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(("ok", _plan(request, owner, owners)))
        except Exception as exc:  # the source process raises it (the query fails, as in-process)
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


def _workers(n: int) -> list:
    if not _WORKERS:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        for owner in range(n):
            parent, child = ctx.Pipe()
            inherited = [c for _, c in _WORKERS] + [parent]
            proc = ctx.Process(target=_serve, args=(child, owner, n, inherited), daemon=True,
                               name=f"replemu-generator-{owner}")
            proc.start()
            child.close()
            _WORKERS.append((proc, parent))
    return _WORKERS


def _plan_everywhere(request: tuple) -> list[tuple[int, int, str]]:
    """``_plan(request)``, by the generator processes when the batch has two read tasks or more."""
    tasks = -(-request[3] // PARTITIONS_PER_TASK)
    if GENERATOR_PROCESSES < 2 or tasks < 2:
        return _plan(request)
    workers = _workers(min(GENERATOR_PROCESSES, tasks) if not _WORKERS else len(_WORKERS))
    for _, conn in workers:
        conn.send(request)
    out = []
    for proc, conn in workers:
        status, value = conn.recv()
        if status != "ok":
            raise RuntimeError(f"workload generator process {proc.name}: {value}")
        out.extend(value)
    return sorted(out, key=lambda t: (t[0], t[1]))


class WorkloadDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "replemu_workload"

    def schema(self) -> str:
        return EVENT_DDL

    def streamReader(self, schema) -> "WorkloadStreamReader":
        return WorkloadStreamReader(self.options)


class WorkloadStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.seed = int(options["seed"])
        self.profile = options["profile"]
        self.profile_spec = options["profile_spec"]
        self.partitions_n = int(options["partitions"])
        self.steps_per_batch = int(options.get("steps_per_batch", 20))
        self.max_steps = int(options["max_steps"]) if options.get("max_steps") else None
        self.target: int | None = None

    def _last_batch(self) -> int | None:
        if self.max_steps is None:
            return None
        return -(-self.max_steps // self.steps_per_batch)

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def getDefaultReadLimit(self):
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        last = self._last_batch()
        if last is None:
            raise ValueError("an available-now run of a workload stream needs max_steps (--max-steps)")
        self.target = last

    def latestOffset(self, start: dict, limit) -> dict:
        """One more micro-batch per call, up to ``max_steps`` (or the available-now target)."""
        nxt = start["batch"] + 1
        cap = self.target if self.target is not None else self._last_batch()
        return {"batch": nxt if cap is None or nxt <= cap else start["batch"]}

    def reportLatestOffset(self):
        last = self._last_batch()
        return None if last is None else {"batch": last}

    def partitions(self, start: dict, end: dict):
        """The micro-batch's rows, generated here (see the module note), in tasks of
        ``PARTITIONS_PER_TASK`` partitions."""
        request = (self.seed, self.profile, self.profile_spec, self.partitions_n, self.steps_per_batch, self.max_steps,
                   start["batch"], end["batch"])
        return [InputPartition(rows) for _, _, rows in _plan_everywhere(request)]

    def read(self, partition) -> Iterator[tuple]:
        for row in json.loads(partition.value):
            yield tuple(row)

    def commit(self, end: dict) -> None:
        pass


def register(spark) -> None:
    spark.dataSource.register(WorkloadDataSource)



