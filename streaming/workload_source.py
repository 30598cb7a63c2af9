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
and a fraction of its memory.
"""

from __future__ import annotations

import json
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
        profile = _profile(self.profile, self.profile_spec)
        out = []
        for b in range(start["batch"], end["batch"]):
            first, last = b * self.steps_per_batch + 1, (b + 1) * self.steps_per_batch
            if self.max_steps is not None:
                last = min(last, self.max_steps)
            for k0 in range(0, self.partitions_n, PARTITIONS_PER_TASK):
                rows = []
                for k in range(k0, min(k0 + PARTITIONS_PER_TASK, self.partitions_n)):
                    header = partition_header(self.seed, k, profile)
                    topic = header["topic"]
                    if b == 0:
                        args = {"scenario": header["name"], "replicas": header["replicas"], "config": header["config"]}
                        rows.append((topic, k, 0, HEADER_TYPE, json.dumps(args)))
                    steps = _steps(self.seed, profile, self.profile_spec, k, first, last)
                    for seq, step in enumerate(steps, start=first):
                        (kind, args), = step.items()
                        rows.append((topic, k, seq, kind, json.dumps(args)))
                out.append(InputPartition(json.dumps(rows)))
        return out

    def read(self, partition) -> Iterator[tuple]:
        for row in json.loads(partition.value):
            yield tuple(row)

    def commit(self, end: dict) -> None:
        pass


def register(spark) -> None:
    spark.dataSource.register(WorkloadDataSource)



