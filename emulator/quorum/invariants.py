"""The metadata quorum's invariants, named after the TLA+ specifications' properties
(Vanlightly/kafka-tlaplus ``kraft/kip_853`` / ``kraft/kip_996`` ``*_properties.tla`` and the Raft
paper), and the checker that judges them.

``QuorumChecker.observe(quorum, outcome)`` is called by whoever steps the quorum, after each step
(the quorum never calls it); it keeps the ghost state the properties need (every leader seen per
epoch, every committed record) and returns the violations of that step.  Each check is one
function of ``QUORUM_INVARIANTS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .model import Quorum, QuorumOutcome
from .state import (
    HighWatermarkAdvanced,
    QuorumRecord,
    QuorumRole,
    Server,
    VotersAppended,
    is_voter_key,
    majority,
)


@dataclass
class QuorumChecker:
    """Ghost state: the leader of each epoch, the committed records and the epoch that committed them."""

    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader id
    committed: dict[int, QuorumRecord] = field(default_factory=dict)  # offset -> record
    committed_in: dict[int, int] = field(default_factory=dict)  # offset -> the leader epoch that committed it
    two_leaders: list[str] = field(default_factory=list)
    findings: dict[str, str] = field(default_factory=dict)  # this step's event-driven violations

    def observe(self, q: Quorum, outcome: QuorumOutcome) -> list[tuple[str, str]]:
        """Update the ghost state from the step's effects and judge every invariant."""
        self.findings = {}
        for s in q.leaders():
            known = self.leaders.setdefault(s.epoch, s.id)
            if known != s.id:
                self.findings["ElectionSafety"] = f"servers {known} and {s.id} both led epoch {s.epoch}"
        for effect in outcome.effects:
            if isinstance(effect, HighWatermarkAdvanced):
                self._commit(q, effect)
            elif isinstance(effect, VotersAppended):
                self._judge_reconfig(q, effect)
        out = []
        for inv in QUORUM_INVARIANTS:
            detail = inv.check(q, self)
            if detail is not None:
                out.append((inv.name, detail))
        return out

    def _commit(self, q: Quorum, e: HighWatermarkAdvanced) -> None:
        leader = q.servers[e.server]
        voters = leader.last_voters()[1]
        holders = [k[0] for k in voters if _holds_prefix(q.servers[k[0]], leader, e.hw)] if voters else []
        if len(holders) < majority(voters):
            self.findings["HighWatermarkMajority"] = (
                f"leader {e.server} (epoch {e.epoch}) moved its HW to {e.hw} held by {holders} only, not a majority "
                f"of its voters {[k[0] for k in voters]}")
        for offset in range(e.hw):
            record = leader.log[offset]
            old = self.committed.get(offset)
            if old is None:
                self.committed[offset], self.committed_in[offset] = record, e.epoch
            elif old != record:
                self.findings["Durability"] = (f"offset {offset} was committed as {old} and is committed again as "
                                               f"{record} by leader {e.server} in epoch {e.epoch}")

    def _judge_reconfig(self, q: Quorum, e: VotersAppended) -> None:
        leader = q.servers[e.server]
        if e.previous >= 0 and (e.previous not in self.committed or self.committed[e.previous] != leader.log[e.previous]):
            self.findings["ReconfigOneAtATime"] = (f"leader {e.server} appended a voter change at {e.offset} while the "
                                                   f"previous one at {e.previous} was not committed")


def _holds_prefix(s: Server, leader: Server, upto: int) -> bool:
    return s.leo >= upto and s.log[:upto] == leader.log[:upto]


@dataclass(frozen=True, slots=True)
class QuorumInvariant:
    name: str
    statement: str
    source: str
    check: Callable[[Quorum, QuorumChecker], str | None]


def election_safety(q: Quorum, g: QuorumChecker) -> str | None:
    return g.findings.get("ElectionSafety")


def leader_completeness(q: Quorum, g: QuorumChecker) -> str | None:
    """A leader of an epoch later than the one that committed a record holds it."""
    for s in q.leaders():
        for offset in sorted(g.committed):
            if g.committed_in[offset] < s.epoch and (offset >= s.leo or s.log[offset] != g.committed[offset]):
                return f"leader {s.id} of epoch {s.epoch} lacks committed offset {offset} {g.committed[offset]}"
    return None


def durability(q: Quorum, g: QuorumChecker) -> str | None:
    """Every committed record is still in the log of some voter, and was never committed as another record.

    A voter here is a server in its own last voter set or in its committed one (the last below
    its HW): a leader that appended its own removal keeps leading, and holds what it committed,
    until the removal commits (KIP-853), and a voter set not yet committed may still be truncated
    away.  A server whose disk was lost comes back under a new directory id, in neither."""
    if "Durability" in g.findings:
        return g.findings["Durability"]
    for offset in sorted(g.committed):
        record = g.committed[offset]
        if not any(offset < s.leo and s.log[offset] == record
                   and (is_voter_key(s.last_voters()[1], s.key) or is_voter_key(s.committed_voters(), s.key))
                   for _, s in sorted(q.servers.items())):
            return f"committed offset {offset} {record} is in no voter's log"
    return None


def log_matching_below_high_watermark(q: Quorum, g: QuorumChecker) -> str | None:
    """TLA+ kip_853 NoLogDivergence (Vanlightly/kafka-tlaplus 823615e, kraft_kip_853_properties.tla):
    any two running servers' logs are equal below their lowest common high watermark."""
    running = [s for _, s in sorted(q.servers.items()) if s.role is not QuorumRole.STOPPED]
    for i, a in enumerate(running):
        for b in running[i + 1:]:
            common = min(a.hw, b.hw, a.leo, b.leo)
            for offset in range(common):
                if a.log[offset] != b.log[offset]:
                    return (f"servers {a.id} and {b.id} differ at offset {offset} below their common HW {common}: "
                            f"{a.log[offset]} and {b.log[offset]}")
    return None


def reconfig_one_at_a_time(q: Quorum, g: QuorumChecker) -> str | None:
    return g.findings.get("ReconfigOneAtATime")


def high_watermark_majority(q: Quorum, g: QuorumChecker) -> str | None:
    return g.findings.get("HighWatermarkMajority")


QUORUM_INVARIANTS: tuple[QuorumInvariant, ...] = (
    QuorumInvariant("ElectionSafety", "at most one leader per epoch", "TLA+ kip_853 NeverTwoLeadersInSameEpoch; Raft "
                    "ElectionSafety", election_safety),
    QuorumInvariant("LeaderCompleteness", "a leader holds every record committed in an earlier epoch",
                    "TLA+ kip_853 LeaderHasAllAckedValues; Raft LeaderCompleteness", leader_completeness),
    QuorumInvariant("Durability", "a committed record is never lost (some voter holds it) nor changed",
                    "TLA+ kip_853 AckedValueNotLost; kip_996 Durability", durability),
    QuorumInvariant("LogMatchingBelowHighWatermark", "any two running servers' logs match below their common HW",
                    "TLA+ kip_853 NoLogDivergence", log_matching_below_high_watermark),
    QuorumInvariant("ReconfigOneAtATime", "a voter change is appended only once the previous one is committed",
                    "KIP-853; 3.9.0 AddVoterHandler / RemoveVoterHandler (lastVoterSetEntry offset < HW)",
                    reconfig_one_at_a_time),
    QuorumInvariant("HighWatermarkMajority", "a leader's HW moves only to an offset a majority of its CURRENT voter "
                    "set holds", "3.9.0 LeaderState.maybeUpdateHighWatermark (voterStates = lastVoterSet)",
                    high_watermark_majority),
)
QUORUM_INVARIANT_NAMES: tuple[str, ...] = tuple(i.name for i in QUORUM_INVARIANTS)
