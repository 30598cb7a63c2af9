"""A PySpark Python streaming data source of a generated workload: ``format("replemu_workload")``.

Options (``WorkloadSpec``, typed; ``to_options`` and ``from_options`` turn it into Spark's text
options and back): ``seed``, ``profile`` (its name), ``profile_spec`` (the profile itself as JSON,
so executors on any host need no files), ``partitions`` (N generated partitions),
``steps_per_batch`` (each micro-batch carries the next S steps of every partition, default 20),
``max_steps`` (per partition; without it the stream is endless under a processing-time trigger),
``generator`` (the generator's version).

Offsets are micro-batch numbers: batch b advances every partition to seq ``b*S+1 .. (b+1)*S``.
The source generates nothing: its rows are ticks (``TICK_TYPE``), one per partition and batch,
``{"first", "last"}`` (the partition's first tick also ``"start": {"seed", "profile", "spec"}``),
and the state function generates the steps where the partition's state lives
(``streaming.processor.expand_ticks``: the generator, ``emulator.workload.WorkloadGenerator``,
is kept in the state and checkpointed with it, so a restart resumes it and nothing is generated
twice).  The generated rows are exactly those this source used to produce itself (the header at
seq 0, then each step's ``type`` and ``args`` text), so the outputs are the same.

The driver plans only ranges: a read task is ``(first batch, end batch, first partition, end
partition)``, a few numbers, and ``read`` on the executor expands it into tick rows.  Nothing per
partition is kept on the driver.  (Before, the driver's source process generated every
partition's steps, in generator processes it forked, because generating in ``read`` would have
regenerated a partition's whole history on any Python worker that had not served it before: the
generator now travels with the partition's state instead.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

from emulator.workload import GENERATOR_VERSION, Profile, profile_to_mapping, workload_topic

from .schemas import EVENT_DDL, TICK_TYPE

# Generated partitions per read task: a task only writes one small row per partition, so a few
# tasks per batch are plenty.
PARTITIONS_PER_TASK = 500


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """A generated workload stream (``replemu stream --workload``): the driver builds one
    (``of``), the query hands it to the source as Spark's string options (``to_options``) and the
    source's reader reads it back (``from_options``), the one place each way; ``run.json`` records
    ``document()``.  ``profile_spec``: the profile itself as JSON (``profile_to_mapping``, keys
    sorted), so executors on any host need no files; ``generator``: the version of the generator
    that draws the steps (``GENERATOR_VERSION``: the run's identity names it)."""

    # In this order: run.json's "workload" object lists them so.
    seed: int
    profile: str
    partitions: int
    steps_per_batch: int = 20
    max_steps: int | None = None  # per partition; None: endless (under a processing-time trigger)
    profile_spec: str
    generator: int = GENERATOR_VERSION

    @classmethod
    def of(cls, profile: Profile, seed: int, partitions: int, steps_per_batch: int = 20,
           max_steps: int | None = None) -> "WorkloadSpec":
        return cls(seed=seed, profile=profile.name, partitions=partitions, steps_per_batch=steps_per_batch,
                   max_steps=max_steps, profile_spec=json.dumps(profile_to_mapping(profile), sort_keys=True))

    def to_options(self) -> dict[str, str]:
        """Spark's options of ``format("replemu_workload")``: every field set, as text."""
        return {name: str(value) for name, value in self.document().items() if value is not None}

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "WorkloadSpec":
        """The spec ``to_options`` wrote (Spark hands a source its options as text)."""
        return cls(seed=int(options["seed"]), profile=options["profile"], partitions=int(options["partitions"]),
                   steps_per_batch=int(options.get("steps_per_batch", 20)),
                   max_steps=int(options["max_steps"]) if options.get("max_steps") else None,
                   profile_spec=options["profile_spec"], generator=int(options.get("generator", GENERATOR_VERSION)))

    def document(self) -> dict[str, Any]:
        """The spec as JSON values (``run.json``'s ``workload``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def read_task(self, b0: int, b1: int, k0: int, k1: int) -> dict[str, Any]:
        """A read task (``tick_rows``): the ticks of partitions ``k0 .. k1 - 1`` in micro-batches ``b0 .. b1 - 1``."""
        return {"seed": self.seed, "profile": self.profile, "spec": self.profile_spec, "steps_per_batch": self.steps_per_batch,
                "max_steps": self.max_steps, "b0": b0, "b1": b1, "k0": k0, "k1": k1}


def batch_range(b: int, steps_per_batch: int, max_steps: int | None) -> tuple[int, int]:
    """The seq range ``(first, last)`` every partition advances to in micro-batch ``b``."""
    first, last = b * steps_per_batch + 1, (b + 1) * steps_per_batch
    return first, last if max_steps is None else min(last, max_steps)


def tick_rows(task: dict) -> Iterator[tuple]:
    """The rows of one read task (``WorkloadSpec.read_task``): a tick per partition
    ``k0 .. k1 - 1`` and batch ``b0 .. b1 - 1``."""
    topic = workload_topic(task["seed"], task["profile"])
    start = {"seed": task["seed"], "profile": task["profile"], "spec": json.loads(task["spec"])}
    for b in range(task["b0"], task["b1"]):
        first, last = batch_range(b, task["steps_per_batch"], task["max_steps"])
        if last < first:
            continue
        args = json.dumps({"first": first, "last": last, **({"start": start} if first == 1 else {})}, sort_keys=True)
        for k in range(task["k0"], task["k1"]):
            yield topic, k, first, TICK_TYPE, args


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
        self.spec = WorkloadSpec.from_options(options)
        self.target: int | None = None

    def _last_batch(self) -> int | None:
        if self.spec.max_steps is None:
            return None
        return -(-self.spec.max_steps // self.spec.steps_per_batch)

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
        """The micro-batch's read tasks: ranges of ``PARTITIONS_PER_TASK`` partitions (no rows)."""
        n = self.spec.partitions
        return [InputPartition(json.dumps(self.spec.read_task(start["batch"], end["batch"], k0, min(k0 + PARTITIONS_PER_TASK, n))))
                for k0 in range(0, n, PARTITIONS_PER_TASK)]

    def read(self, partition) -> Iterator[tuple]:
        yield from tick_rows(json.loads(partition.value))

    def commit(self, end: dict) -> None:
        pass


def register(spark) -> None:
    spark.dataSource.register(WorkloadDataSource)
