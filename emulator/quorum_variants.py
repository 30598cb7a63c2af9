"""The metadata quorum's protocol variants: named presets of knobs (as ``emulator.variants`` is for
partition replication).

``QUORUM_KNOBS`` is the one table of the quorum's knobs, each with the Kafka version and code it
comes from; the rules in ``emulator.quorum`` read only these knobs, never a preset's name.

* ``kraft595`` -- KIP-595, Kafka 3.x before 3.9: a static voter set (``controller.quorum.voters``),
  voters known by id only, no ``VotersRecord``, no AddRaftVoter / RemoveRaftVoter.
* ``kraft853`` -- KIP-853, Kafka 3.9 (``kraft.version`` 1): voters known by (id, directory id), the
  voter set lives in the log (``VotersRecord``), voters added and removed one at a time.
* ``kraft996`` -- KIP-996, Kafka 4.x: ``kraft853`` plus pre-vote (the ``prospective`` role).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ._build import rebuilt
from .bounds import short_repr
from .variants import Knob, KnobError, parse_knob_assignments

QUORUM_KNOBS: dict[str, Knob] = {k.name: k for k in (
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
)}


@dataclass(frozen=True, slots=True)
class QuorumVariant:
    """One metadata-quorum protocol: a name and the value of every knob of ``QUORUM_KNOBS``."""

    name: str
    dynamic_voters: bool
    pre_vote: bool
    reconfig_requires_leader_epoch_commit: bool = True

    def __post_init__(self) -> None:
        for name, knob in QUORUM_KNOBS.items():
            if getattr(self, name) not in knob.values:
                raise KnobError(f"knob {name}: {getattr(self, name)!r} is not one of {knob.values}")

    def knobs(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in QUORUM_KNOBS}

    def with_knobs(self, overrides: dict[str, Any]) -> "QuorumVariant":
        """The variant with some knobs set (values as YAML or command-line text); same name."""
        values = {}
        for name, text in sorted(overrides.items()):
            if name not in QUORUM_KNOBS:
                raise KnobError(f"unknown quorum knob {short_repr(name)} (known: {', '.join(QUORUM_KNOBS)})")
            values[name] = QUORUM_KNOBS[name].parse(text)
        return replace(self, **values) if values else self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)


assert {f.name for f in fields(QuorumVariant)} - {"name"} == set(QUORUM_KNOBS)

KRAFT595 = QuorumVariant(name="kraft595", dynamic_voters=False, pre_vote=False)
KRAFT853 = replace(KRAFT595, name="kraft853", dynamic_voters=True)
KRAFT996 = replace(KRAFT853, name="kraft996", pre_vote=True)

QUORUM_VARIANTS: dict[str, QuorumVariant] = {v.name: v for v in (KRAFT595, KRAFT853, KRAFT996)}
QUORUM_VARIANT_NAMES: tuple[str, ...] = tuple(QUORUM_VARIANTS)


def quorum_variant_named(name: str, knobs: dict[str, Any] | None = None) -> QuorumVariant:
    try:
        variant = QUORUM_VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown quorum protocol {name!r} (known: {', '.join(QUORUM_VARIANT_NAMES)})") from None
    return variant.with_knobs(knobs or {})


def quorum_knobs_markdown() -> str:
    """The knob table of docs/quorum.md, written from ``QUORUM_KNOBS`` and the presets."""
    lines = ["| knob | " + " | ".join(f"`{n}`" for n in QUORUM_VARIANT_NAMES) + " | meaning | Kafka version / code |",
             "|---|" + "---|" * len(QUORUM_VARIANT_NAMES) + "---|---|"]
    for name, knob in QUORUM_KNOBS.items():
        cells = " | ".join(str(getattr(QUORUM_VARIANTS[v], name)).lower() for v in QUORUM_VARIANT_NAMES)
        lines.append(f"| `{name}` | {cells} | {knob.doc} | {knob.source} |")
    return "\n".join(lines) + "\n"



def parse_quorum_knob_assignments(texts: list[str]) -> dict[str, Any]:
    """``["pre_vote=true", ...]`` (``--knob`` arguments naming quorum knobs) -> validated ``{name: value}``."""
    return parse_knob_assignments(texts, QUORUM_KNOBS, f"the quorum knobs: {', '.join(QUORUM_KNOBS)}")
