"""A replay's whole state as plain data, and back: for checkpoints between micro-batches.

``to_document(replay)`` returns a JSON-compatible dict (ints, strings, bools, None, lists, dicts
with string keys) holding everything ``Replay.apply`` reads: the controller, every replica
(log, HW, checkpoints, cache, believed leader and epoch, leader-only state, pending
LeaderAndIsr requests) and the checker's ghost state (under ``oracle``).  ``from_document``
rebuilds a replay that continues exactly as the original would have.  Outputs already reported
(errors, violations, losses) are not state: only the names of violated invariants and the
losses already reported are kept, so nothing is reported twice.

Version ``STATE_VERSION`` is written into every document; a document of another version is
refused rather than misread.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from .checker import AckInfo
from .config import Config
from .epoch_cache import LeaderEpochCache
from .log import Log
from .replica import (
    AlterPartitionRequest,
    FetchState,
    LeaderAndIsrRequest,
    LeaderState,
    PendingAck,
    Replica,
    Role,
)
from .run import Replay
from .variants import VARIANT_TABLE

STATE_VERSION = 2  # 2: knobs recorded; lag state without since_ms


class StateVersionError(ValueError):
    pass


def _int_keys(d: dict[str, Any]) -> dict[int, Any]:
    return {int(k): v for k, v in d.items()}


def _str_keys(d: dict[int, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in sorted(d.items())}


def _request(q: LeaderAndIsrRequest) -> list:
    return [q.leader, q.leader_epoch, list(q.isr), q.partition_epoch] + ([list(q.replicas)] if q.replicas else [])


def _leadership(ls: LeaderState | None) -> dict | None:
    if ls is None:
        return None
    return {
        "generation": ls.generation, "isr": list(ls.isr),
        "partition_epoch": ls.partition_epoch, "epoch_start_offset": ls.epoch_start_offset,
        "remote_leo": _str_keys(ls.remote_leo), "last_caught_up_ms": _str_keys(ls.last_caught_up_ms),
        "last_fetch_leader_leo": _str_keys(ls.last_fetch_leader_leo), "last_fetch_ms": _str_keys(ls.last_fetch_ms),
        "pending_acks": [[a.step, a.first_offset, a.last_offset] for a in ls.pending_acks],
        "highest_hw": ls.highest_hw,
        **_kraft_leadership(ls),
    }


def _kraft_leadership(ls: LeaderState) -> dict[str, Any]:
    """KRaft-era leader state, written only when it holds something (older documents read the same)."""
    d: dict[str, Any] = {}
    if any(e != -1 for e in ls.remote_broker_epoch.values()):
        d["remote_broker_epoch"] = _str_keys(ls.remote_broker_epoch)
    q = ls.in_flight
    if q is not None:
        d["in_flight"] = [q.leader, q.leader_epoch, q.partition_epoch, list(q.isr), [list(x) for x in q.added_broker_epochs], q.why]
        if q.rejected:
            d["in_flight"].append(q.rejected)
    return d


HEADER_KEYS = ("state_version", "protocol", "knobs", "assignment", "brokers", "config")  # brokers: only when the scenario has others


def _config_document(config: Config) -> dict[str, Any]:
    """The config as ``Config`` holds it (acks included); ``alter_partition`` only when set, so
    the states of partitions that never set it read as they did before it existed."""
    d = {**asdict(config), "knobs": [list(kv) for kv in config.knobs]}
    if config.alter_partition == "every_step":
        del d["alter_partition"]
    return d


def header_document(replay: Replay) -> dict[str, Any]:
    """The part of a document no step changes: version, protocol and knobs, assignment, config."""
    p = replay.partition
    extra = [b for b in p.replicas if b not in p.controller.assignment]  # the scenario's other brokers
    return {
        "state_version": STATE_VERSION,
        "protocol": p.variant.name,
        "knobs": p.variant.knobs(),
        "assignment": list(p.controller.assignment),  # the scenario's order (a reassignment's is the controller's)
        **({"brokers": extra} if extra else {}),
        "config": _config_document(p.config),
    }


def to_document(replay: Replay) -> dict[str, Any]:
    return {**header_document(replay), **state_document(replay)}


def state_document(replay: Replay) -> dict[str, Any]:
    """The part of a document steps change: the controller, the replicas, the checker's ghost state."""
    p, o = replay.partition, replay.checker
    c = p.controller
    kraft = p.variant.metadata == "kraft"
    replicas = []
    for rid in p.replicas:  # every broker: the scenario's replicas first
        r = p.replicas[rid]
        replicas.append({
            "id": r.id, "log": [[e, v] for e, v in r.log.retained()], "log_start": r.log.start,
            "log_before": None if r.log.before is None else list(r.log.before), "hw": r.hw, "hw_checkpoint": r.hw_checkpoint,
            "recovery_point": r.recovery_point, "cache": r.cache.as_pairs(), "alive": r.alive, "halted": r.halted,
            "role": r.role.value, "believed_leader": r.believed_leader, "leader_epoch": r.leader_epoch,
            "partition_epoch": r.partition_epoch,
            "fresh_after_restart": r.fresh_after_restart, "processed_leader_and_isr": r.processed_leader_and_isr,
            "fetch_state": None if r.fetch_state is None else r.fetch_state.value, "pending_requests": [_request(q) for q in r.pending_requests],
            "last_response_hw": r.last_response_hw, "leadership": _leadership(r.leadership),
        })
        if kraft:
            replicas[-1].update(broker_epoch=r.broker_epoch, clean_shutdown_epoch=r.clean_shutdown_epoch)
    cursor = o.loss_cursor
    return {
        "now_ms": p.now_ms, "step_number": p.step_number, "generation": p.generation,
        "compacted_offset": p.compacted_offset, "prefix_digest": p.prefix_digest,
        "violated": sorted(o.violated),
        "controller": {
            "leader": c.leader, "leader_epoch": c.leader_epoch, "isr": list(c.isr),
            "partition_epoch": c.partition_epoch, "highest_epoch": c.highest_epoch,
            **({"elr": list(c.elr), "last_known_elr": list(c.last_known_elr), "fenced": list(c.fenced),
                "broker_epochs": _str_keys(c.broker_epochs), "next_broker_epoch": c.next_broker_epoch,
                "log_info": {str(k): list(v) for k, v in sorted(c.log_info.items())}} if kraft else {}),
            **({"shutting_down": list(c.shutting_down)} if c.shutting_down else {}),
            **({"lagging": list(c.lagging)} if c.lagging else {}),
            **({"replicas": list(p.assignment)} if p.assignment != c.assignment else {}),
            **({"adding": list(c.adding)} if c.adding else {}),
            **({"removing": list(c.removing)} if c.removing else {}),
        },
        "replicas": replicas,
        "oracle": {
            "committed": [[e, v] for e, v in o.committed.retained()],
            "committed_start": o.committed.start,
            "committed_before": None if o.committed.before is None else list(o.committed.before),
            "committed_twice": [[off, e, v] for off, (e, v) in o.committed_twice],
            "acked": [[off, e, v, a.step, sorted(a.holders), a.lost_by_power] for (off, (e, v)), a in o.acked.items()],
            "unclean_election": o.unclean_election, "faultless": o.faultless,
            "pair_mismatch": [[a, b, mm] for (a, b), mm in sorted(o.pair_mismatch.items())],
            "committed_mismatch": _str_keys(o.committed_mismatch_of),
            "presumer_covered": _str_keys(o.presumer_covered),
            "reported_losses": sorted([off, e, v] for off, (e, v) in o.reported_losses),
            "loss_cursor": None if cursor is None else [list(cursor[0]), cursor[1], cursor[2]],
            **({"suspects": sorted(o.suspects)} if o.suspects else {}),
            **({"lossy_shutdowns": o.lossy_shutdowns} if o.lossy_shutdowns else {}),
        },
    }


def from_document(doc: dict[str, Any], like: Replay | None = None) -> Replay:
    """The replay a document describes.  ``like``: a replay of the same partition, whose
    assignment, config and variant are taken instead of the document's header (which may then
    be absent): a search rebuilds many states of one partition."""
    if like is None:
        if doc.get("state_version") != STATE_VERSION:
            raise StateVersionError(f"partition state version {doc.get('state_version')!r}, this build reads {STATE_VERSION}")
        config = doc["config"]
        config = Config(**{**config, "knobs": tuple((k, v) for k, v in config.get("knobs", ()))})
        replay = Replay(tuple(doc["assignment"]), config, VARIANT_TABLE.named(doc["protocol"], doc["knobs"]),
                        brokers=tuple(doc.get("brokers", ())))
    else:
        lp = like.partition
        replay = Replay(lp.controller.assignment, lp.config, lp.variant, like.checker.judging,
                        tuple(b for b in lp.replicas if b not in lp.controller.assignment))
    p, o = replay.partition, replay.checker
    p.now_ms, p.step_number, p.generation = doc["now_ms"], doc["step_number"], doc["generation"]
    p.compacted_offset, p.prefix_digest = doc["compacted_offset"], doc["prefix_digest"]
    o.violated = set(doc["violated"])
    c = doc["controller"]
    ctl = p.controller
    ctl.leader, ctl.leader_epoch, ctl.isr = c["leader"], c["leader_epoch"], tuple(c["isr"])
    ctl.partition_epoch, ctl.highest_epoch = c["partition_epoch"], c["highest_epoch"]
    if "broker_epochs" in c:
        ctl.elr, ctl.last_known_elr, ctl.fenced = tuple(c["elr"]), tuple(c["last_known_elr"]), tuple(c["fenced"])
        ctl.broker_epochs, ctl.next_broker_epoch = _int_keys(c["broker_epochs"]), c["next_broker_epoch"]
        ctl.log_info = {int(k): (v[0], v[1]) for k, v in c["log_info"].items()}
    ctl.shutting_down = tuple(c.get("shutting_down", ()))
    ctl.lagging = tuple(c.get("lagging", ()))
    p.assignment = tuple(c["replicas"]) if "replicas" in c else ctl.assignment
    ctl.replicas = () if p.assignment == ctl.assignment else p.assignment
    ctl.adding, ctl.removing = tuple(c.get("adding", ())), tuple(c.get("removing", ()))
    for d in doc["replicas"]:
        r: Replica = p.replicas[d["id"]]
        r.log = Log(((e, v) for e, v in d["log"]), d["log_start"], None if d["log_before"] is None else tuple(d["log_before"]))
        r.hw, r.hw_checkpoint, r.recovery_point = d["hw"], d["hw_checkpoint"], d["recovery_point"]
        r.cache = LeaderEpochCache(p.variant.cache_semantics, d["cache"])
        r.alive, r.halted, r.role = d["alive"], d["halted"], Role(d["role"])
        r.believed_leader, r.leader_epoch, r.partition_epoch = d["believed_leader"], d["leader_epoch"], d["partition_epoch"]
        r.fresh_after_restart, r.processed_leader_and_isr = d["fresh_after_restart"], d["processed_leader_and_isr"]
        r.fetch_state = None if d["fetch_state"] is None else FetchState(d["fetch_state"])
        r.last_response_hw = d["last_response_hw"]
        r.pending_requests = [LeaderAndIsrRequest(q[0], q[1], tuple(q[2]), q[3], tuple(q[4]) if len(q) > 4 else ())
                              for q in d["pending_requests"]]
        if "broker_epoch" in d:
            r.broker_epoch, r.clean_shutdown_epoch = d["broker_epoch"], d["clean_shutdown_epoch"]
        ls = d["leadership"]
        r.leadership = None if ls is None else LeaderState(
            generation=ls["generation"], isr=tuple(ls["isr"]),
            partition_epoch=ls["partition_epoch"], epoch_start_offset=ls["epoch_start_offset"],
            remote_leo=_int_keys(ls["remote_leo"]), last_caught_up_ms=_int_keys(ls["last_caught_up_ms"]),
            last_fetch_leader_leo=_int_keys(ls["last_fetch_leader_leo"]), last_fetch_ms=_int_keys(ls["last_fetch_ms"]),
            pending_acks=[PendingAck(*a) for a in ls["pending_acks"]], highest_hw=ls["highest_hw"],
            remote_broker_epoch=_int_keys(ls["remote_broker_epoch"]) if "remote_broker_epoch" in ls
            else {f: -1 for f in _int_keys(ls["remote_leo"])},
            in_flight=None if ls.get("in_flight") is None else AlterPartitionRequest(
                ls["in_flight"][0], ls["in_flight"][1], ls["in_flight"][2], tuple(ls["in_flight"][3]),
                tuple((a, b) for a, b in ls["in_flight"][4]), ls["in_flight"][5], *ls["in_flight"][6:]),
        )
    g = doc["oracle"]
    o.committed = Log(((e, v) for e, v in g["committed"]), g["committed_start"],
                      None if g["committed_before"] is None else tuple(g["committed_before"]))
    o.committed_twice = [(off, (e, v)) for off, e, v in g["committed_twice"]]
    o.committed_twice_set = set(o.committed_twice)
    o.acked = {(off, (e, v)): AckInfo(step, frozenset(holders), lost) for off, e, v, step, holders, lost in g["acked"]}
    o.unclean_election, o.faultless = g["unclean_election"], g["faultless"]
    o.pair_mismatch = {(a, b): mm for a, b, mm in g["pair_mismatch"]}
    o.committed_mismatch_of = _int_keys(g["committed_mismatch"])
    o.presumer_covered = _int_keys(g["presumer_covered"])
    o.reported_losses = {(off, (e, v)) for off, e, v in g["reported_losses"]}
    cur = g["loss_cursor"]
    o.loss_cursor = None if cur is None else (tuple(cur[0]), cur[1], cur[2])
    o.suspects = set(g.get("suspects", ()))
    o.lossy_shutdowns = g.get("lossy_shutdowns", 0)
    return replay


# -- copying a live replay ------------------------------------------------------------------------


def clone(replay: Replay) -> Replay:
    """An independent copy of a live replay: what ``from_document(to_document(replay))`` gives,
    without the detour through plain data (a search steps many children of one state).

    Scalar and immutable attributes (ints, strings, tuples, frozen requests, records) are
    shared; every container a step mutates is copied.  ``tests/test_explore.py`` checks the
    copy against the document round trip and its independence from the original.
    """
    return Replay.of(replay.partition.copy(), replay.checker.copy())
