"""Protocol variants as named presets of the knobs of protocol.md §A.13.

The rules in ``partition.py`` read only these knobs; no variant name is tested inside them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

TRUNCATION_RULES = ("hw", "kip101", "kip279")
SKIP_RULES = ("never", "same_leader", "same_leader_and_epoch_le_plus1", "same_epoch")


@dataclass(frozen=True, slots=True)
class ProtocolVariant:
    """One replication protocol: how followers truncate, fence and join the ISR.

    Attributes
    ----------
    trunc_rule:
        ``hw``: truncate to the own HW on become-follower (pre-0.11).  ``kip101``: one
        OffsetsForLeaderEpoch round with the v0 answer, HW fallback.  ``kip279``: the iterative
        epoch / end-offset exchange of ``AbstractFetcherThread.getOffsetTruncationState``.
    skip_if_same_leader:
        When a LeaderAndIsr naming the same leader skips the become-follower path:
        ``same_leader`` (before 2.0.1), ``same_leader_and_epoch_le_plus1`` (2.0.1 interim),
        ``same_epoch`` (2.1+: never for a newer epoch), ``never``.
    assign_epoch_on_election:
        KAFKA-7415: a new leader writes ``(epoch, LEO)`` into its cache at election.
    isr_join_requires_epoch_start:
        KAFKA-7128: a follower joins the ISR only once its LEO reaches the leader's epoch start.
    fencing:
        KIP-320 / KAFKA-7395: Fetch and OffsetsForLeaderEpoch carry the follower's epoch and
        are answered only by a leader in the same epoch.
    reset_remote_leo_on_new_epoch:
        A leader entering a new epoch forgets its followers' LEOs even if its id is unchanged
        (Kip320.tla rule 3: the HW counts only followers that fetched in the current epoch).
    halt_on_out_of_range:
        0.10 – 2.0: OFFSET_OUT_OF_RANGE with unclean election disabled stops the broker.
    """

    name: str
    trunc_rule: str
    skip_if_same_leader: str
    assign_epoch_on_election: bool
    isr_join_requires_epoch_start: bool
    fencing: bool
    cache_semantics: str
    end_offset_for: str
    reset_remote_leo_on_new_epoch: bool
    halt_on_out_of_range: bool
    controller_isr_change_bumps_epoch: bool = True
    strict_min_isr_hw: bool = False

    def __post_init__(self) -> None:
        if self.trunc_rule not in TRUNCATION_RULES:
            raise ValueError(f"unknown truncation rule {self.trunc_rule!r}")
        if self.skip_if_same_leader not in SKIP_RULES:
            raise ValueError(f"unknown skip rule {self.skip_if_same_leader!r}")


HW = ProtocolVariant(
    name="hw",
    trunc_rule="hw",
    skip_if_same_leader="same_leader",
    assign_epoch_on_election=False,
    isr_join_requires_epoch_start=False,
    fencing=False,
    cache_semantics="v0",  # kept for the checker only; the protocol never reads it
    end_offset_for="v0",
    reset_remote_leo_on_new_epoch=False,
    halt_on_out_of_range=True,
)

# Each later variant changes only what its KIP changed, as the TLA+ modules EXTEND the base.
KIP101 = replace(HW, name="kip101", trunc_rule="kip101")
KIP279 = replace(KIP101, name="kip279", trunc_rule="kip279", end_offset_for="v1")
KIP320 = replace(
    KIP279,
    name="kip320",
    skip_if_same_leader="same_epoch",  # KAFKA-7164: truncate on every epoch change
    assign_epoch_on_election=True,  # KAFKA-7415
    isr_join_requires_epoch_start=True,  # KAFKA-7128
    fencing=True,  # KAFKA-7395
    cache_semantics="v2",
    end_offset_for="v2",
    reset_remote_leo_on_new_epoch=True,  # Kip320.tla rule 3
    halt_on_out_of_range=False,  # the fetcher truncates to the leader's LEO instead
)

VARIANTS: dict[str, ProtocolVariant] = {v.name: v for v in (HW, KIP101, KIP279, KIP320)}
VARIANT_NAMES: tuple[str, ...] = tuple(VARIANTS)


def variant_named(name: str) -> ProtocolVariant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown protocol variant {name!r} (known: {', '.join(VARIANT_NAMES)})") from None
