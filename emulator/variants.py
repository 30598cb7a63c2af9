"""Protocol variants as named presets of knobs (docs/protocol.md "Knobs").

The rules read only these knobs; no variant name is tested inside them.  ``KNOB_TABLE`` is the one
table of knobs: their values, meaning and the Kafka version and code each comes from.  It is
what ``--knob NAME=VALUE`` and a scenario's ``config.knobs`` are validated against, and what the
knob table of ``docs/protocol.md`` is generated from.  ``VARIANT_TABLE`` holds the presets; both
are tables of ``emulator.variant_table``, the mechanism the metadata quorum's variants share.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .variant_table import Knob, KnobError, KnobTable, Variant, VariantTable  # noqa: F401 (KnobError: read from here too)

_KNOBS = (
    Knob("trunc_rule", ("hw", "kip101", "kip279"),
         "how a new follower finds its truncation point: its own HW; one OffsetsForLeaderEpoch v0 round with HW "
         "fallback; the iterative epoch / end-offset exchange",
         "0.10.2 ReplicaManager.makeFollowers; 0.11 ReplicaFetcherThread.maybeTruncate (KIP-101); "
         "2.0 AbstractFetcherThread.getOffsetTruncationState (KIP-279)"),
    Knob("skip_if_same_leader", ("never", "same_leader", "same_leader_and_epoch_le_plus1", "same_epoch"),
         "when a LeaderAndIsr naming the follower's current leader skips the become-follower path (no truncation)",
         "Partition.makeFollower: same leader (0.10 - 2.0.0), epoch <= old + 1 (2.0.1, KAFKA-7164), "
         "same epoch only (2.1.0+); never = the TLA+ model"),
    Knob("assign_epoch_on_election", (False, True),
         "a new leader writes (epoch, LEO) into its epoch cache at election, not at its first append",
         "KAFKA-7415, 2.1.0 Partition.makeLeader"),
    Knob("isr_join_requires_epoch_start", (False, True),
         "a follower joins the ISR only once its LEO reaches the leader's epoch start offset",
         "KAFKA-7128, 2.1.0 Partition.maybeExpandIsr"),
    Knob("fencing", (False, True),
         "Fetch and OffsetsForLeaderEpoch carry the follower's epoch; only a leader in the same epoch answers "
         "(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH)",
         "KIP-320, KAFKA-7395, 2.1.0"),
    Knob("cache_semantics", ("v0", "v2"),
         "epoch cache assign: v0 ignores out-of-order epochs; v2 removes conflicting entries (newest wins)",
         "LeaderEpochFileCache.assign 0.11 - 2.0 vs 2.1+"),
    Knob("end_offset_for", ("v0", "v1", "v2"),
         "OffsetsForLeaderEpoch answer: v0 end offset only; v1 adds the epoch (KIP-279); v2 answers a request "
         "below the first cached epoch with (requested, first start)",
         "LeaderEpochFileCache.endOffsetFor 0.11, 2.0 (commit 9679c44), 2.1+"),
    Knob("undefined_truncates_to", ("hw", "fetch_offset"),
         "where an UNDEFINED answer in the truncation loop truncates: the HW, or the partition's current fetch "
         "offset (the HW in round 1, then the last intermediate truncation point)",
         "0.11 - 1.0 (one round, HW) vs 1.1+ / 2.0.0 AbstractFetcherThread (fetch offset)"),
    Knob("isr_shrink_exempts_leo_equal", (False, True),
         "maybeShrinkIsr keeps an ISR follower whose last fetch offset equals the leader's LEO, however long idle",
         "KAFKA-7152, 2.1.0 Partition.getOutOfSyncReplicas (commit 9a7f29c)"),
    Knob("reset_remote_leo_on_reelection", (False, True),
         "a leader re-elected with the same id forgets its followers' LEOs (Kafka's code forgets them only for a "
         "new leader)",
         "TLA+ Kip320.tla rule 3; Kafka: Partition.makeLeader 'if (isNewLeader)', ReplicaTest.testResetReplicaState*"),
    Knob("halt_on_out_of_range", (False, True),
         "OFFSET_OUT_OF_RANGE with unclean election disabled stops the follower's broker (else it truncates to the "
         "leader's LEO)",
         "ReplicaFetcherThread.handleOffsetOutOfRange 0.10 - 2.0; 2.1+ truncates"),
    Knob("controller_isr_change_bumps_epoch", (False, True),
         "the controller bumps the leader epoch when it removes a dead broker from the ISR",
         "ZooKeeper-mode KafkaController.removeReplicaFromIsr; TLA+ ControllerShrinkIsr"),
    Knob("strict_min_isr_hw", (False, True),
         "the HW does not advance while the ISR is below min.insync.replicas",
         "KIP-966 / KAFKA-15583 (3.7+ ELR)"),
    Knob("metadata", ("zookeeper", "kraft"),
         "kraft: brokers register with a broker epoch and are fenced / unfenced by the controller; only unfenced "
         "brokers are elected; a restart first fences the old registration (removing it from the ISR); the steps "
         "fence, unfence, log_info and lag_metadata exist only here",
         "KIP-500 / KIP-631, 3.3+: ClusterControlManager.registerBroker, ReplicationControlManager.handleBrokerFenced"),
    Knob("isr_excludes_ineligible", (False, True),
         "AlterPartition is rejected (INELIGIBLE_REPLICA) when its new ISR names a fenced, unregistered or "
         "shutting-down broker",
         "KIP-841, 3.3.0 ReplicationControlManager.validateAlterPartitionData (ineligibleReplicasForIsr)"),
    Knob("isr_expand_checks_broker_epoch", (False, True),
         "a fetch carries the follower's broker epoch; the leader's AlterPartition sends it for every replica it "
         "adds, and the controller rejects it (INELIGIBLE_REPLICA) if the broker registered again since",
         "KIP-903, 3.5.0 Partition.maybeExpandIsr / ReplicationControlManager (broker epoch mismatch)"),
    Knob("elr", (False, True),
         "Eligible Leader Replicas: removals that take the ISR below min.insync.replicas move members into the ELR "
         "(the ISR may become empty); a clean election takes the ISR, then the ELR when the ISR is empty; a broker "
         "registering without a clean-shutdown epoch leaves every ELR",
         "KIP-966, 3.7+ PartitionChangeBuilder.maybePopulateTargetElr; 3.8+ ReplicationControlManager.handleBrokerUncleanShutdown"),
    Knob("hw_ignores_ineligible", (False, True),
         "a caught-up follower outside the ISR holds the HW back only while it is eligible for the ISR (not fenced, "
         "not shutting down, and with isr_expand_checks_broker_epoch its last fetch carried its registered broker epoch)",
         "KAFKA-15021, 3.6.0 - 3.8.0 Partition.maybeIncrementLeaderHW (isReplicaIsrEligible)"),
    Knob("fetch_fences_stale_broker_epoch", (False, True),
         "a follower fetch carrying a broker epoch older than the registered one is answered NOT_LEADER_OR_FOLLOWER "
         "and updates nothing on the leader (not for a fenced follower: no alive broker epoch to compare)",
         "3.7.0 - 3.8.0 Replica.updateFetchStateOrThrow (stale fetch state update)"),
    Knob("unclean_recovery", ("manual", "last_known_leader", "balanced", "proactive"),
         "when no clean election is possible: manual waits for an operator's unclean election; last_known_leader "
         "elects the last leader once ISR and ELR are empty (Kafka's code); balanced asks every LastKnownELR member "
         "(GetReplicaLogInfo) and elects the highest (epoch, offset); proactive elects the best of any live replica's "
         "answer as soon as no ISR / ELR member is available",
         "KIP-966 unclean recovery (unclean.recovery.strategy); code: 3.7+ PartitionChangeBuilder.canElectLastKnownLeader"),
)
KNOB_TABLE = KnobTable(_KNOBS, "knob", f"the {len(_KNOBS)} knobs: docs/protocol.md §4, replemu run --help")
KNOBS: dict[str, Knob] = KNOB_TABLE.knobs


@dataclass(frozen=True, slots=True)
class ProtocolVariant(Variant):
    """One replication protocol: a name and the value of every knob of ``KNOB_TABLE``."""

    trunc_rule: str
    skip_if_same_leader: str
    assign_epoch_on_election: bool
    isr_join_requires_epoch_start: bool
    fencing: bool
    cache_semantics: str
    end_offset_for: str
    undefined_truncates_to: str
    isr_shrink_exempts_leo_equal: bool
    reset_remote_leo_on_reelection: bool
    halt_on_out_of_range: bool
    controller_isr_change_bumps_epoch: bool = True
    strict_min_isr_hw: bool = False
    metadata: str = "zookeeper"
    isr_excludes_ineligible: bool = False
    isr_expand_checks_broker_epoch: bool = False
    elr: bool = False
    hw_ignores_ineligible: bool = False
    fetch_fences_stale_broker_epoch: bool = False
    unclean_recovery: str = "manual"

    def knob_table(self) -> KnobTable:
        return KNOB_TABLE


HW = ProtocolVariant(
    name="hw",
    trunc_rule="hw",
    skip_if_same_leader="same_leader",
    assign_epoch_on_election=False,
    isr_join_requires_epoch_start=False,
    fencing=False,
    cache_semantics="v0",  # kept for the checker only; the protocol never reads it
    end_offset_for="v0",
    undefined_truncates_to="hw",  # no lookup at all
    isr_shrink_exempts_leo_equal=False,
    reset_remote_leo_on_reelection=False,
    halt_on_out_of_range=True,
)

# Each later variant changes only what its KIP changed, as the TLA+ modules EXTEND the base.
KIP101 = replace(HW, name="kip101", trunc_rule="kip101")  # one round: the fetch offset is the HW
KIP279 = replace(KIP101, name="kip279", trunc_rule="kip279", end_offset_for="v1", undefined_truncates_to="fetch_offset")
KIP320 = replace(
    KIP279,
    name="kip320",
    skip_if_same_leader="same_epoch",  # KAFKA-7164: truncate on every epoch change
    assign_epoch_on_election=True,  # KAFKA-7415
    isr_join_requires_epoch_start=True,  # KAFKA-7128
    fencing=True,  # KAFKA-7395
    cache_semantics="v2",
    end_offset_for="v2",
    isr_shrink_exempts_leo_equal=True,  # KAFKA-7152
    halt_on_out_of_range=False,  # the fetcher truncates to the leader's LEO instead
)

# KRaft, Kafka 3.5: the metadata log, KIP-841 and KIP-903.  Below metadata.version 3.6-IV0 the
# controller bumps the leader epoch on every ISR shrink, a leader's AlterPartition included
# (PartitionChangeBuilder.triggerLeaderEpochBumpIfNeeded; KAFKA-15021 removed it in 3.6).
KIP903 = replace(
    KIP320,
    name="kip903",
    metadata="kraft",
    isr_excludes_ineligible=True,  # KIP-841
    isr_expand_checks_broker_epoch=True,  # KIP-903
    controller_isr_change_bumps_epoch=True,
)
# KIP-966 Eligible Leader Replicas (3.7+ preview, 4.x) on top of 3.5, with the leader epoch no
# longer bumped on an ISR shrink (3.6+) and balanced unclean recovery (the KIP's default).
KIP966 = replace(
    KIP903,
    name="kip966",
    elr=True,
    strict_min_isr_hw=True,
    hw_ignores_ineligible=True,  # KAFKA-15021 (3.6)
    fetch_fences_stale_broker_epoch=True,  # 3.7
    controller_isr_change_bumps_epoch=False,
    unclean_recovery="balanced",
)

VARIANT_TABLE: VariantTable[ProtocolVariant] = VariantTable(KNOB_TABLE, (HW, KIP101, KIP279, KIP320, KIP903, KIP966),
                                                             "protocol variant")
VARIANTS: dict[str, ProtocolVariant] = VARIANT_TABLE.presets
VARIANT_NAMES: tuple[str, ...] = VARIANT_TABLE.names


@dataclass(frozen=True, slots=True)
class VariantDoc:
    """What a variant is, for people: the Kafka releases it stands for and what it adds to the one
    before it (README's variant table is generated from ``VARIANT_DOCS``: scripts/variant_table.py)."""

    kafka: str
    adds: str


VARIANT_DOCS: dict[str, VariantDoc] = {
    "hw": VariantDoc("0.8 – 0.10.2", "truncation on become-follower to the follower's own HW"),
    "kip101": VariantDoc("0.11 – 1.1", "one OffsetsForLeaderEpoch v0 round, HW fallback"),
    "kip279": VariantDoc("2.0", "the iterative epoch / end-offset exchange"),
    "kip320": VariantDoc("2.1+", "kip279 + fencing, truncation on every epoch change, epoch entry at election, "
                                 "ISR join at the epoch start"),
    "kip903": VariantDoc("3.5 (KRaft)", "kip320 on KRaft: broker registration and epochs, fencing and unfencing "
                                        "with automatic elections, AlterPartition (KIP-841: no fenced broker joins "
                                        "the ISR; KIP-903: nor one that registered again since its fetch), the 3.5 "
                                        "leader-epoch bump on every ISR shrink"),
    "kip966": VariantDoc("KIP-966 (ELR code from 3.7)", "kip903 + Eligible Leader Replicas, no HW advance below "
                                                        "min ISR, no epoch bump on a shrink, balanced unclean "
                                                        "recovery (GetReplicaLogInfo from the LastKnownELR)"),
}
assert tuple(VARIANT_DOCS) == VARIANT_NAMES


variant_named = VARIANT_TABLE.named
