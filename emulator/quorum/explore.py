"""Exhaustive bounded search of the metadata quorum (KRaft's Raft): ``replemu explore --protocol
kraft595|kraft853|kraft996`` (docs/explore.md "The metadata quorum").

Breadth-first over ``Quorum`` states, each distinct state expanded once, every quorum invariant
(``QUORUM_INVARIANTS``) judged after every core step, and for each broken invariant the first
path found kept: one of the shortest, the smallest in code order.  The engine is the partition
family's, ``emulator.search``; this module is the quorum's side of it: the alphabet, the bounds,
the canonical encoding, the actions, and ``QuorumSpace``, the engine's hooks on them (what the
family says of a search, for ``emulator.quorum.family``, at the end).

Raw message-level interleaving explodes, so an edge is a *coarse action* in the manner of the
TLA+ specifications (Vanlightly/kafka-tlaplus ``kraft/kip_853``, ``kraft/kip_996``): an election
timeout followed by the exchange of Vote requests and responses with a chosen set of voters, a
fetch round trip (the response delivered, or lost), a client append, AddRaftVoter /
RemoveRaftVoter, a crash, a restart, a disk loss, the delivery or loss of the messages in flight
on one link.  Each action is a short sequence of the core's own steps (``QUORUM_STEP_TABLE``:
one code letter per step kind, the action's first step), so the core's rules are what is
searched, and a path is written back as those steps: an ordinary quorum scenario.

Standard library only, deterministic: no clock decides anything, no set or dict is iterated in
hash order into a decision, the visited set holds digests of marshalled tuples.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from ..epoch_cache import LeaderEpochCache
from ..search import SEPARATOR, Counters, ExploreError, SearchBounds, SearchSpace
from ..search_command import (
    Counterexample,
    SearchOption,
    counterexample_name,
    knob_flags,
    parse_alphabet,
    parse_until,
)
from ..step_table import CrashMode, StepRefused
from .invariants import QUORUM_INVARIANT_NAMES, QuorumChecker
from .model import Quorum
from .run import parse_quorum_scenario, run_quorum_scenario
from .state import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ControlType,
    ElectionState,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderState,
    Message,
    PendingVoterChange,
    QuorumRecord,
    QuorumRole,
    ReplicaState,
    Server,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
    VotersAppended,
)
from .steps import (
    QUORUM_STEP_TABLE,
    AddVoter,
    Append,
    BeginQuorumEpoch,
    ChangeListeners,
    CheckQuorum,
    Deliver,
    Drop,
    ElectionTimeout,
    LoseDisk,
    QuorumCrash,
    QuorumFetch,
    QuorumRestart,
    QuorumStep,
    QuorumStepKind,
    RemoveVoter,
    Resign,
    Shutdown,
    ShutdownTimeout,
    UpdateVoter,
)
from .variants import QUORUM_VARIANT_TABLE, QuorumVariant

QUORUM_STATE_ENCODING = 1  # the layout of ``canonical``'s tuple, which a work directory records

# The one table of action codes: each step kind of QUORUM_STEP_TABLE has a letter, the first step
# of the actions it names.  Codes compare as strings: the letters fix the order a state's actions
# are tried in, so the smallest path is the one kept.
CODE_OF_KIND: dict[QuorumStepKind, str] = {
    QuorumStepKind.APPEND: "A", QuorumStepKind.BEGIN_QUORUM_EPOCH: "B", QuorumStepKind.CRASH: "C",
    QuorumStepKind.DROP: "D", QuorumStepKind.ELECTION_TIMEOUT: "E", QuorumStepKind.FETCH: "F",
    QuorumStepKind.RESIGN: "G", QuorumStepKind.ADD_VOTER: "J", QuorumStepKind.REMOVE_VOTER: "K",
    QuorumStepKind.LOSE_DISK: "L", QuorumStepKind.RESTART: "R", QuorumStepKind.DELIVER: "X",
    QuorumStepKind.CHECK_QUORUM: "Q", QuorumStepKind.SHUTDOWN: "S", QuorumStepKind.SHUTDOWN_TIMEOUT: "T",
    QuorumStepKind.UPDATE_VOTER: "U", QuorumStepKind.CHANGE_LISTENERS: "M",
}
KIND_OF_CODE: dict[str, QuorumStepKind] = {letter: kind for kind, letter in CODE_OF_KIND.items()}
assert set(CODE_OF_KIND) == set(QUORUM_STEP_TABLE) and len(KIND_OF_CODE) == len(QUORUM_STEP_TABLE), \
    "one distinct code letter per quorum step kind"

# Searched when --steps is not given: everything but the graceful resignation, the check-quorum
# resignation, the graceful shutdown and the listeners' update (opt-in: no claim here needs them).
OPT_IN_KINDS: tuple[QuorumStepKind, ...] = (QuorumStepKind.RESIGN, QuorumStepKind.CHECK_QUORUM, QuorumStepKind.SHUTDOWN,
                                            QuorumStepKind.SHUTDOWN_TIMEOUT, QuorumStepKind.UPDATE_VOTER,
                                            QuorumStepKind.CHANGE_LISTENERS)
DEFAULT_QUORUM_ALPHABET: tuple[QuorumStepKind, ...] = tuple(k for k in QUORUM_STEP_TABLE if k not in OPT_IN_KINDS)

# The claim of KIP-996 as a property the search judges (with ``QuorumSpace.returning``).
STABLE_LEADER = "StableLeaderNotDisrupted"
PROPERTY_NAMES: tuple[str, ...] = QUORUM_INVARIANT_NAMES + (STABLE_LEADER,)
PROPERTY_ORDER: dict[str, int] = {name: i for i, name in enumerate(PROPERTY_NAMES)}
MAX_SERVERS = 9  # a server id is one digit of a code
EXCHANGE_PASSES = 8  # an election's exchange rounds (each delivers only answers and the transitions they cause)


@dataclass(frozen=True, slots=True)
class QuorumBounds(SearchBounds):
    """How far the search goes.  ``depth``: actions from the root.  ``epochs``: the highest epoch a
    server may reach (a state above it is not explored: a state constraint).  ``appends``: client
    records in all (named v1, v2, ...).  ``reconfigs``: VotersRecords appended by AddRaftVoter /
    RemoveRaftVoter in all.  ``crashes`` / ``power_crashes`` / ``disk_losses``: in all.
    ``lost_responses``: fetch responses lost in all.  ``messages``: messages left in flight on one link after an action (a state with more is not
    explored); 0, the default: an action delivers its messages to the servers it names and every
    other message it sent is lost (no message outlives the action that sent it)."""

    depth: int = 1000
    epochs: int = 3
    appends: int = 1
    reconfigs: int = 2
    crashes: int = 0
    power_crashes: int = 0
    disk_losses: int = 0
    lost_responses: int = 0
    messages: int = 0


# The budgets of ``QuorumBounds`` a path spends: their places in its ``Counters``.
APPENDS, RECONFIGS, CRASHES, POWER_CRASHES, DISK_LOSSES, LOST_RESPONSES = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class QuorumSpace(SearchSpace):
    """What is searched: the servers, the protocol (a quorum variant with its knobs), the bounds and
    the alphabet.  ``stable``: the root is a stable leader (the lowest voter elected by every voter,
    then three fetch rounds of every other voter: everything committed, every follower knows the
    high watermark) instead of every server just started.  ``returning`` (KIP-996's claim; implies
    ``stable``) names the server that was partitioned: only its election timeout fires, and
    ``StableLeaderNotDisrupted`` is judged in every state.  ``prefix``: actions taken from there
    before the search starts (a start state given by its path; its steps lead every written file)."""

    voters: tuple[int, ...]
    observers: tuple[int, ...]
    variant: QuorumVariant
    bounds: QuorumBounds
    alphabet: tuple[QuorumStepKind, ...] = DEFAULT_QUORUM_ALPHABET
    returning: int | None = None
    stable: bool = False  # the root is a stable leader (implied by ``returning``)
    any_round: bool = False  # a vote round may reach any set of voters, not only none, a bare majority or all
    prefix: str = ""  # actions (codes joined by spaces) taken after the root's prelude: the search starts there

    def __post_init__(self) -> None:
        ids = self.voters + self.observers
        if not self.voters:
            raise ExploreError("a quorum needs at least one voter")
        if len(set(ids)) != len(ids) or any(not 1 <= i <= MAX_SERVERS for i in ids):
            raise ExploreError(f"server ids must be distinct, 1..{MAX_SERVERS}, got {list(ids)}")
        unknown = [k for k in self.alphabet if not isinstance(k, QuorumStepKind)]
        if unknown:
            raise ExploreError(f"unknown quorum step kinds {unknown}")
        if self.returning is not None:
            if self.returning not in self.voters or len(self.voters) < 2:
                raise ExploreError(f"the returning server must be a voter other than the leader {min(self.voters)}, "
                                   f"got {self.returning}")
            if self.returning == min(self.voters):
                raise ExploreError(f"the returning server must not be the leader {min(self.voters)}")

    def has(self, kind: QuorumStepKind) -> bool:
        return kind in self.alphabet

    @property
    def stable_root(self) -> bool:
        return self.stable or self.returning is not None

    def may_time_out(self, sid: int) -> bool:
        return self.returning is None or sid == self.returning

    @property
    def servers(self) -> tuple[int, ...]:
        return tuple(sorted(self.voters + self.observers))

    # -- the engine's hooks (emulator.search.SearchSpace): a state is a ``Node`` ------------------

    def depth(self) -> int:
        return self.bounds.depth

    def root_state(self) -> tuple[Any, list[str]]:
        node, _steps, broken = root(self)
        return node, broken

    def restore(self, t: tuple, context: Any) -> Any:
        return restore(self, t)

    def canonical(self, state: Any) -> tuple:
        return canonical(state, self.has(QuorumStepKind.CHECK_QUORUM))

    def actions(self, state: Any) -> list[str]:
        return candidate_codes(self, state)

    def take(self, state: Any, code: str) -> tuple[Any, set[str]] | None:
        """An action the core refuses, or that leaves the bounds, is no edge."""
        node = clone(self, state)
        try:
            taken = take(self, node, code)
        except StepRefused:
            return None
        if not within_bounds(self, node.q):
            return None
        return node, taken.broken

    def keeps_self_loops(self) -> bool:
        return False  # an action that comes back to the same state is no edge

    def order(self) -> dict[str, int]:
        return PROPERTY_ORDER

    def step_names(self) -> list[str]:
        return [k.value for k in self.alphabet]

    def identity(self) -> dict[str, Any]:
        return {"voters": list(self.voters), "observers": list(self.observers), "protocol": self.variant.name,
                "knobs": self.variant.knobs(), "alphabet": self.step_names(), "encoding": QUORUM_STATE_ENCODING,
                "returning": self.returning, "stable": self.stable, "any_round": self.any_round, "prefix": self.prefix,
                **{k: v for k, v in self.bounds.as_dict().items() if k != "depth"}}


class Node:
    """One state as the search holds it: the quorum, its checker's ghost state, the counters, and
    (claim only) the stable leader's id and epoch."""

    __slots__ = ("q", "checker", "counters", "stable")

    def __init__(self, q: Quorum, checker: QuorumChecker, counters: Counters,
                 stable: tuple[int, int] | None) -> None:
        self.q, self.checker, self.counters, self.stable = q, checker, counters, stable


# -- canonical encoding -------------------------------------------------------------------------

CONTROL_INDEX = {"data": 0, "LeaderChange": 1, "VotersRecord": 2}
ROLE_INDEX: dict[QuorumRole, int] = {role: i for i, role in enumerate(QuorumRole)}


def _record(r: QuorumRecord) -> tuple:
    return (r.epoch, r.value, CONTROL_INDEX[r.control.value], r.voters, r.endpoints)


REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, UpdateVoterRequest)


def _expected(q: Quorum, link: tuple[int, int], m: Message) -> int:
    """1 when the message is (or answers) the request its requester now expects an answer to
    (``Server.expected``), else 0: correlation ids matter only by that equality, so the canonical
    state holds the flag, not the ever-growing numbers."""
    requester, other = link if isinstance(m, REQUESTS) else (link[1], link[0])
    cid = q.servers[requester].expected.get(other)
    return 1 if cid is not None and cid == m.correlation_id else 0


def _message(m: Message, expected: int = 0) -> tuple:
    """A message as a tuple: a tag, its fields (records as tuples), and whether it is expected."""
    if isinstance(m, VoteRequest):
        return (0, m.candidate_epoch, m.candidate_key, m.last_offset_epoch, m.last_offset, m.voter_key, m.pre_vote,
                expected)
    if isinstance(m, VoteResponse):
        return (1, m.error, m.leader_epoch, m.leader_id, m.vote_granted, m.pre_vote, m.endpoints, expected)
    if isinstance(m, BeginQuorumEpochRequest):
        return (2, m.leader_epoch, m.leader_id, m.voter_key, expected)
    if isinstance(m, BeginQuorumEpochResponse):
        return (3, m.error, m.leader_epoch, m.leader_id, m.endpoints, expected)
    if isinstance(m, EndQuorumEpochRequest):
        return (4, m.leader_epoch, m.leader_id, m.preferred_successors, expected)
    if isinstance(m, EndQuorumEpochResponse):
        return (5, m.error, m.leader_epoch, m.leader_id, m.endpoints, expected)
    if isinstance(m, FetchRequest):
        return (6, m.replica_key, m.current_leader_epoch, m.fetch_offset, m.last_fetched_epoch, m.max_records, expected)
    if isinstance(m, FetchResponse):
        return (7, m.error, m.leader_epoch, m.leader_id, tuple([_record(r) for r in m.records]), m.base_offset,
                m.high_watermark, m.diverging_epoch, m.diverging_end_offset, m.endpoints, expected)
    if isinstance(m, UpdateVoterRequest):
        return (8, m.voter_key, m.current_leader_epoch, m.listeners, expected)
    if isinstance(m, UpdateVoterResponse):
        return (9, m.error, m.leader_epoch, m.leader_id, m.endpoints, expected)
    raise ExploreError(f"unknown message {m!r}")  # pragma: no cover - the message union is closed


def _by_key(item: tuple) -> tuple[int, int]:
    """Replica states in key order (a static voter's directory id None first)."""
    key = item[0]
    return (key[0], -1 if key[1] is None else key[1])


def _server(s: Server, fetched: bool = False) -> tuple:
    """Everything of a server that a future step or verdict reads.  Left out: what only records
    history (``LeaderState.granting_voters`` and ``acknowledged``, ``backing_off``: written, never
    read by a rule), a campaign's votes and voter set outside a campaign (reset on entering one), and
    the voters that fetched since the last check of the quorum unless ``fetched`` (only ``check_quorum``
    reads them)."""
    campaign = s.role in (QuorumRole.CANDIDATE, QuorumRole.PROSPECTIVE)
    ls = s.leader_state
    leader = None
    if ls is not None:
        pending = None if ls.pending is None else (ls.pending.operation, ls.pending.voter, ls.pending.offset)
        leader = (ls.epoch, ls.epoch_start_offset, ls.high_watermark,
                  tuple([(rid, r.key, r.end_offset, r.last_fetch_leader_leo, r.caught_up)
                         for rid, r in sorted(ls.replicas.items(), key=_by_key)]), pending,
                  tuple(sorted(ls.fetched_voters)) if fetched else ())
    f = s.state_file
    return (s.id, s.directory_id, s.bootstrap_voters, ROLE_INDEX[s.role], s.epoch, s.voted_key, s.leader,
            tuple([_record(r) for r in s.log]), s.flushed, s.hw, s.cache.as_tuple(), (f.epoch, f.voted_key, f.leader),
            tuple(sorted(s.votes_granted)) if campaign else (), tuple(sorted(s.votes_rejected)) if campaign else (),
            s.election_voters if campaign else (), s.has_fetched_from_leader, leader, tuple(sorted(s.expected)),
            s.leader_endpoints, s.shutting_down, s.listeners)


def canonical(node: Node, fetched: bool = False) -> tuple:
    """The state as nested tuples: every server (id order), every non-empty link (sorted) with its
    messages in order, the checker's ghost state (the leader of each epoch, the committed records
    and the epoch that committed each), the counters, the stable leader.  Not the step number, not
    the last step's outcome."""
    q, g, c = node.q, node.checker, node.counters
    links = tuple([(link, tuple([_message(m, _expected(q, link, m)) for m in q.in_flight[link]]))
                   for link in sorted(q.in_flight) if q.in_flight[link]])
    ghost = (tuple(sorted(g.leaders.items())), tuple([(o, _record(r)) for o, r in sorted(g.committed.items())]),
             tuple(sorted(g.committed_in.items())))
    return (tuple([_server(s, fetched) for _, s in sorted(q.servers.items())]), links, ghost,
            c.spent, node.stable)


CONTROL_TYPES: tuple[ControlType, ...] = (ControlType.DATA, ControlType.LEADER_CHANGE, ControlType.VOTERS)
ROLES: tuple[QuorumRole, ...] = tuple(QuorumRole)


def _record_of(t: tuple) -> QuorumRecord:
    return QuorumRecord(t[0], t[1], CONTROL_TYPES[t[2]], t[3], t[4])


def _message_of(t: tuple, cid: int) -> Message:
    """The message of a tuple, with correlation id ``cid`` (0: a response no one expects)."""
    tag = t[0]
    if tag == 0:
        return VoteRequest(t[1], t[2], t[3], t[4], t[5], t[6], cid)
    if tag == 1:
        return VoteResponse(t[1], t[2], t[3], t[4], t[5], t[6], cid)
    if tag == 2:
        return BeginQuorumEpochRequest(t[1], t[2], t[3], cid)
    if tag == 3:
        return BeginQuorumEpochResponse(t[1], t[2], t[3], t[4], cid)
    if tag == 4:
        return EndQuorumEpochRequest(t[1], t[2], t[3], cid)
    if tag == 5:
        return EndQuorumEpochResponse(t[1], t[2], t[3], t[4], cid)
    if tag == 6:
        return FetchRequest(t[1], t[2], t[3], t[4], t[5], cid)
    if tag == 8:
        return UpdateVoterRequest(t[1], t[2], t[3], cid)
    if tag == 9:
        return UpdateVoterResponse(t[1], t[2], t[3], t[4], cid)
    return FetchResponse(t[1], t[2], t[3], tuple([_record_of(r) for r in t[4]]), t[5], t[6], t[7], t[8], t[9], cid)


def restore(space: QuorumSpace, t: tuple) -> Node:
    """The node of a canonical tuple (what ``canonical`` leaves out at its reset value)."""
    servers_t, links, ghost, counters, stable = t
    q = Quorum(space.voters, space.observers, space.variant)
    q.pending = None  # a restored state is past its first step
    for (sid, directory_id, bootstrap, role, epoch, voted, leader, log, flushed, hw, cache, state_file, granted, rejected,
         election_voters, fetched, ls, expected, endpoints, shutting_down, listeners) in servers_t:
        leader_state = None
        if ls is not None:
            ls_epoch, start, high_watermark, replicas, pending, fetched_voters = ls
            leader_state = LeaderState(ls_epoch, start, (), high_watermark,
                                       {rid: ReplicaState(key, end, leo, caught) for rid, key, end, leo, caught in replicas},
                                       None if pending is None else PendingVoterChange(pending[0], pending[1], pending[2]),
                                       fetched_voters=set(fetched_voters))
        q.servers[sid] = Server(sid, directory_id, bootstrap, ROLES[role], epoch, voted, leader,
                                [_record_of(r) for r in log], flushed, hw, LeaderEpochCache("v2", cache),
                                ElectionState(state_file[0], state_file[1], state_file[2]), set(granted), set(rejected),
                                election_voters, False, fetched, leader_state,
                                {dest: i + 1 for i, dest in enumerate(expected)}, len(expected), endpoints,
                                shutting_down, listeners)
    q.in_flight = {}
    for link, msgs in links:
        restored: deque[Message] = deque()
        for m in msgs:
            requester, other = link if m[0] in (0, 2, 4, 6, 8) else (link[1], link[0])
            restored.append(_message_of(m, q.servers[requester].expected[other] if m[-1] else 0))
        q.in_flight[link] = restored
    leaders, committed, committed_in = ghost
    checker = QuorumChecker(dict(leaders), {o: _record_of(r) for o, r in committed}, dict(committed_in))
    return Node(q, checker, Counters(counters), stable)


def _clone_server(s: Server) -> Server:
    ls = s.leader_state
    leader_state = None
    if ls is not None:
        leader_state = LeaderState(ls.epoch, ls.epoch_start_offset, ls.granting_voters, ls.high_watermark,
                                   {rid: ReplicaState(r.key, r.end_offset, r.last_fetch_leader_leo, r.caught_up)
                                    for rid, r in ls.replicas.items()}, ls.pending, set(ls.acknowledged),
                                   ls.resign_requested, set(ls.fetched_voters))
    return Server(s.id, s.directory_id, s.bootstrap_voters, s.role, s.epoch, s.voted_key, s.leader, list(s.log), s.flushed,
                  s.hw, s.cache.copy(), s.state_file, set(s.votes_granted), set(s.votes_rejected), s.election_voters,
                  s.backing_off, s.has_fetched_from_leader, leader_state, dict(s.expected), s.next_correlation,
                  s.leader_endpoints, s.shutting_down, s.listeners)


def clone(space: QuorumSpace, node: Node) -> Node:
    """An independent copy of a node (records, messages, keys and the state file are immutable: shared)."""
    q = Quorum(space.voters, space.observers, space.variant)
    q.servers = {sid: _clone_server(s) for sid, s in node.q.servers.items()}
    q.pending = node.q.pending
    q.in_flight = {link: deque(msgs) for link, msgs in node.q.in_flight.items() if msgs}
    g = node.checker
    return Node(q, QuorumChecker(dict(g.leaders), dict(g.committed), dict(g.committed_in)), node.counters, node.stable)


# -- actions: codes, and the core steps each one takes -------------------------------------------


class Taken:
    """The core steps an action took and the properties they broke (judged after each step)."""

    __slots__ = ("steps", "broken")

    def __init__(self) -> None:
        self.steps: list[QuorumStep] = []
        self.broken: set[str] = set()


def _apply(node: Node, taken: Taken, step: QuorumStep) -> None:
    outcome = node.q.apply(step)
    taken.steps.append(step)
    if isinstance(step, Drop):  # a lost message changes no server: every verdict is the one before it
        return
    for name, _detail in node.checker.observe(node.q, outcome):
        taken.broken.add(name)
    if node.stable is not None:
        leader, epoch = node.stable
        s = node.q.servers[leader]
        if s.role is not QuorumRole.LEADER or s.epoch != epoch:
            taken.broken.add(STABLE_LEADER)


def _deliver_all(node: Node, taken: Taken, source: int, destination: int, keep: int = 0) -> int:
    """Deliver the messages in flight from ``source`` to ``destination``, oldest first, but the last
    ``keep``; returns how many."""
    q, n = node.q, 0
    while len(q.in_flight.get((source, destination), ())) > keep and q.servers[destination].alive:
        _apply(node, taken, Deliver(source, destination))
        n += 1
    return n


def _exchange(node: Node, taken: Taken, source: int, destination: int) -> int:
    """One exchange: every message from ``source`` to ``destination``, then every message back
    (the answers, and whatever ``destination`` had sent before)."""
    n = _deliver_all(node, taken, source, destination)
    if node.q.servers[source].alive:
        n += _deliver_all(node, taken, destination, source)
    return n


def _leaders(q: Quorum) -> list[int]:
    return [sid for sid, s in sorted(q.servers.items()) if s.role is QuorumRole.LEADER and s.alive]


def candidate_codes(space: QuorumSpace, node: Node) -> list[str]:
    """The codes of every action that may apply here, sorted (each is tried; one that the core
    refuses, that changes nothing or that leaves the bounds is not an edge)."""
    q, b, c = node.q, space.bounds, node.counters
    servers = q.servers
    ids = sorted(servers)
    alive = [sid for sid in ids if servers[sid].alive]
    leaders = _leaders(q)
    codes: list[str] = []
    if space.has(QuorumStepKind.APPEND) and c.spent[APPENDS] < b.appends:
        codes += [f"A{lid}" for lid in leaders]
    if space.has(QuorumStepKind.BEGIN_QUORUM_EPOCH):
        codes += [f"B{lid}{v}" for lid in leaders for v in servers[lid].voter_ids()
                  if v != lid and v in servers and servers[v].alive]
    if space.has(QuorumStepKind.CRASH):
        for sid in alive:
            if c.spent[CRASHES] < b.crashes:
                codes.append(f"C{sid}")
            if c.spent[POWER_CRASHES] < b.power_crashes and servers[sid].flushed < servers[sid].leo:
                codes.append(f"C{sid}p")  # differs from a process crash only with records not flushed
    links = sorted(link for link, msgs in q.in_flight.items() if msgs)
    if space.has(QuorumStepKind.DROP):
        codes += [f"D{a}{d}" for a, d in links]
    if space.has(QuorumStepKind.ELECTION_TIMEOUT):
        for sid in alive:
            s = servers[sid]
            if s.role is QuorumRole.LEADER or not space.may_time_out(sid):
                continue
            voters = s.voter_ids()
            others = [v for v in voters if v != sid and v in servers and servers[v].alive]
            needed = len(voters) // 2 + 1 - (1 if sid in voters else 0)  # the others' votes a majority needs
            for mask in range(1 << len(others)):
                reached_ = [v for i, v in enumerate(others) if mask >> i & 1]
                if space.any_round or len(reached_) in (0, needed, len(others)):
                    codes.append("E" + str(sid) + "".join(str(v) for v in reached_))
    if space.has(QuorumStepKind.FETCH):
        for sid in alive:
            s = servers[sid]
            if s.role not in (QuorumRole.FOLLOWER, QuorumRole.UNATTACHED, QuorumRole.RESIGNED):
                continue
            if s.leader is not None and s.leader != sid:
                if servers[s.leader].alive:
                    codes.append(f"F{sid}")
                    if c.spent[LOST_RESPONSES] < b.lost_responses:
                        codes.append(f"F{sid}x")
            elif not s.is_voter():  # an observer that knows no leader asks a bootstrap server
                codes += [f"F{sid}t{d}" for d in alive if d != sid]
    if space.has(QuorumStepKind.RESIGN):
        codes += [f"G{lid}" for lid in leaders]
    if space.has(QuorumStepKind.CHECK_QUORUM):
        codes += [f"Q{lid}" for lid in leaders]
    if space.has(QuorumStepKind.SHUTDOWN):
        codes += [f"S{sid}" for sid in alive if not servers[sid].shutting_down]
    if space.has(QuorumStepKind.SHUTDOWN_TIMEOUT):
        codes += [f"T{sid}" for sid in alive if servers[sid].shutting_down]
    if space.has(QuorumStepKind.UPDATE_VOTER):
        for sid in alive:
            followed = servers[sid].leader
            if servers[sid].role is QuorumRole.FOLLOWER and followed is not None and followed in servers \
                    and servers[followed].alive and servers[sid].voter_node_needs_update():
                codes.append(f"U{sid}")
    if space.has(QuorumStepKind.CHANGE_LISTENERS):
        # one change per server: the listeners' generation would otherwise grow without bound
        codes += [f"M{sid}" for sid in ids if not servers[sid].alive and servers[sid].listeners == 1]
    if c.spent[RECONFIGS] < b.reconfigs:
        for lid in leaders:
            voters = servers[lid].voter_ids()
            if space.has(QuorumStepKind.ADD_VOTER):
                codes += [f"J{lid}{v}" for v in alive if v not in voters]
            if space.has(QuorumStepKind.REMOVE_VOTER):
                codes += [f"K{lid}{v}" for v in voters if v in servers]
    if space.has(QuorumStepKind.LOSE_DISK) and c.spent[DISK_LOSSES] < b.disk_losses:
        codes += [f"L{sid}" for sid in ids if not servers[sid].alive]
    if space.has(QuorumStepKind.RESTART):
        codes += [f"R{sid}" for sid in ids if not servers[sid].alive]
    if space.has(QuorumStepKind.DELIVER):
        codes += [f"X{a}{d}" for a, d in links if servers[d].alive]
    return sorted(codes)


def take(space: QuorumSpace, node: Node, code: str) -> Taken:
    """Take the action ``code`` on ``node`` (changed in place); ``StepRefused`` when the core refuses
    one of its steps (the action is then no edge)."""
    taken = Taken()
    kind = KIND_OF_CODE.get(code[:1])
    c = node.counters
    if kind is QuorumStepKind.APPEND:
        _apply(node, taken, Append(f"v{c.spent[APPENDS] + 1}", int(code[1])))
        node.counters = c.spend(APPENDS)
    elif kind is QuorumStepKind.BEGIN_QUORUM_EPOCH:  # the leader's beginQuorumEpochTimer: resent, answered
        leader, voter = int(code[1]), int(code[2])
        _apply(node, taken, BeginQuorumEpoch(leader, voter))
        _exchange(node, taken, leader, voter)
    elif kind is QuorumStepKind.CRASH:
        if code.endswith("p"):
            _apply(node, taken, QuorumCrash(int(code[1]), CrashMode.POWER))
            node.counters = c.spend(POWER_CRASHES)
        else:
            _apply(node, taken, QuorumCrash(int(code[1])))
            node.counters = c.spend(CRASHES)
    elif kind is QuorumStepKind.DROP:
        source, destination = int(code[1]), int(code[2])
        while node.q.in_flight.get((source, destination)):
            _apply(node, taken, Drop(source, destination))
    elif kind is QuorumStepKind.ELECTION_TIMEOUT:
        sid = int(code[1])
        chosen = [int(ch) for ch in code[2:]]
        _apply(node, taken, ElectionTimeout(sid))
        for _ in range(EXCHANGE_PASSES):  # until quiet: pre-votes, votes, BeginQuorumEpoch and their answers
            if not sum(_exchange(node, taken, sid, d) for d in chosen):
                break
    elif kind is QuorumStepKind.FETCH:
        sid = int(code[1])
        if code[2:3] == "t":
            to = int(code[3])
            _apply(node, taken, QuorumFetch(sid, to=to))
            _exchange(node, taken, sid, to)
        else:
            known = node.q.servers[sid].leader
            assert known is not None
            _apply(node, taken, QuorumFetch(sid))
            _deliver_all(node, taken, sid, known)
            if code.endswith("x"):  # the response (the last message back) is lost
                _deliver_all(node, taken, known, sid, keep=1)
                if node.q.in_flight.get((known, sid)):
                    _apply(node, taken, Drop(known, sid))
                node.counters = c.spend(LOST_RESPONSES)
            else:
                _deliver_all(node, taken, known, sid)
    elif kind in (QuorumStepKind.RESIGN, QuorumStepKind.CHECK_QUORUM, QuorumStepKind.SHUTDOWN):
        # a leader's resignation (any of the three can make one): EndQuorumEpoch to every voter, answered
        sid = int(code[1])
        voters = node.q.servers[sid].voter_ids()
        was_leader = node.q.servers[sid].role is QuorumRole.LEADER
        resigning: QuorumStep = Resign(sid) if kind is QuorumStepKind.RESIGN else (
            CheckQuorum(sid) if kind is QuorumStepKind.CHECK_QUORUM else Shutdown(sid))
        _apply(node, taken, resigning)
        if was_leader and node.q.servers[sid].role is QuorumRole.RESIGNED:
            for v in voters:
                if v != sid and v in node.q.servers:
                    _exchange(node, taken, sid, v)
    elif kind is QuorumStepKind.SHUTDOWN_TIMEOUT:
        _apply(node, taken, ShutdownTimeout(int(code[1])))
    elif kind is QuorumStepKind.UPDATE_VOTER:  # UpdateRaftVoter to the leader, answered
        sid = int(code[1])
        followed = node.q.servers[sid].leader
        assert followed is not None
        _apply(node, taken, UpdateVoter(sid))
        _exchange(node, taken, sid, followed)
    elif kind is QuorumStepKind.CHANGE_LISTENERS:
        _apply(node, taken, ChangeListeners(int(code[1])))
    elif kind in (QuorumStepKind.ADD_VOTER, QuorumStepKind.REMOVE_VOTER):
        leader, voter = int(code[1]), int(code[2])
        step: QuorumStep = AddVoter(voter, leader) if kind is QuorumStepKind.ADD_VOTER else RemoveVoter(voter, leader)
        outcome = node.q.apply(step)
        if not any(isinstance(e, VotersAppended) for e in outcome.effects):
            raise StepRefused(f"{code}: answered {[e['error'] for e in outcome.errors]}, nothing appended")
        taken.steps.append(step)
        for name, _detail in node.checker.observe(node.q, outcome):
            taken.broken.add(name)
        node.counters = c.spend(RECONFIGS)
    elif kind is QuorumStepKind.LOSE_DISK:
        _apply(node, taken, LoseDisk(int(code[1])))
        node.counters = c.spend(DISK_LOSSES)
    elif kind is QuorumStepKind.RESTART:
        _apply(node, taken, QuorumRestart(int(code[1])))
    elif kind is QuorumStepKind.DELIVER:
        _exchange(node, taken, int(code[1]), int(code[2]))
    else:
        raise ExploreError(f"unknown action code {code!r}")
    if space.bounds.messages == 0:  # what the action did not deliver is lost
        for source, destination in sorted(node.q.in_flight):
            while node.q.in_flight[(source, destination)]:
                _apply(node, taken, Drop(source, destination))
    return taken


def within_bounds(space: QuorumSpace, q: Quorum) -> bool:
    """The state constraints: no epoch (in memory or in a quorum-state file) above ``epochs``, no
    link with more than ``messages`` in flight."""
    b = space.bounds
    for _, s in sorted(q.servers.items()):
        if s.epoch > b.epochs or s.state_file.epoch > b.epochs:
            return False
    return all(len(msgs) <= b.messages for msgs in q.in_flight.values())


# -- the root ---------------------------------------------------------------------------------------


def root(space: QuorumSpace) -> tuple[Node, list[QuorumStep], list[str]]:
    """The search's first state (depth 0): every server started, or (``space.stable_root``) a stable
    leader: the lowest voter elected by every other voter, then three fetch rounds of every other
    voter in id order (the leader's records committed, every follower knowing the high watermark).
    Returns the node, the core steps taken, and the properties they broke (none for a sound
    protocol)."""
    q = Quorum(space.voters, space.observers, space.variant)
    node = Node(q, QuorumChecker(), Counters((0, 0, 0, 0, 0, 0)), None)
    steps: list[QuorumStep] = []
    broken: set[str] = set()
    if space.stable_root:
        leader = min(space.voters)
        others = [v for v in space.voters if v != leader]
        for code in ["E" + str(leader) + "".join(str(v) for v in others)] + [f"F{v}" for v in others] * 3:
            try:
                taken = take(space, node, code)
            except StepRefused as exc:
                raise ExploreError(f"the stable leader's prelude failed at {code}: {exc}") from None
            steps += taken.steps
            broken |= taken.broken
        s = q.servers[leader]
        if s.role is not QuorumRole.LEADER:
            raise ExploreError(f"the stable leader's prelude did not elect server {leader}")
        if space.returning is not None:
            node.stable = (leader, s.epoch)
    for code in space.prefix.split(SEPARATOR) if space.prefix else []:
        if code not in candidate_codes(space, node):
            raise ExploreError(f"--prefix: action {code!r} is not offered after {len(steps)} steps")
        try:
            taken = take(space, node, code)
        except StepRefused as exc:
            raise ExploreError(f"--prefix: action {code!r} is refused: {exc}") from None
        if not within_bounds(space, node.q):
            raise ExploreError(f"--prefix: action {code!r} leaves the bounds")
        steps += taken.steps
        broken |= taken.broken
    return node, steps, sorted(broken, key=PROPERTY_ORDER.__getitem__)


# -- paths ---------------------------------------------------------------------------------------


def replay_path(space: QuorumSpace, path: str) -> list[QuorumStep]:
    """The core steps of a path (the root's prelude first), replayed from the root."""
    node, steps, _ = root(space)
    for code in path.split(SEPARATOR) if path else []:
        if code not in candidate_codes(space, node):
            raise ExploreError(f"action {code!r} is not offered after {len(steps)} steps of path {path!r}")
        try:
            taken = take(space, node, code)
        except StepRefused as exc:
            raise ExploreError(f"action {code!r} of path {path!r} is refused: {exc}") from None
        steps += taken.steps
    return steps


def final_node(space: QuorumSpace, path: str) -> Node:
    """The state a path ends in."""
    node, _steps, _ = root(space)
    for code in path.split(SEPARATOR) if path else []:
        take(space, node, code)
    return node


def step_document(step: QuorumStep) -> dict[str, Any]:
    """A core step as a scenario file writes it: ``{kind: {arg: value}}`` (arguments left at their
    default are left out)."""
    spec = QUORUM_STEP_TABLE[step.kind]
    args: dict[str, Any] = {}
    for arg in spec.args:
        value = getattr(step, arg.name)
        if value is None or (arg.default is not None and value == arg.default):
            continue
        args[arg.name] = value.value if isinstance(value, CrashMode) else value
    return {step.kind.value: args}


# -- what the quorum family says of a search (``emulator.quorum.family``) --------------------------

# The flags of ``replemu explore`` a quorum search takes, with their defaults (its levels are not
# checkpointed: one process, no work directory, no Spark).
SEARCH_OPTIONS: tuple[SearchOption, ...] = (
    SearchOption("depth", 1000), SearchOption("voters", 3), SearchOption("observers", 0), SearchOption("records", 1),
    SearchOption("epochs", 3), SearchOption("reconfigs", 2), SearchOption("crashes", 0),
    SearchOption("power_crashes", 0, unset=0), SearchOption("messages", 0), SearchOption("disk_losses", 0),
    SearchOption("lost_responses", 0), SearchOption("stable", False, unset=False), SearchOption("returning"),
    SearchOption("any_round", False, unset=False), SearchOption("prefix"), SearchOption("steps"), SearchOption("until"),
)


def search_spaces(protocols: list[str], knobs: dict[str, Any], options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
    """The spaces of ``replemu explore`` (one per protocol) and its ``--until``, from its options
    (``SEARCH_OPTIONS``); ``ValueError`` names what is wrong, a ``--prefix`` that cannot be taken too."""
    voters = tuple(range(1, options["voters"] + 1))
    observers = tuple(range(len(voters) + 1, len(voters) + 1 + options["observers"]))
    if len(voters) + len(observers) > MAX_SERVERS:
        raise ExploreError(f"--voters and --observers: at most {MAX_SERVERS} servers, got {len(voters) + len(observers)}")
    bounds = QuorumBounds(depth=options["depth"], epochs=options["epochs"], appends=options["records"],
                          reconfigs=options["reconfigs"], crashes=options["crashes"], power_crashes=options["power_crashes"],
                          disk_losses=options["disk_losses"], lost_responses=options["lost_responses"],
                          messages=options["messages"])
    alphabet = parse_alphabet(options["steps"], QUORUM_STEP_TABLE, DEFAULT_QUORUM_ALPHABET, "quorum step kind")
    until = parse_until(options["until"], PROPERTY_NAMES, "property")
    spaces: list[SearchSpace] = []
    for protocol in protocols:
        space = QuorumSpace(voters, observers, QUORUM_VARIANT_TABLE.named(protocol, knobs), bounds, alphabet,
                            returning=options["returning"], stable=options["stable"], any_round=options["any_round"],
                            prefix=" ".join((options["prefix"] or "").split()))
        root(space)  # a prefix that cannot be taken is an error before anything runs
        spaces.append(space)
    return spaces, until


def describe_search(space: QuorumSpace) -> tuple[str, str]:
    """What the first line of ``replemu explore`` says of the space: before the engine, and after it."""
    b = space.bounds
    start = (f"stable leader {min(space.voters)}, returning server {space.returning}" if space.returning is not None
             else "stable leader" if space.stable else "every server started") + (f", then {space.prefix}" if space.prefix else "")
    return (f"voters {list(space.voters)}, observers {list(space.observers)}, root: {start}, depth {b.depth}, "
            f"epochs 1..{b.epochs}, appends {b.appends}, reconfigs {b.reconfigs}, crashes {b.crashes}, power crashes "
            f"{b.power_crashes}, disk losses {b.disk_losses}, lost responses {b.lost_responses}, messages {b.messages}, "
            f"vote rounds {'any set' if space.any_round else 'none, a bare majority or all'}, "
            f"steps {','.join(space.step_names())} ({''.join(CODE_OF_KIND[k] for k in space.alphabet)})", "")


def search_result(space: QuorumSpace) -> dict[str, Any]:
    """The fields of the result object of ``--json`` that say what was searched."""
    return {"family": "quorum", "protocol": space.variant.name, "voters": list(space.voters),
            "observers": list(space.observers),
            "root": "returning" if space.returning is not None else "stable" if space.stable else "started",
            "returning": space.returning, "any_round": space.any_round, "prefix": space.prefix,
            "bounds": space.bounds.as_dict()}


def counterexample(space: QuorumSpace, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
    """A violating path as a quorum scenario: the core's steps, the knobs, and an expect block that
    is what its own replay finds (for StableLeaderNotDisrupted, which the run's checker does not
    judge, the stable leader's final role and epoch too)."""
    protocol, b = space.variant.name, space.bounds
    steps = replay_path(space, path)
    flags = (f"--voters {len(space.voters)} --observers {len(space.observers)} --depth {b.depth} --epochs {b.epochs} "
             f"--records {b.appends} --reconfigs {b.reconfigs} --crashes {b.crashes} --power-crashes {b.power_crashes} "
             f"--disk-losses {b.disk_losses} --lost-responses {b.lost_responses} --messages {b.messages}"
             + (" --stable" if space.stable else "") + (f" --returning {space.returning}" if space.returning is not None else "")
             + (" --any-round" if space.any_round else "") + (f" --prefix '{space.prefix}'" if space.prefix else "")
             + (f" --steps {','.join(space.step_names())}" if space.alphabet != DEFAULT_QUORUM_ALPHABET else ""))
    doc: dict[str, Any] = {
        "name": counterexample_name(protocol, invariant),
        "description": (f"{invariant} under {protocol}: a shortest path ({depth} actions after the root, {len(steps)} steps), "
                        f"found by replemu explore --protocol {protocol} {flags}. Search path: {path}"),
        "voters": list(space.voters),
    }
    if space.observers:
        doc["observers"] = list(space.observers)
    if knobs:
        doc["knobs"] = dict(sorted(knobs.items()))
    doc["steps"] = [step_document(s) for s in steps]
    result = run_quorum_scenario(parse_quorum_scenario(doc, source=f"<{invariant}>"), protocol)
    expect: dict[str, Any] = {"violations": [v["invariant"] for v in result["violations"]]}
    node = final_node(space, path)
    if node.stable is not None:
        final = result["final"]["servers"][str(node.stable[0])]
        expect["servers"] = {node.stable[0]: {"role": final["role"], "epoch": final["epoch"]}}
    doc["expect"] = {protocol: expect}
    return Counterexample(doc, {"replay_violations": expect["violations"]}, knob_flags(knobs))
