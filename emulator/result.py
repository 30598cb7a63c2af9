"""The run result of the contract (format 1): state snapshots, the result object, its one
serialiser, and the test that a JSON document is such a result."""

from __future__ import annotations

import json
from typing import Any

from .replica import Role
from .step_table import is_int as _is_int

RESULT_FORMAT = 1


class ResultFormatError(ValueError):
    pass


def _is_pairs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, list) for x in v)


# The fields of a result's state snapshots and losses, with the values each can hold: what an
# ``expect`` block may name (emulator.scenario validates those blocks against these tables).
REPLICA_FIELDS: dict[str, tuple[str, Any]] = {
    "alive": ("true or false", lambda v: isinstance(v, bool)),
    "halted": ("true or false", lambda v: isinstance(v, bool)),
    "role": ("one of leader, follower, none", lambda v: v in tuple(r.value for r in Role)),
    "leader_epoch": ("an int", _is_int),
    "leo": ("an int", _is_int),
    "hw": ("an int", _is_int),
    "log": ("a list of [offset, epoch, value]", _is_pairs),
    "epoch_cache": ("a list of [epoch, start_offset]", _is_pairs),
    "remote_leo": ("a map of replica id to LEO, or null", lambda v: v is None or isinstance(v, dict)),
}
CONTROLLER_FIELDS: dict[str, tuple[str, Any]] = {
    "leader": ("a replica id or null", lambda v: v is None or _is_int(v)),
    "epoch": ("an int", _is_int),
    "isr": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    # KRaft variants only (kip903, kip966): absent from the results of the ZooKeeper variants
    "elr": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "last_known_elr": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "fenced": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "in_controlled_shutdown": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "lagging_metadata": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "replicas": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "adding_replicas": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
    "removing_replicas": ("a list of replica ids", lambda v: isinstance(v, list) and all(_is_int(x) for x in v)),
}
LOSS_FIELDS: dict[str, tuple[str, Any]] = {
    "offset": ("an int", _is_int),
    "value": ("a string", lambda v: isinstance(v, str)),
    "acked": ("true or false", lambda v: isinstance(v, bool)),
    "allowed": ("true or false", lambda v: isinstance(v, bool)),
    "step": ("an int", _is_int),
}


def controller_snapshot(p) -> dict[str, Any]:
    c = p.controller
    snapshot = {"leader": c.leader, "epoch": c.leader_epoch, "isr": sorted(c.isr)}
    if p.variant.metadata == "kraft":
        snapshot.update(elr=list(c.elr), last_known_elr=list(c.last_known_elr), fenced=list(c.fenced))
        if c.shutting_down:  # only while a broker is in controlled shutdown
            snapshot["in_controlled_shutdown"] = list(c.shutting_down)
        if c.lagging:  # only while a broker lags the metadata log (lag_metadata)
            snapshot["lagging_metadata"] = list(c.lagging)
        if p.assignment != c.assignment:  # only once a reassignment changed the replica list
            snapshot["replicas"] = list(p.assignment)
        if c.adding:  # only while a reassignment adds replicas
            snapshot["adding_replicas"] = list(c.adding)
        if c.removing:  # only while a reassignment removes replicas
            snapshot["removing_replicas"] = list(c.removing)
    return snapshot


def replica_snapshot(p, rid: int, with_log: bool = True) -> dict[str, Any]:
    """One replica in the contract's ``final`` shape (``log`` omitted when ``with_log`` is False)."""
    r = p.replicas[rid]
    remote = None
    if r.presumes_leadership:
        remote = {str(f): r.leadership.remote_leo[f] for f in sorted(r.leadership.remote_leo)}
    snap = {
        "alive": r.alive,
        "halted": r.halted,
        "role": r.role.value if isinstance(r.role, Role) else r.role,
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


def state_snapshot(p, with_logs: bool = True) -> dict[str, Any]:
    return {
        "controller": controller_snapshot(p),
        "replicas": {str(rid): replica_snapshot(p, rid, with_log=with_logs) for rid in sorted(p.replicas)},
    }


def compacted_prefix(p) -> dict[str, Any]:
    """Contract extension for compacted runs: logs start at ``offset``; ``digest`` covers the rest."""
    return {"offset": p.compacted_offset, "digest": p.prefix_digest}


def result_object(scenario_name: str, protocol: str, steps: int, final: dict, violations: list, losses: list,
                  errors: list, compacted: dict | None = None, knobs: dict | None = None) -> dict[str, Any]:
    """The contract's result object, keys in the contract's order.  ``knobs`` (every knob in
    force) appears only when the run changed a knob of its variant's preset."""
    result: dict[str, Any] = {"format": RESULT_FORMAT, "scenario": scenario_name, "protocol": protocol}
    if knobs:
        result["knobs"] = knobs
    result.update({"steps": steps, "final": final, "violations": violations, "losses": losses, "errors": errors})
    if compacted:
        result["compacted_prefix"] = compacted
    return result


def not_expressible_result(scenario_name: str, protocol: str, step: int, description: str, reason: str,
                           family: str | None = None) -> dict[str, Any]:
    """The result of a variant that cannot take one of the scenario's steps (a ZooKeeper-era
    ``elect`` with an epoch under a KRaft variant): no verdict, no final state, only which step
    and why.  ``not_expressible_text`` is its one line for people."""
    result: dict[str, Any] = {"format": RESULT_FORMAT, "scenario": scenario_name, "protocol": protocol}
    if family is not None:
        result = {"scenario": scenario_name, "family": family, "protocol": protocol}
    result["not_expressible"] = {"step": step, "description": description, "reason": reason}
    return result


def not_expressible_text(result: dict[str, Any]) -> str:
    """``not expressible under kip903: step 14 (elect(1, e1, isr=[1])): elect sets …``."""
    n = result["not_expressible"]
    return f"not expressible under {result['protocol']}: step {n['step']} ({n['description']}): {n['reason']}"


def check_result_document(data: Any, source: str) -> list[dict[str, Any]]:
    """The result objects in a ``replemu run --json`` document (one object or an array)."""
    results = data if isinstance(data, list) else [data]
    if not results or not all(isinstance(r, dict) and r.get("format") == RESULT_FORMAT
                              and ("final" in r or isinstance(r.get("not_expressible"), dict)) for r in results):
        raise ResultFormatError(f"{source}: not a replemu result (format {RESULT_FORMAT})")
    for number, r in enumerate(results, start=1):
        where = f"{source}: result {number}" if len(results) > 1 else source
        if "final" not in r:  # a variant's "not expressible" answer: no state to read
            continue
        problem = _final_problem(r)
        if problem:
            raise ResultFormatError(f"{where}: {problem}")
    return results


def _is_record(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and _is_int(v[0]) and _is_int(v[1]) and isinstance(v[2], str)


def _final_problem(r: dict[str, Any]) -> str | None:
    """What makes a result's ``scenario`` and ``final`` unusable (its replicas, by the field table)."""
    if not isinstance(r.get("scenario"), str):
        return "scenario must be a string"
    final = r["final"]
    if not isinstance(final, dict) or not isinstance(final.get("replicas"), dict) or not final["replicas"]:
        return "final.replicas must be a map of replica id to replica"
    for rid, rep in final["replicas"].items():
        if not str(rid).isdigit() or not isinstance(rep, dict):
            return f"final.replicas: {str(rid)[:20]!r} must be a replica id with a map of fields"
        for name, (what, ok) in REPLICA_FIELDS.items():
            if name not in rep:
                return f"final.replicas.{rid}: missing {name}"
            if not ok(rep[name]):
                return f"final.replicas.{rid}.{name} must be {what}"
        if not all(_is_record(x) for x in rep["log"]):
            return f"final.replicas.{rid}.log: each record must be [offset, epoch, value]"
        if not all(len(x) == 2 and all(_is_int(y) for y in x) for x in rep["epoch_cache"]):
            return f"final.replicas.{rid}.epoch_cache: each entry must be [epoch, start_offset]"
    return None


def dumps(obj: Any) -> str:
    """The one JSON encoding of results: stable key order, byte-identical across runs."""
    return json.dumps(obj, indent=2, ensure_ascii=False)
