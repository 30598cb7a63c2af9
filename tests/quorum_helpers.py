"""Helpers for the metadata-quorum tests: drive a ``Quorum`` with its steps and judge every step."""

from __future__ import annotations

from emulator.quorum.invariants import QuorumChecker
from emulator.quorum.model import Quorum, QuorumOutcome
from emulator.quorum.state import QuorumRole
from emulator.quorum.steps import Deliver, ElectionTimeout, QuorumFetch, QuorumStep
from emulator.quorum.variants import KRAFT853, QuorumVariant


class Run:
    """A quorum, its checker, and every violation and error seen so far."""

    def __init__(self, voters=(1, 2, 3), observers=(), variant: QuorumVariant = KRAFT853) -> None:
        self.q = Quorum(tuple(voters), tuple(observers), variant)
        self.checker = QuorumChecker()
        self.violations: list[tuple[str, str]] = []
        self.errors: list[dict] = []
        self.events: list[dict] = []

    def __call__(self, *steps: QuorumStep) -> QuorumOutcome:
        out = QuorumOutcome()
        for step in steps:
            out = self.q.apply(step)
            self.errors += out.errors
            self.events += out.events
            self.violations += self.checker.observe(self.q, out)
        return out

    def s(self, sid: int):
        return self.q.servers[sid]

    def deliver_all(self, src: int, dst: int) -> None:
        while self.q.messages(src, dst):
            self(Deliver(src, dst))

    def exchange(self, a: int, b: int) -> None:
        """Every message in flight from a to b, then every answer back."""
        self.deliver_all(a, b)
        self.deliver_all(b, a)

    def elect(self, leader: int, voters=None) -> None:
        """An election timeout on ``leader`` and its Vote exchanges with ``voters`` (default: every other
        running voter), then its BeginQuorumEpoch to them."""
        self(ElectionTimeout(leader))
        others = voters if voters is not None else [v for v in self.s(leader).voter_ids() if v != leader and self.s(v).alive]
        for v in others:
            if self.s(leader).role in (QuorumRole.LEADER,) and not self.q.messages(leader, v):
                continue
            self.exchange(leader, v)
        if self.s(leader).role is QuorumRole.PROSPECTIVE:
            pass
        for v in others:
            self.exchange(leader, v)

    def fetch(self, follower: int, times: int = 1, to: int | None = None) -> None:
        for _ in range(times):
            self(QuorumFetch(follower, to=to))
            target = to if to is not None else self.s(follower).leader
            self.exchange(follower, target)

    def records(self, sid: int) -> list[tuple[int, str]]:
        return [(r.epoch, r.value if r.control.value == "data" else r.control.value) for r in self.s(sid).log]

    def error_codes(self) -> list[str]:
        return [e["error"] for e in self.errors]


def leader_with_hw(voters=(1, 2, 3), observers=(), variant=None) -> Run:
    """Server 1 elected by every voter, each other voter fetched twice (the leader's HW known)."""
    r = Run(voters, observers, variant) if variant else Run(voters, observers)
    r.elect(1)
    for v in voters[1:]:
        r.fetch(v, 2)
    return r
