"""Replaying a scenario under a variant and building the contract's result object (§3)."""

from __future__ import annotations

import json
from typing import Any

from .partition import LEADER, Partition
from .scenario import Scenario, describe_step, step_to_dict
from .variants import VARIANTS

RESULT_FORMAT = 1


def controller_snapshot(p: Partition) -> dict[str, Any]:
    c = p.controller
    return {"leader": c.leader, "epoch": c.leader_epoch, "isr": sorted(c.isr)}


def replica_snapshot(p: Partition, rid: int, with_log: bool = True) -> dict[str, Any]:
    """One replica in the contract's ``final`` shape (``log`` omitted when ``with_log`` is False)."""
    r = p.replicas[rid]
    remote = None
    if r.role == LEADER and r.alive:
        remote = {str(f): r.leadership.remote_leo[f] for f in sorted(r.leadership.remote_leo)}
    snap = {
        "alive": r.alive,
        "halted": r.halted,
        "role": r.role,
        "leader_epoch": r.leader_epoch,
        "leo": r.leo,
        "hw": r.hw,
        "log": [[o, e, v] for o, (e, v) in r.log.items()] if with_log else None,
        "epoch_cache": r.cache.as_pairs(),
        "remote_leo": remote,
    }
    if not with_log:
        del snap["log"]
    return snap


def state_snapshot(p: Partition) -> dict[str, Any]:
    return {
        "controller": controller_snapshot(p),
        "replicas": {str(rid): replica_snapshot(p, rid) for rid in sorted(p.replicas)},
    }


def run_scenario(scenario: Scenario, protocol: str, trace: bool = False, initial_dirs: list[str] | None = None,
                 initial_files: list | None = None) -> dict[str, Any]:
    """Replay every step of ``scenario`` under ``protocol``; return the result object.

    ``initial_dirs`` (or the scenario's ``initial_state``) are Kafka replica directories the
    replicas start from instead of empty logs; ``initial_files`` are such directories already
    read (``kafka_logs.read_initial_state``), for callers replaying one state several times.
    """
    partition = Partition(scenario.replicas, scenario.config, VARIANTS[protocol])
    dirs = initial_dirs or ([scenario.initial_state] if scenario.initial_state else None)
    if initial_files is not None or dirs:
        from .kafka_logs import read_initial_state, seed_partition

        seed_partition(partition, initial_files if initial_files is not None else read_initial_state(dirs))
    steps_trace = []
    for step in scenario.steps:
        outcome = partition.apply(step)
        if trace:
            steps_trace.append({
                "step": outcome.step,
                "event": step_to_dict(step),
                "description": describe_step(step),
                "outcome": {"errors": outcome.errors, "events": outcome.events, "violations": outcome.violations},
                **state_snapshot(partition),
            })
    end_violations = partition.finish()
    if trace and steps_trace:
        steps_trace[-1]["outcome"]["violations"] = steps_trace[-1]["outcome"]["violations"] + end_violations
    result: dict[str, Any] = {
        "format": RESULT_FORMAT,
        "scenario": scenario.name,
        "protocol": protocol,
        "steps": len(scenario.steps),
        "final": state_snapshot(partition),
        "violations": partition.violations,
        "losses": partition.oracle.losses,
        "errors": partition.errors,
    }
    if partition.compacted_offset:
        result["compacted_prefix"] = compacted_prefix(partition)
    if trace:
        result["trace"] = steps_trace
    return result


def compacted_prefix(p: Partition) -> dict[str, Any]:
    """Contract extension for compacted runs: logs start at ``offset``; ``digest`` covers the rest."""
    return {"offset": p.compacted_offset, "digest": p.prefix_digest}


def dumps(obj: Any) -> str:
    """The one JSON encoding used everywhere: stable key order, byte-identical across runs."""
    return json.dumps(obj, indent=2, ensure_ascii=False)
