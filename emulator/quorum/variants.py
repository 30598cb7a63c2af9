"""The metadata quorum's protocol variants: named presets of knobs (as ``emulator.variants`` is for
partition replication).

``QUORUM_KNOBS`` is the one table of the quorum's knobs, each with the Kafka version and code it
comes from; the rules in ``emulator.quorum.model`` read only these knobs, never a preset's name.

* ``kraft595`` -- KIP-595, Kafka 3.x before 3.9: a static voter set (``controller.quorum.voters``),
  voters known by id only, no ``VotersRecord``, no AddRaftVoter / RemoveRaftVoter.
* ``kraft853`` -- KIP-853, Kafka 3.9 (``kraft.version`` 1): voters known by (id, directory id), the
  voter set lives in the log (``VotersRecord``), voters added and removed one at a time.
* ``kraft996`` -- KIP-996, Kafka 4.x: ``kraft853`` plus pre-vote (the ``prospective`` role).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..variant_table import Knob, KnobTable, Variant, VariantTable

_QUORUM_KNOBS = (
    Knob("dynamic_voters", (False, True),
         "the voter set is a VotersRecord in the log (kraft.version 1): voters are (id, directory id) keys, the "
         "first leader writes the bootstrap voter set into the log, add_voter / remove_voter change it; off, the "
         "voters are the static controller.quorum.voters ids and add_voter / remove_voter answer UNSUPPORTED_VERSION",
         "KIP-853, 3.9.0: LeaderState.appendStartOfEpochControlRecords, AddVoterHandler, RemoveVoterHandler, "
         "KafkaRaftClient.isValidVoterKey"),
    Knob("pre_vote", (False, True),
         "an election timeout makes a voter (unattached, follower or candidate) prospective in its epoch (Vote "
         "requests with PreVote=true, memory only); a majority of granted pre-votes makes it a candidate, a "
         "rejecting majority or its next timeout a follower of the leader it knows (else unattached); a pre-vote of a "
         "higher epoch moves its receiver to unattached in that epoch",
         "KIP-996, 4.x: apache/kafka 53364c5 KafkaRaftClient (pollCandidate, pollProspective, "
         "prospectiveTransitionAfterElectionLoss, handleVoteRequest), ProspectiveState"),
    Knob("reconfig_requires_leader_epoch_commit", (False, True),
         "a leader answers AddRaftVoter / RemoveRaftVoter REQUEST_TIMED_OUT until its high watermark is known, i.e. "
         "until it committed a record of its own epoch (its LeaderChange); off, the leader judges the previous "
         "change committed by the high watermark it inherited as a follower (the Raft thesis' single-server change "
         "without the 2015 fix)",
         "3.9.0 AddVoterHandler.handleAddVoterRequest / RemoveVoterHandler.handleRemoveVoterRequest "
         "(leaderState.highWatermark().isPresent()); Ongaro, raft-dev 2015 'bug in single-server membership changes'"),
)
# An override's unknown name lists the knobs; overrides are checked in name order.
QUORUM_KNOB_TABLE = KnobTable(_QUORUM_KNOBS, "quorum knob", f"known: {', '.join(k.name for k in _QUORUM_KNOBS)}",
                              f"the quorum knobs: {', '.join(k.name for k in _QUORUM_KNOBS)}", sort_overrides=True)
QUORUM_KNOBS: dict[str, Knob] = QUORUM_KNOB_TABLE.knobs


@dataclass(frozen=True, slots=True)
class QuorumVariant(Variant):
    """One metadata-quorum protocol: a name and the value of every knob of ``QUORUM_KNOB_TABLE``."""

    dynamic_voters: bool
    pre_vote: bool
    reconfig_requires_leader_epoch_commit: bool = True

    def knob_table(self) -> KnobTable:
        return QUORUM_KNOB_TABLE


KRAFT595 = QuorumVariant(name="kraft595", dynamic_voters=False, pre_vote=False)
KRAFT853 = replace(KRAFT595, name="kraft853", dynamic_voters=True)
KRAFT996 = replace(KRAFT853, name="kraft996", pre_vote=True)

QUORUM_VARIANT_TABLE: VariantTable[QuorumVariant] = VariantTable(QUORUM_KNOB_TABLE, (KRAFT595, KRAFT853, KRAFT996),
                                                                 "quorum protocol")
QUORUM_VARIANTS: dict[str, QuorumVariant] = QUORUM_VARIANT_TABLE.presets
QUORUM_VARIANT_NAMES: tuple[str, ...] = QUORUM_VARIANT_TABLE.names

