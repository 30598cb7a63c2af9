"""Durability and faults (Kafka's ``Log`` recovery point, ``LogLoader``, the HW checkpoint):
what a crash loses, what a restart finds, and the explicit flush / checkpoint steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .effects import CacheChanged, PowerLoss
from .leader import stop_leading
from .log import cut
from .replica import Replica, Role
from .step_table import CrashMode
from .steps import CheckpointHw, Crash, Flush, Restart, Shutdown

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .partition import Partition


def end_of_step(p: "Partition") -> None:
    """§E.4: with every_step, every live replica checkpoints its HW and flushes its log."""
    config = p.config
    checkpoint, flush = config.hw_checkpoint == "every_step", config.log_flush == "every_step"
    if not (checkpoint or flush):
        return
    for r in p.replicas.values():
        if not r.alive:
            continue
        if checkpoint:
            r.hw_checkpoint = r.hw
        if flush:
            r.recovery_point = r.log.end


def checkpoint_hw(p: "Partition", step: CheckpointHw) -> None:
    if step.replica is None:
        for r in p.replicas.values():
            if r.alive:
                r.hw_checkpoint = r.hw
        return
    rep = p.replicas[step.replica]
    if not rep.alive:
        p.error("REPLICA_NOT_AVAILABLE")
        return
    rep.hw_checkpoint = rep.hw


def flush(p: "Partition", step: Flush) -> None:
    rep = p.replicas[step.replica]
    if not rep.alive:
        p.error("REPLICA_NOT_AVAILABLE")
        return
    offset = rep.leo if step.offset is None else min(step.offset, rep.leo)
    if offset < rep.log.start:
        p.error("BELOW_COMPACTED_PREFIX")
        offset = rep.log.start
    rep.recovery_point = offset


def lose_memory(p: "Partition", rep: Replica) -> None:
    """A stopped broker forgets everything that was only in memory (§E.2)."""
    stop_leading(p, rep, answer="REQUEST_TIMED_OUT")
    rep.role, rep.believed_leader, rep.leader_epoch, rep.partition_epoch = Role.NONE, None, -1, -1
    rep.fetch_state, rep.pending_requests, rep.last_response_hw = None, [], None
    p.controller.log_info.pop(rep.id, None)  # a GetReplicaLogInfo answer no longer holds
    if p.controller.leader == rep.id and p.variant.metadata != "kraft":
        p.controller.leader = None  # no epoch bump, ISR unchanged (KRaft: the controller learns it by fencing)


def crash(p: "Partition", step: Crash) -> None:
    rep = p.replicas[step.replica]
    if rep.alive:
        lose_memory(p, rep)
        rep.alive = False
        p.event("Crash", replica=rep.id, mode=CrashMode(step.mode).value)
    elif step.mode is CrashMode.PROCESS:
        p.error("REPLICA_NOT_AVAILABLE")
        return
    if step.mode is CrashMode.POWER and rep.recovery_point < rep.leo:
        # Any unflushed suffix may be lost; the emulator loses all of it.
        before = rep.leo
        p.effect(PowerLoss(rep.id, rep.recovery_point, tuple(rep.log[rep.recovery_point:before])))
        cut(p, rep, rep.recovery_point)
        p.event("PowerLoss", replica=rep.id, from_leo=before, to=rep.leo)


def restart(p: "Partition", step: Restart) -> None:
    rep = p.replicas[step.replica]
    if rep.alive:
        p.error("REPLICA_ALREADY_RUNNING")
        return
    rep.alive, rep.halted = True, False
    rep.hw = min(rep.hw_checkpoint, rep.leo)
    rep.recovery_point = min(rep.recovery_point, rep.leo)
    if rep.cache.truncate_from_end(rep.leo):
        p.effect(CacheChanged(rep.id, rep.cache.changed_from(len(rep.cache))))
    rep.fresh_after_restart = True
    rep.processed_leader_and_isr = False
    current = p.controller.current_request()
    rep.pending_requests = [current] if current is not None else []
    p.event("Restart", replica=rep.id, hw=rep.hw, leo=rep.leo)


def shutdown(p: "Partition", step: Shutdown) -> None:
    """A clean shutdown (KRaft's controlled shutdown runs first: ``kraft.shutdown``): the broker
    flushes its log, checkpoints its HW, writes its broker epoch to the clean-shutdown file and
    stops (a later power failure loses nothing: everything is flushed)."""
    rep = p.replicas[step.replica]
    if not rep.alive:
        p.error("REPLICA_NOT_AVAILABLE")
        return
    rep.recovery_point = rep.log.end
    rep.hw_checkpoint = rep.hw
    if rep.broker_epoch >= 0:  # KRaft: the broker epoch of its registration
        rep.clean_shutdown_epoch = rep.broker_epoch
    lose_memory(p, rep)
    rep.alive = False
    p.event("Shutdown", replica=rep.id, broker_epoch=rep.broker_epoch)
