"""``/metrics`` of ``replemu serve``: the stream's outputs in the Prometheus text format.

Every scrape reads the runs under the served directory (the same readers the dashboard uses) and
reports, per run (labels ``run`` and ``protocol``):

=====================================  =======  ==============================================
``replemu_micro_batches_total``        counter  micro-batches whose progress landed
``replemu_steps_applied_total``        counter  events the job applied: per partition the step
                                                count of its latest summary, summed (what the
                                                job applied, not Spark's ``numInputRows``, which
                                                counts re-read rows again when tasks re-run)
``replemu_partitions``                 gauge    partitions the job has seen
``replemu_quarantined_rows_total``     counter  bad event rows sent to the quarantine output
``replemu_violations_total``           counter  first violations per invariant (label
                                                ``invariant``): partitions that broke it
``replemu_last_batch_duration_seconds`` gauge   the last landed micro-batch's duration
``replemu_state_bytes``                gauge    the state store's size after the last batch
``replemu_last_batch_timestamp_seconds`` gauge  when the last micro-batch started (Unix time)
=====================================  =======  ==============================================
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterable

PREFIX = "replemu"


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_numbers(reader) -> dict[str, Any]:
    """One run's numbers, from the dashboard's reader of its output directory."""
    batches = reader.batches()
    overview = reader.overview()
    landed = [b for b in batches if b["landed"]]
    last = landed[-1] if landed else None
    steps = sum(int(p.get("steps") or 0) for p in overview.get("partitions", []))
    violations = {name: int(m["partitions"]) for name, m in overview.get("matrix", {}).items() if m.get("partitions")}
    return {
        "protocol": reader.meta().get("protocol") or "",
        "micro_batches": len(landed),
        "steps_applied": steps,
        "partitions": len(overview.get("partitions", [])),
        "quarantined": int(overview.get("quarantined") or 0),
        "violations": violations,
        "duration": None if last is None else last["duration_s"],
        "state_bytes": None if last is None else last["state_bytes"],
        "timestamp": None if last is None else _timestamp(last["timestamp"]),
    }


class RunsCollector:
    """A ``prometheus_client`` collector over ``readers()`` (read at every scrape)."""

    def __init__(self, readers: Callable[[], Iterable[Any]]) -> None:
        self.readers = readers

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = ["run", "protocol"]
        batches = CounterMetricFamily(f"{PREFIX}_micro_batches", "Micro-batches whose progress landed", labels=labels)
        steps = CounterMetricFamily(f"{PREFIX}_steps_applied", "Events the job applied (per partition, its latest step count)",
                                    labels=labels)
        partitions = GaugeMetricFamily(f"{PREFIX}_partitions", "Partitions the job has seen", labels=labels)
        quarantined = CounterMetricFamily(f"{PREFIX}_quarantined_rows", "Bad event rows sent to the quarantine output",
                                          labels=labels)
        violations = CounterMetricFamily(f"{PREFIX}_violations", "Partitions that broke each invariant",
                                         labels=labels + ["invariant"])
        duration = GaugeMetricFamily(f"{PREFIX}_last_batch_duration_seconds", "The last micro-batch's duration",
                                     labels=labels)
        state = GaugeMetricFamily(f"{PREFIX}_state_bytes", "The state store's size after the last micro-batch",
                                  labels=labels)
        stamp = GaugeMetricFamily(f"{PREFIX}_last_batch_timestamp_seconds", "When the last micro-batch started",
                                  labels=labels)
        for reader in self.readers():
            n = run_numbers(reader)
            values = [reader.run_id, n["protocol"]]
            batches.add_metric(values, n["micro_batches"])
            steps.add_metric(values, n["steps_applied"])
            partitions.add_metric(values, n["partitions"])
            quarantined.add_metric(values, n["quarantined"])
            for name, count in sorted(n["violations"].items()):
                violations.add_metric(values + [name], count)
            for family, key in ((duration, "duration"), (state, "state_bytes"), (stamp, "timestamp")):
                if n[key] is not None:
                    family.add_metric(values, n[key])
        yield from (batches, steps, partitions, quarantined, violations, duration, state, stamp)


def exposition(readers: Callable[[], Iterable[Any]]) -> tuple[bytes, str]:
    """The Prometheus text of every run, and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunsCollector(readers))
    return generate_latest(registry), CONTENT_TYPE_LATEST
