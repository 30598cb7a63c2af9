"""The KRaft metadata quorum (KIP-595, KIP-853, KIP-996): one ``__cluster_metadata-0`` partition
replicated among servers by Kafka's Raft, as a deterministic state machine stepped by the steps
of ``emulator.quorum.steps``.

``Quorum.apply(step)`` returns a ``QuorumOutcome``: Kafka's error answers are recorded, never
raised; a step the protocol cannot take (a delivery on a link with nothing in flight, an election
timeout on a leader, a server that does not exist) raises ``StepRefused`` and changes nothing.
The rules follow Kafka 3.9.0's ``KafkaRaftClient`` / ``QuorumState`` / ``LeaderState`` (the
method each comes from is named in its docstring); pre-vote (4.x, not in the 3.9.0 code) follows
apache/kafka commit 53364c5's ``KafkaRaftClient`` / ``QuorumState`` / ``ProspectiveState``, and
KIP-996 and Vanlightly/kafka-tlaplus ``kraft/kip_996`` where the code says nothing.  docs/quorum.md
lists them.

Standard library only; no clock (an election or fetch timeout is a step); every iteration over
servers is in id order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from ..epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache
from ..step_table import CrashMode, StepRefused
from .state import (
    BecameLeader,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    ControlType,
    ElectionState,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    HighWatermarkAdvanced,
    LeaderState,
    Message,
    PendingVoterChange,
    QuorumEffect,
    QuorumRecord,
    QuorumRole,
    ReplicaKey,
    ReplicaState,
    Server,
    Truncated,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
    VotersAppended,
    is_voter_key,
    majority,
)
from .steps import (
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
    RemoveVoter,
    Resign,
    Shutdown,
    ShutdownTimeout,
    UpdateVoter,
)
from .variants import KRAFT853, QuorumVariant

NONE = "NONE"


@dataclass
class QuorumOutcome:
    """What one step did: Kafka's error answers, events (dicts), effects (for the checker)."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    effects: list[QuorumEffect] = field(default_factory=list)


class Quorum:
    """A KRaft cluster-metadata partition replicated among ``voters`` and ``observers``."""

    def __init__(self, voters: tuple[int, ...], observers: tuple[int, ...] = (),
                 variant: QuorumVariant = KRAFT853) -> None:
        if not voters or len(set(voters) | set(observers)) != len(voters) + len(observers):
            raise ValueError("a quorum needs at least one voter and distinct server ids")
        self.variant = variant
        dynamic = variant.dynamic_voters
        bootstrap: tuple[ReplicaKey, ...] = tuple(sorted((v, 1 if dynamic else None) for v in voters))
        self.servers: dict[int, Server] = {}
        for sid in sorted(voters + observers):
            # Dynamic voters: an observer is formatted without initial controllers (KIP-853) and
            # learns the voter set from the leader's log; static voters are configuration.
            known = bootstrap if (sid in voters or not dynamic) else ()
            self.servers[sid] = Server(id=sid, directory_id=1, bootstrap_voters=known)
        self.in_flight: dict[tuple[int, int], deque[Message]] = {}
        self.step_number = 0
        self._out = QuorumOutcome()
        # What the servers did when they started (KafkaRaftClient.initialize: a lone voter elects itself),
        # reported with the first step's outcome (the checker observes it then).
        self.pending: QuorumOutcome | None = None
        for _, s in sorted(self.servers.items()):
            self._maybe_elect_only_voter(s)
        if self._out.effects or self._out.events:
            self.pending = self._out

    # -- the step entry point --------------------------------------------------------------

    def apply(self, step: QuorumStep) -> QuorumOutcome:
        """Take one step; a refused step raises ``StepRefused`` before changing anything."""
        p = self.pending
        self._out = QuorumOutcome() if p is None else QuorumOutcome(list(p.errors), list(p.events), list(p.effects))
        self.step_number += 1
        if isinstance(step, ElectionTimeout):
            self._election_timeout(self._server(step.server, alive=True))
        elif isinstance(step, Deliver):
            self._deliver(step.source, step.destination)
        elif isinstance(step, Drop):
            self._link_or_refuse(step.source, step.destination).popleft()
            self._event("MessageDropped", source=step.source, destination=step.destination)
        elif isinstance(step, QuorumFetch):
            self._send_fetch(self._server(step.server, alive=True), step.to, step.max_records)
        elif isinstance(step, BeginQuorumEpoch):
            self._resend_begin_quorum_epoch(self._server(step.server, alive=True), step.to)
        elif isinstance(step, Resign):
            s = self._server(step.server, alive=True)
            if step.epoch is None:
                self._resign(s)
            else:
                self._resign_epoch(s, step.epoch)
        elif isinstance(step, CheckQuorum):
            self._check_quorum(self._server(step.server, alive=True))
        elif isinstance(step, Shutdown):
            self._begin_shutdown(self._server(step.server, alive=True))
        elif isinstance(step, ShutdownTimeout):
            self._shutdown_timeout(self._server(step.server, alive=True))
        elif isinstance(step, UpdateVoter):
            self._update_voter_period(self._server(step.server, alive=True))
        elif isinstance(step, ChangeListeners):
            self._change_listeners(self._server(step.server, alive=False))
        elif isinstance(step, Append):
            self._append(self._admin_target(step.server), step.value)
        elif isinstance(step, AddVoter):
            self._add_voter(self._admin_target(step.server), self._server(step.voter))
        elif isinstance(step, RemoveVoter):
            self._remove_voter(self._admin_target(step.server), self._server(step.voter))
        elif isinstance(step, QuorumCrash):
            self._crash(self._server(step.server, alive=True), CrashMode(step.mode))
        elif isinstance(step, QuorumRestart):
            self._restart(self._server(step.server, alive=False))
        elif isinstance(step, LoseDisk):
            self._lose_disk(self._server(step.server, alive=False))
        else:  # pragma: no cover - the step union is closed
            raise StepRefused(f"unknown quorum step {step!r}")
        self._poll()
        self.pending = None
        return self._out

    def _poll(self) -> None:
        """Each server's poll at the end of a step (3.9.0 ``KafkaRaftClient.poll``), in id order: a server
        shutting down completes its shutdown first when it can (``maybeCompleteShutdown``: it is an
        observer, the only voter, or follows another leader) and stops; else a leader resigns when it is
        shutting down or its resignation was requested (``pollLeader``: ``shutdown.get() != null ||
        state.isResignRequested()``; ``LeaderState.requestResign`` by ``resign(epoch)`` or by
        ``RemoveVoterHandler.highWatermarkUpdated`` once its own removal committed), after the message
        that moved its HW was answered."""
        for _, s in sorted(self.servers.items()):
            if s.shutting_down and s.alive and self._may_complete_shutdown(s):
                self._event("ShutdownCompleted", server=s.id, role=s.role.value, epoch=s.epoch)
                self._stop(s, CrashMode.PROCESS)
            elif s.role is QuorumRole.LEADER and s.leader_state is not None and (
                    s.shutting_down or s.leader_state.resign_requested):
                self._resign(s)

    @staticmethod
    def _may_complete_shutdown(s: Server) -> bool:
        """3.9.0 ``maybeCompleteShutdown``: ``quorum.isObserver() || quorum.isOnlyVoter() ||
        quorum.hasRemoteLeader()``."""
        voters = s.last_voters()[1]
        only_voter = len(voters) == 1 and is_voter_key(voters, s.key)
        return not s.is_voter() or only_voter or (s.leader is not None and s.leader != s.id)

    def _begin_shutdown(self, s: Server) -> None:
        """``KafkaRaftClient.shutdown(timeoutMs)``: the GracefulShutdown is set; the poll at the end of
        this step completes it or makes a leader resign (``_poll``)."""
        if s.shutting_down:
            raise StepRefused(f"server {s.id} is already shutting down")
        s.shutting_down = True
        self._event("ShutdownBegan", server=s.id, role=s.role.value, epoch=s.epoch)

    def _shutdown_timeout(self, s: Server) -> None:
        """The GracefulShutdown's timer expires (``maybeCompleteShutdown``: ``hasTimedOut`` ->
        ``failWithTimeout``): the shutdown future fails with TimeoutException and the client stops."""
        if not s.shutting_down:
            raise StepRefused(f"server {s.id} is not shutting down: it has no shutdown timer")
        self._error(s, "shutdown", "TimeoutException", detail="the graceful shutdown timed out")
        self._stop(s, CrashMode.PROCESS)

    # -- reading -----------------------------------------------------------------------------

    def leaders(self) -> list[Server]:
        return [s for _, s in sorted(self.servers.items()) if s.role is QuorumRole.LEADER]

    def messages(self, source: int, destination: int) -> tuple[Message, ...]:
        return tuple(self.in_flight.get((source, destination), ()))

    def _server(self, sid: int, alive: bool | None = None) -> Server:
        server = self.servers.get(sid)
        if server is None:
            raise StepRefused(f"server {sid} is not one of the quorum's servers {sorted(self.servers)}")
        if alive is True and not server.alive:
            raise StepRefused(f"server {sid} is stopped")
        if alive is False and server.alive:
            raise StepRefused(f"server {sid} is running")
        return server

    def _admin_target(self, sid: int | None) -> Server:
        if sid is not None:
            return self._server(sid, alive=True)
        leaders = [s for s in self.leaders() if s.alive]
        if not leaders:
            raise StepRefused("no server is leader: name the server the request goes to")
        return max(leaders, key=lambda s: (s.epoch, -s.id))

    def _error(self, server: Server, api: str, code: str, **detail: Any) -> None:
        self._out.errors.append({"server": server.id, "api": api, "error": code, **detail})

    def _event(self, name: str, **detail: Any) -> None:
        self._out.events.append({"event": name, **detail})

    # -- messages ----------------------------------------------------------------------------

    def _send(self, source: int, destination: int, message: Message) -> None:
        self.in_flight.setdefault((source, destination), deque()).append(message)

    def _send_request(self, s: Server, destination: int, message: Message) -> None:
        """``maybeSendRequest``: a new correlation id, and the response from ``destination`` expected is
        this request's (``RequestManager.onRequestSent``; a request sent again replaces the one before,
        as Kafka's after its request timeout)."""
        s.next_correlation += 1
        s.expected[destination] = s.next_correlation
        self._send(s.id, destination, replace(message, correlation_id=s.next_correlation))

    def _respond(self, s: Server, destination: int, request: Message, response: Message) -> None:
        """The answer, with the request's correlation id; a response naming a leader carries its endpoints
        when this server knows them (``quorum.leaderEndpoints()``: empty for an unattached server)."""
        answer: Any = response  # every response kind has ``endpoints`` (the union's type does not say so)
        # an UpdateRaftVoter answer's endpoints are never read (3.9.0 handleUpdateVoterResponse: see UpdateVoterResponse)
        endpoints = False if isinstance(response, UpdateVoterResponse) else self._knows_leader_endpoints(s)
        self._send(s.id, destination, replace(answer, correlation_id=request.correlation_id, endpoints=endpoints))

    @staticmethod
    def _knows_leader_endpoints(s: Server) -> bool:
        return s.leader is not None and (s.leader == s.id or s.leader_endpoints)

    def _link_or_refuse(self, source: int, destination: int) -> deque[Message]:
        self._server(source), self._server(destination)
        link = self.in_flight.get((source, destination))
        if not link:
            raise StepRefused(f"no message in flight from {source} to {destination}")
        return link

    def _deliver(self, source: int, destination: int) -> None:
        link = self._link_or_refuse(source, destination)
        receiver = self._server(destination, alive=True)
        message = link.popleft()
        sender = self.servers[source]
        if isinstance(message, VoteRequest):
            self._respond(receiver, source, message, self._handle_vote_request(receiver, message))
        elif isinstance(message, BeginQuorumEpochRequest):
            self._respond(receiver, source, message, self._handle_begin_quorum_epoch_request(receiver, message))
        elif isinstance(message, EndQuorumEpochRequest):
            self._respond(receiver, source, message, self._handle_end_quorum_epoch_request(receiver, message))
        elif isinstance(message, FetchRequest):
            self._respond(receiver, source, message, self._handle_fetch_request(receiver, message))
        elif isinstance(message, UpdateVoterRequest):
            self._respond(receiver, source, message, self._handle_update_voter_request(receiver, message))
        elif receiver.expected.get(source) != message.correlation_id:
            # handleInboundMessage (3.9.0): a response is handled only if it answers the request now
            # expected from that node (RequestManager.isResponseExpected); any other is ignored.
            self._event("ResponseIgnored", server=receiver.id, source=source, api=type(message).__name__)
        else:
            del receiver.expected[source]  # onResponseResult: the connection is ready (or backs off) again
            if isinstance(message, VoteResponse):
                self._handle_vote_response(receiver, source, message)
            elif isinstance(message, (BeginQuorumEpochResponse, EndQuorumEpochResponse)):
                self._handle_epoch_response(receiver, sender, message)
            elif isinstance(message, FetchResponse):
                self._handle_fetch_response(receiver, message)
            elif isinstance(message, UpdateVoterResponse):
                # 3.9.0 handleUpdateVoterResponse: maybeHandleCommonResponse, nothing else
                self._maybe_handle_common_response(receiver, message.error, message.leader_id, message.leader_epoch,
                                                   message.endpoints)

    # -- transitions (QuorumState) ----------------------------------------------------------------

    def _persist(self, s: Server) -> None:
        """``QuorumState.durableTransitionTo``: the quorum-state file is written before the new state is used."""
        s.state_file = ElectionState(s.epoch, s.voted_key, s.leader)

    def _become(self, s: Server, role: QuorumRole, epoch: int, leader: int | None = None,
                voted: ReplicaKey | None = None, durable: bool = True, reset: bool = True) -> None:
        """A transition of ``QuorumState``; ``reset``: the client forgets its requests in flight
        (``resetConnections``, from onBecomeLeader / onBecomeCandidate / transitionToUnattached /
        transitionToResigned / onBecomeFollower; not when an unattached server grants a vote)."""
        if s.role is QuorumRole.LEADER and role is not QuorumRole.LEADER:
            self._end_leadership(s)
        if epoch != s.epoch or role is not QuorumRole.FOLLOWER:
            s.has_fetched_from_leader = False
        s.role, s.epoch, s.leader, s.voted_key = role, epoch, leader, voted
        s.votes_granted, s.votes_rejected, s.backing_off = set(), set(), False
        if reset:
            s.expected = {}
        if role is QuorumRole.FOLLOWER:
            s.leader_endpoints = True
        elif role is not QuorumRole.PROSPECTIVE:  # a prospective keeps its state's (ProspectiveState.leaderEndpoints)
            s.leader_endpoints = False
        if durable:
            self._persist(s)
        self._event("Transition", server=s.id, role=role.value, epoch=epoch, leader=leader)

    def _end_leadership(self, s: Server) -> None:
        """A leader's state closes: a pending AddRaftVoter / RemoveRaftVoter is answered
        NOT_LEADER_OR_FOLLOWER (``LeaderState.close``)."""
        ls = s.leader_state
        if ls is not None and ls.pending is not None:
            self._error(s, ls.pending.operation, "NOT_LEADER_OR_FOLLOWER", voter=ls.pending.voter[0])
        s.leader_state = None

    def _transition_to_unattached(self, s: Server, epoch: int, leader: int | None = None) -> None:
        self._become(s, QuorumRole.UNATTACHED, epoch, leader=leader)

    def _transition_to_follower(self, s: Server, epoch: int, leader: int) -> None:
        """``QuorumState.transitionToFollower``; a leader cannot follow in its own epoch (IllegalStateException)."""
        if leader == s.id:
            raise StepRefused(f"server {s.id} cannot follow itself")
        self._become(s, QuorumRole.FOLLOWER, epoch, leader=leader)

    def _maybe_transition(self, s: Server, leader: int | None, epoch: int, endpoints: bool = True) -> bool:
        """``KafkaRaftClient.maybeTransition``: follow a higher epoch (its leader, or unattached), or
        learn the leader of the current epoch -- or its endpoints, which an unattached server that knows
        only the leader's id lacks (``leaderEndpoints.size() > quorum.leaderEndpoints().size()``).
        ``endpoints``: the message carries the leader's endpoints; else this server's voter set may
        (``lastVoterSet().listeners(leaderId)``).  Returns False when the leader is inconsistent
        (``hasConsistentLeader``: a message naming this server leader while it is not one, or another
        leader than the one it knows in the same epoch; Kafka throws IllegalStateException): recorded."""
        if leader == s.id and (s.role is not QuorumRole.LEADER or epoch != s.epoch):
            # 3.9.0 hasConsistentLeader: consistent only if this server is the leader (and a leader told
            # of a higher epoch led by itself would have to follow itself: QuorumState throws too).
            self._event("InconsistentLeader", server=s.id, epoch=epoch, known=s.leader, claimed=leader)
            return False
        if epoch == s.epoch and leader is not None and s.leader is not None and leader != s.leader:
            self._event("InconsistentLeader", server=s.id, epoch=epoch, known=s.leader, claimed=leader)
            return False
        if epoch == s.epoch and leader is not None and s.role is QuorumRole.LEADER and leader != s.id:
            self._event("InconsistentLeader", server=s.id, epoch=epoch, known=s.id, claimed=leader)
            return False
        known = leader is not None and (endpoints or s.voter_key_of(leader) is not None)
        if epoch > s.epoch:
            if leader is None:
                self._transition_to_unattached(s, epoch)
            elif known:
                self._transition_to_follower(s, epoch, leader)
            else:
                self._unknown_endpoints(s, leader, epoch)
        elif leader is not None and (s.leader is None or (known and not self._knows_leader_endpoints(s))):
            if known:
                self._transition_to_follower(s, epoch, leader)
            else:
                self._unknown_endpoints(s, leader, epoch)
        return True

    def _unknown_endpoints(self, s: Server, leader: int, epoch: int) -> None:
        """3.9.0 ``KafkaRaftClient.transitionToFollower`` throws IllegalArgumentException when neither the
        message nor this server's voter set has the leader's endpoints: recorded, no transition."""
        self._event("UnknownLeaderEndpoints", server=s.id, epoch=epoch, leader=leader)

    def _election_timeout(self, s: Server) -> None:
        """The election timeout of an unattached / follower / candidate / prospective voter (Kafka's
        ``pollUnattached`` / ``pollFollowerAsVoter`` / ``pollCandidate`` / ``pollResigned``).  An
        observer never campaigns (``QuorumState.transitionToCandidate`` throws; its timeout only
        makes it look for the leader) and a leader has no election timeout: both refused."""
        if s.role is QuorumRole.LEADER:
            raise StepRefused(f"server {s.id} is the leader of epoch {s.epoch}: no election timeout")
        if s.shutting_down:
            # 3.9.0 pollResigned / pollCandidate / pollUnattachedAsVoter: a server shutting down stays where it is
            # until a leader is elected or the shutdown times out (a candidate keeps its election going)
            raise StepRefused(f"server {s.id} is shutting down: it waits for a leader, no election timeout")
        if s.role is QuorumRole.RESIGNED and not s.is_voter():
            # pollResigned (3.9.0): an old leader no longer in the voter set goes unattached in epoch + 1,
            # so that no fetch response names it leader of its old epoch.
            self._transition_to_unattached(s, s.epoch + 1)
            return
        if not s.is_voter():
            raise StepRefused(f"server {s.id} is an observer: it never becomes candidate")
        if self.variant.pre_vote:
            # apache/kafka 53364c5 (4.x) KafkaRaftClient: pollResigned -> transitionToUnattached(epoch + 1);
            # pollProspective -> prospectiveTransitionAfterElectionLoss; pollCandidate (election timeout
            # or backoff complete), pollUnattachedAsVoter, pollFollowerAsVoter -> transitionToProspective.
            if s.role is QuorumRole.RESIGNED:
                self._transition_to_unattached(s, s.epoch + 1)
            elif s.role is QuorumRole.PROSPECTIVE:
                self._prospective_election_loss(s)
            else:
                self._transition_to_prospective(s)
            return
        self._transition_to_candidate(s)

    def _transition_to_prospective(self, s: Server) -> None:
        """``QuorumState.transitionToProspective`` (53364c5): the same epoch, leader id, endpoints and voted
        key (a candidate's own), memory only; ``onBecomeProspective`` forgets the requests in flight and
        pre-votes are sent (``maybeSendVoteRequests`` with preVote)."""
        leader = s.leader
        self._become(s, QuorumRole.PROSPECTIVE, s.epoch, leader=leader, voted=s.voted_key, durable=False)
        s.election_voters = s.last_voters()[1]
        s.votes_granted = {s.id}
        self._send_vote_requests(s, pre_vote=True)
        self._maybe_conclude_pre_vote(s)

    def _transition_to_candidate(self, s: Server) -> None:
        """``QuorumState.transitionToCandidate``: epoch + 1, vote for itself (durable), Vote to every
        other voter of the last voter set (``maybeSendVoteRequests``); alone, it leads at once."""
        self._become(s, QuorumRole.CANDIDATE, s.epoch + 1, voted=s.key)
        s.election_voters = s.last_voters()[1]
        s.votes_granted = {s.id}
        self._send_vote_requests(s, pre_vote=False)
        self._maybe_transition_to_leader(s)

    def _send_vote_requests(self, s: Server, pre_vote: bool) -> None:
        for key in s.election_voters:
            if key[0] != s.id and key[0] in self.servers:
                self._send_request(s, key[0], VoteRequest(s.epoch, s.key, s.last_epoch(), s.leo, key, pre_vote))

    def _maybe_transition_to_leader(self, s: Server) -> None:
        """``KafkaRaftClient.maybeTransitionToLeader`` / ``onBecomeLeader``: with a majority of its
        election's voters granted, the candidate leads; its LeaderState starts at its LEO, and it
        appends a LeaderChange record (with dynamic voters and a voter set only in the bootstrap
        checkpoint, a VotersRecord too: ``appendStartOfEpochControlRecords``), then sends
        BeginQuorumEpoch to every other voter."""
        if len(s.votes_granted) < majority(s.election_voters):
            return
        granted = tuple(sorted(s.votes_granted))
        # LeaderState.election() = ElectionState.withElectedLeader: no voted key (votedId -1 in the file)
        self._become(s, QuorumRole.LEADER, s.epoch, leader=s.id)
        start = s.leo
        s.leader_state = LeaderState(epoch=s.epoch, epoch_start_offset=start, granting_voters=granted)
        self._out.effects.append(BecameLeader(s.id, s.epoch))
        self._append_records(s, [QuorumRecord(s.epoch, f"leader={s.id}", ControlType.LEADER_CHANGE)])
        offset, voters = s.last_voters()
        if self.variant.dynamic_voters and (offset == -1 or s.voter_node_needs_update()):
            # appendStartOfEpochControlRecords: the voter set with the leader's own node as configured, when the
            # log has none yet or the leader's listeners differ (VoterSet.updateVoter(localVoterNode))
            value = "bootstrap" if offset == -1 else f"update_voter={s.id}"
            self._append_records(s, [QuorumRecord(s.epoch, value, ControlType.VOTERS, voters,
                                                  self._endpoints(s, voters, {s.id: s.listeners}))])
        if not s.shutting_down:  # BeginQuorumEpoch is sent by pollLeader, which resigns at once when shutting down
            for key in voters:
                if key[0] != s.id and key[0] in self.servers:
                    self._send_request(s, key[0], BeginQuorumEpochRequest(s.epoch, s.id, key))
        self._update_leader_end_offset(s)

    def _resign(self, s: Server) -> None:
        """``QuorumState.transitionToResigned`` (memory only: the file keeps this server as leader) and
        EndQuorumEpoch to every other voter, preferred successors by descending fetch offset."""
        if s.role is not QuorumRole.LEADER or s.leader_state is None:
            raise StepRefused(f"server {s.id} is not a leader: it cannot resign")
        ls = s.leader_state
        voters = {k[0]: k for k in s.last_voters()[1] if k[0] != s.id}
        others = sorted(voters)

        def fetched(v: int) -> int:
            replica = ls.replicas.get(voters[v])
            return -1 if replica is None or replica.end_offset is None else replica.end_offset

        successors = tuple(sorted(others, key=lambda v: (-fetched(v), v)))
        self._become(s, QuorumRole.RESIGNED, s.epoch, leader=s.id, durable=False)  # ResignedState.election(): no vote
        for v in others:
            if v in self.servers:
                self._send_request(s, v, EndQuorumEpochRequest(s.epoch, s.id, successors))

    def _resign_epoch(self, s: Server, epoch: int) -> None:
        """3.9.0 ``KafkaRaftClient.resign(epoch)``: a newer epoch or a server that does not lead this epoch
        cannot (IllegalArgumentException: refused); an older epoch, or a resigned leader's own, is
        ignored; the leader's resignation is requested (``LeaderState.requestResign``) and happens at
        its next poll (the end of this step)."""
        if epoch > s.epoch:
            raise StepRefused(f"server {s.id} cannot resign from epoch {epoch}, above its epoch {s.epoch}")
        if epoch < s.epoch:
            self._event("ResignIgnored", server=s.id, epoch=epoch, current=s.epoch)
            return
        if s.leader != s.id:
            raise StepRefused(f"server {s.id} is not the leader of epoch {epoch}: it cannot resign")
        if s.role is not QuorumRole.LEADER or s.leader_state is None:
            self._event("ResignIgnored", server=s.id, epoch=epoch, current=s.epoch)
            return
        s.leader_state.resign_requested = True

    def _check_quorum(self, s: Server) -> None:
        """The check-quorum interval of a leader ends (``LeaderState.timeUntilCheckQuorumExpires``, 3.9.0;
        its timer restarts once a majority fetched: ``updateCheckQuorumForFollowingVoter``): unless a
        majority of its voters (the leader counted when it is one) fetched during the interval, it resigns
        (``pollLeader``); else the next interval starts.  A one-voter leader's timer never expires."""
        ls = s.leader_state
        if s.role is not QuorumRole.LEADER or ls is None:
            raise StepRefused(f"server {s.id} is not a leader: it has no check-quorum timer")
        voters = s.last_voters()[1]
        if len(voters) == 1:
            raise StepRefused(f"server {s.id} leads a one-voter quorum: its check-quorum timer never expires")
        fetched = len(ls.fetched_voters) + (1 if is_voter_key(voters, s.key) else 0)
        if fetched >= majority(voters):
            ls.fetched_voters = set()
            self._event("CheckQuorumPassed", server=s.id, epoch=s.epoch)
            return
        self._event("CheckQuorumFailed", server=s.id, epoch=s.epoch, fetched=sorted(ls.fetched_voters))
        self._resign(s)

    def _resend_begin_quorum_epoch(self, s: Server, to: int) -> None:
        if s.role is not QuorumRole.LEADER:
            raise StepRefused(f"server {s.id} is not a leader")
        key = s.voter_key_of(to)
        if key is None or to == s.id:
            raise StepRefused(f"server {to} is not another voter of leader {s.id}")
        self._send_request(s, to, BeginQuorumEpochRequest(s.epoch, s.id, key))

    # -- Vote ----------------------------------------------------------------------------------

    def _log_up_to_date(self, s: Server, last_epoch: int, last_offset: int) -> bool:
        """The candidate's (last epoch, end offset) is at least this server's (``OffsetAndEpoch.compareTo``)."""
        return (last_epoch, last_offset) >= (s.last_epoch(), s.leo)

    def _handle_vote_request(self, s: Server, r: VoteRequest) -> VoteResponse:
        """``KafkaRaftClient.handleVoteRequest``: FENCED_LEADER_EPOCH for an older epoch; a higher epoch
        makes the receiver unattached first (a pre-vote's too: apache/kafka 53364c5);
        INVALID_VOTER_KEY when the candidate names another directory of this id (KIP-853); then
        the state's ``canGrantVote`` decides and a granted standard vote is persisted."""
        pre = r.pre_vote
        if r.candidate_epoch < s.epoch:
            return VoteResponse("FENCED_LEADER_EPOCH", s.epoch, s.leader, False, pre)
        if r.candidate_epoch > s.epoch:
            # 3.9.0 and 53364c5 handleVoteRequest: a (pre-)vote of a higher epoch moves the receiver first
            self._transition_to_unattached(s, r.candidate_epoch)
        if r.voter_key[0] != s.id or (r.voter_key[1] is not None and r.voter_key[1] != s.directory_id):
            return VoteResponse("INVALID_VOTER_KEY", s.epoch, s.leader, False, pre)
        log_ok = self._log_up_to_date(s, r.last_offset_epoch, r.last_offset)
        granted = self._can_grant_pre_vote(s, log_ok) if pre else self._can_grant_vote(s, r.candidate_key, log_ok)
        if granted and not pre and s.role is QuorumRole.UNATTACHED and s.voted_key is None:
            self._become(s, QuorumRole.UNATTACHED, r.candidate_epoch, voted=r.candidate_key, reset=False)
        elif granted and not pre and s.role is QuorumRole.PROSPECTIVE and s.voted_key is None:
            s.voted_key = r.candidate_key  # 4.x QuorumState.prospectiveAddVotedState (durable)
            self._persist(s)
        self._event("VoteAnswered", server=s.id, candidate=r.candidate_key[0], epoch=r.candidate_epoch,
                    granted=granted, pre_vote=pre)
        return VoteResponse(NONE, s.epoch, s.leader, granted, pre)

    def _can_grant_vote(self, s: Server, candidate: ReplicaKey, log_ok: bool) -> bool:
        """``EpochState.canGrantVote`` (3.9.0): only an unattached state grants -- again to the key it
        voted for (a vote without directory id matches any), never once it knows a leader, else if
        the candidate's log is up to date. Follower, candidate, leader and resigned reject."""
        if s.role not in (QuorumRole.UNATTACHED, QuorumRole.PROSPECTIVE):
            return False
        if s.voted_key is not None:
            return s.voted_key[0] == candidate[0] and (s.voted_key[1] is None or s.voted_key[1] == candidate[1])
        if s.leader is not None:
            return False
        return log_ok

    def _can_grant_pre_vote(self, s: Server, log_ok: bool) -> bool:
        """4.x ``unattachedOrProspectiveCanGrantVote`` / ``FollowerState.canGrantVote`` (KIP-996, TLA+ kip_996
        ``GrantPreVote``): any state but leader grants a pre-vote to an up-to-date
        log, a follower only while it has not fetched successfully from its leader in this epoch."""
        if s.role is QuorumRole.LEADER:
            return False
        if s.role is QuorumRole.FOLLOWER:
            return log_ok and not s.has_fetched_from_leader
        return log_ok

    def _maybe_handle_common_response(self, s: Server, error: str, leader: int | None, epoch: int,
                                      endpoints: bool = True) -> bool:
        """``KafkaRaftClient.maybeHandleCommonResponse``: True when the response was handled here (an
        older epoch is ignored; a newer one, FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER moves this
        server to the epoch and leader the response names)."""
        if epoch < s.epoch or error == "UNKNOWN_LEADER_EPOCH":
            return True
        if epoch > s.epoch or error in ("FENCED_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER"):
            self._maybe_transition(s, leader, epoch, endpoints)
            return True
        if leader is not None and s.leader is None:
            # the leader of this epoch learned (transitionToFollower; naming this server: inconsistent)
            return not self._maybe_transition(s, leader, epoch, endpoints) or error != NONE
        return error in ("BROKER_NOT_AVAILABLE", "INVALID_VOTER_KEY")

    def _handle_vote_response(self, s: Server, voter: int, r: VoteResponse) -> None:
        """``KafkaRaftClient.handleVoteResponse``: a candidate records the vote of a voter of its election
        (``CandidateState.recordGrantedVote``), leads with a majority, backs off once a majority
        rejected; a prospective counts pre-votes the same way (KIP-996)."""
        if self._maybe_handle_common_response(s, r.error, r.leader_id, r.leader_epoch, r.endpoints) or r.error != NONE:
            return
        expected = QuorumRole.PROSPECTIVE if r.pre_vote else QuorumRole.CANDIDATE
        if s.role is not expected:
            self._event("VoteResponseIgnored", server=s.id, voter=voter, role=s.role.value)
            return
        if voter not in {k[0] for k in s.election_voters}:
            raise StepRefused(f"server {voter} is not a voter of {s.id}'s election")
        (s.votes_granted if r.vote_granted else s.votes_rejected).add(voter)
        if r.pre_vote:
            self._maybe_conclude_pre_vote(s)
        elif r.vote_granted:
            self._maybe_transition_to_leader(s)
        elif len(s.election_voters) - len(s.votes_rejected) < majority(s.election_voters):
            s.backing_off = True  # CandidateState.isVoteRejected: the next election_timeout retries
            self._event("ElectionLost", server=s.id, epoch=s.epoch)

    def _maybe_conclude_pre_vote(self, s: Server) -> None:
        """53364c5 ``maybeTransitionToCandidate`` / ``maybeHandleElectionLoss``: a majority of pre-votes
        makes a candidate; a majority rejecting is an election loss."""
        if len(s.votes_granted) >= majority(s.election_voters):
            self._transition_to_candidate(s)
        elif len(s.election_voters) - len(s.votes_rejected) < majority(s.election_voters):
            self._prospective_election_loss(s)

    def _prospective_election_loss(self, s: Server) -> None:
        """53364c5 ``prospectiveTransitionAfterElectionLoss`` (election lost or timed out): follower of
        the known leader when its endpoints are known, else unattached with the leader id it knows; the
        same epoch keeps the voted key (4.x ``QuorumState.transitionToFollower`` /
        ``transitionToUnattached``), durably."""
        if s.leader is not None and s.leader_endpoints:
            self._become(s, QuorumRole.FOLLOWER, s.epoch, leader=s.leader, voted=s.voted_key)
        else:
            self._become(s, QuorumRole.UNATTACHED, s.epoch, leader=s.leader, voted=s.voted_key)

    # -- BeginQuorumEpoch / EndQuorumEpoch ---------------------------------------------------------

    def _handle_begin_quorum_epoch_request(self, s: Server, r: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        """``handleBeginQuorumEpochRequest``: FENCED_LEADER_EPOCH for an older epoch, else follow the
        leader (``maybeTransition``); INVALID_VOTER_KEY after that when the key is another directory's."""
        if r.leader_epoch < s.epoch:
            return BeginQuorumEpochResponse("FENCED_LEADER_EPOCH", s.epoch, s.leader)
        self._maybe_transition(s, r.leader_id, r.leader_epoch)
        if r.voter_key[0] != s.id or (r.voter_key[1] is not None and r.voter_key[1] != s.directory_id):
            return BeginQuorumEpochResponse("INVALID_VOTER_KEY", s.epoch, s.leader)
        return BeginQuorumEpochResponse(NONE, s.epoch, s.leader)

    def _handle_end_quorum_epoch_request(self, s: Server, r: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        """``handleEndQuorumEpochRequest``: FENCED_LEADER_EPOCH for an older epoch, else ``maybeTransition``;
        a follower of that leader shortens its fetch timeout (not modelled: any election_timeout may come)."""
        if r.leader_epoch < s.epoch:
            return EndQuorumEpochResponse("FENCED_LEADER_EPOCH", s.epoch, s.leader)
        self._maybe_transition(s, r.leader_id, r.leader_epoch)
        if s.role is QuorumRole.FOLLOWER and s.leader == r.leader_id:
            self._event("FetchTimeoutOverridden", server=s.id, position=list(r.preferred_successors).index(s.id)
                        if s.id in r.preferred_successors else -1)
        return EndQuorumEpochResponse(NONE, s.epoch, s.leader)

    def _handle_epoch_response(self, s: Server, sender: Server,
                               r: BeginQuorumEpochResponse | EndQuorumEpochResponse) -> None:
        if self._maybe_handle_common_response(s, r.error, r.leader_id, r.leader_epoch, r.endpoints):
            return
        if isinstance(r, BeginQuorumEpochResponse) and s.leader_state is not None and r.error == NONE:
            s.leader_state.acknowledged.add(sender.id)  # LeaderState.addAcknowledgementFrom

    # -- Fetch ---------------------------------------------------------------------------------

    def _send_fetch(self, s: Server, to: int | None, max_records: int | None) -> None:
        if s.role is QuorumRole.LEADER:
            raise StepRefused(f"server {s.id} is the leader: it does not fetch")
        if s.role in (QuorumRole.CANDIDATE, QuorumRole.PROSPECTIVE):
            raise StepRefused(f"server {s.id} is {s.role.value}: it does not fetch")
        if s.shutting_down:
            raise StepRefused(f"server {s.id} is shutting down: it does not fetch (pollUnattachedAsVoter, pollResigned)")
        # without the leader's endpoints (an unattached server that knows only its id) Kafka fetches from
        # the bootstrap servers (pollUnattachedCommon): name one with `to`
        target = to if to is not None else (s.leader if self._knows_leader_endpoints(s) else None)
        if target is None or target == s.id:
            raise StepRefused(f"server {s.id} knows no leader: name the server its fetch goes to")
        self._server(target)
        self._send_request(s, target, FetchRequest(s.key, s.epoch, s.leo, s.last_epoch(), max_records))

    def _handle_fetch_request(self, s: Server, r: FetchRequest) -> FetchResponse:
        """``tryCompleteFetchRequest``: ``validateLeaderOnlyRequest`` (FENCED_LEADER_EPOCH older,
        UNKNOWN_LEADER_EPOCH newer, NOT_LEADER_OR_FOLLOWER not leader), then
        ``ReplicatedLog.validateOffsetAndEpoch``: the diverging epoch and end offset when the
        fetcher's last fetched epoch ends before its fetch offset here, else the records, the
        fetcher's state updated (``LeaderState.updateReplicaState``) and maybe the HW."""
        if r.current_leader_epoch < s.epoch:
            return FetchResponse("FENCED_LEADER_EPOCH", s.epoch, s.leader)
        if r.current_leader_epoch > s.epoch:
            return FetchResponse("UNKNOWN_LEADER_EPOCH", s.epoch, s.leader)
        ls = s.leader_state
        if s.role is not QuorumRole.LEADER or ls is None:
            return FetchResponse("NOT_LEADER_OR_FOLLOWER", s.epoch, s.leader)
        hw = -1 if ls.high_watermark is None else ls.high_watermark
        if r.fetch_offset != 0:  # ReplicatedLog.validateOffsetAndEpoch: offset 0 of a log starting at 0 is valid
            epoch, end = self._end_offset_for_epoch(s, r.last_fetched_epoch)
            if epoch != r.last_fetched_epoch or end < r.fetch_offset:
                return FetchResponse(NONE, s.epoch, s.id, high_watermark=hw, diverging_epoch=epoch, diverging_end_offset=end)
        replica = ls.replicas.setdefault(s.replica_state_key(r.replica_key), ReplicaState(r.replica_key))
        leader_leo = s.leo
        # ReplicaState.updateFollowerState: caught up when it reached the leader's LEO now or at its last fetch.
        if r.fetch_offset >= leader_leo or (replica.last_fetch_leader_leo > 0 and r.fetch_offset >= replica.last_fetch_leader_leo):
            replica.caught_up = True
        replica.last_fetch_leader_leo, replica.end_offset = leader_leo, r.fetch_offset
        if is_voter_key(s.last_voters()[1], r.replica_key):
            ls.fetched_voters.add(r.replica_key[0])  # LeaderState.updateFetchedVoters
            self._maybe_update_high_watermark(s)
        hw = -1 if ls.high_watermark is None else ls.high_watermark
        end = len(s.log) if r.max_records is None else min(len(s.log), r.fetch_offset + r.max_records)
        return FetchResponse(NONE, s.epoch, s.id, tuple(s.log[r.fetch_offset:end]), r.fetch_offset, hw)

    def _end_offset_for_epoch(self, s: Server, epoch: int) -> tuple[int, int]:
        """``KafkaMetadataLog.endOffsetForEpoch``: the largest epoch <= ``epoch`` and its end offset
        (the leader-epoch cache, 2.1+ semantics); an empty cache answers (last epoch, LEO)."""
        found_epoch, end = s.cache.end_offset_for(epoch, s.leo, "v2")
        if found_epoch == UNDEFINED_EPOCH or end < 0:
            return s.last_epoch(), s.leo
        return found_epoch, end

    def _handle_fetch_response(self, s: Server, r: FetchResponse) -> None:
        """``handleFetchResponse``: a diverging epoch truncates (``ReplicatedLog.truncateToEndOffset``;
        below the HW Kafka throws and the client dies: the server stops here), records are appended
        (a voter flushes: ``appendAsFollower``), the HW follows the leader's (never down)."""
        if self._maybe_handle_common_response(s, r.error, r.leader_id, r.leader_epoch, r.endpoints):
            return
        if r.error != NONE or s.role is not QuorumRole.FOLLOWER:
            return
        if r.diverging_epoch >= 0:
            to = self._truncation_offset(s, r.diverging_epoch, r.diverging_end_offset)
            if to < s.hw:
                self._error(s, "Fetch", "KafkaException", detail=f"truncation to {to} below the high watermark {s.hw}")
                self._stop(s, CrashMode.PROCESS)
                return
            self._truncate(s, to)
        else:
            if r.base_offset != s.leo:  # an answer to an older fetch: Kafka's log rejects the append
                self._event("FetchResponseIgnored", server=s.id, base=r.base_offset, leo=s.leo)
                return
            if r.records:
                # handleFetchResponse: only records are appended (records.sizeInBytes() > 0), and
                # appendAsFollower flushes a voter's log or any controller's: core RaftManager.scala
                # builds a controller's client with followersAlwaysFlush (3.9.0), and only
                # controllers become voters, so every server here flushes what it appends.
                self._append_records(s, list(r.records))
            if r.high_watermark >= 0:
                s.hw = max(s.hw, min(r.high_watermark, s.leo))
        s.has_fetched_from_leader = True

    def _truncation_offset(self, s: Server, epoch: int, end: int) -> int:
        if epoch == 0:
            return min(end, s.leo)
        local_epoch, local_end = self._end_offset_for_epoch(s, epoch)
        return min(local_end, end) if local_epoch == epoch else local_end

    # -- the log --------------------------------------------------------------------------------

    def _append_records(self, s: Server, records: list[QuorumRecord], flush: bool = True) -> None:
        for record in records:
            s.cache.assign(record.epoch, s.leo)
            s.log.append(record)
        if flush:
            s.flushed = s.leo

    def _truncate(self, s: Server, to: int) -> None:
        if to >= s.leo:
            return
        del s.log[to:]
        s.cache.truncate_from_end(to)
        s.flushed = min(s.flushed, to)
        self._out.effects.append(Truncated(s.id, to))
        self._event("Truncated", server=s.id, to=to)

    def _append(self, s: Server, value: str) -> None:
        """A client write (``KafkaRaftClient.prepareAppend``): NOT_LEADER_OR_FOLLOWER unless leader;
        the leader appends in its epoch and flushes (``flushLeaderLog``)."""
        if s.role is not QuorumRole.LEADER:
            self._error(s, "append", "NOT_LEADER_OR_FOLLOWER")
            return
        self._append_records(s, [QuorumRecord(s.epoch, value)])
        self._update_leader_end_offset(s)

    def _update_leader_end_offset(self, s: Server) -> None:
        """``LeaderState.updateLocalState``: the leader's own end offset, then maybe the HW."""
        ls = s.leader_state
        assert ls is not None
        ls.replicas[s.replica_state_key(s.key)] = ReplicaState(s.key, s.leo, s.leo, True)
        self._maybe_update_high_watermark(s)

    def _maybe_update_high_watermark(self, s: Server) -> None:
        """``LeaderState.maybeUpdateHighWatermark``: the offset held by a majority of the voters of the
        LAST voter set (committed or not; the leader counts only if it is one), only above the epoch
        start offset (a record of this epoch is committed first), and never down."""
        ls = s.leader_state
        assert ls is not None
        voters = s.last_voters()[1]
        offsets = sorted(((ls.replicas[k].end_offset if k in ls.replicas else None) for k in voters),
                         key=lambda o: -1 if o is None else o, reverse=True)
        candidate = offsets[len(voters) // 2]
        if candidate is None or candidate <= ls.epoch_start_offset:
            return
        if ls.high_watermark is not None and candidate <= ls.high_watermark:
            return
        ls.high_watermark = candidate
        s.hw = max(s.hw, candidate)
        self._out.effects.append(HighWatermarkAdvanced(s.id, s.epoch, candidate))
        self._maybe_complete_voter_change(s)

    # -- AddRaftVoter / RemoveRaftVoter (KIP-853) --------------------------------------------------

    def _check_voter_change(self, s: Server, operation: str) -> tuple[int, tuple[ReplicaKey, ...]] | None:
        """The checks AddVoterHandler and RemoveVoterHandler share, in their order; the error is
        recorded and None returned when one fails."""
        if s.role is not QuorumRole.LEADER or s.leader_state is None:
            self._error(s, operation, "NOT_LEADER_OR_FOLLOWER")
            return None
        ls = s.leader_state
        if ls.pending is not None:
            self._error(s, operation, "REQUEST_TIMED_OUT", detail="a voter change is pending")
            return None
        if self.variant.reconfig_requires_leader_epoch_commit:
            if ls.high_watermark is None:
                self._error(s, operation, "REQUEST_TIMED_OUT", detail="no high watermark in this epoch yet")
                return None
            hw = ls.high_watermark
        else:
            hw = s.hw  # the thesis' commitIndex, inherited from the previous epochs
        if not self.variant.dynamic_voters:
            self._error(s, operation, "UNSUPPORTED_VERSION", detail="kraft.version 0")
            return None
        offset, voters = s.last_voters()
        if offset >= hw:
            self._error(s, operation, "REQUEST_TIMED_OUT", detail=f"voter set at {offset} not committed (HW {hw})")
            return None
        return offset, voters

    def _add_voter(self, s: Server, new: Server) -> None:
        """``AddVoterHandler.handleAddVoterRequest`` + ``handleApiVersionsResponse`` (the ApiVersions round
        trip is not modelled): DUPLICATE_VOTER for a voter id, REQUEST_TIMED_OUT for an observer not
        caught up (``LeaderState.isReplicaCaughtUp``), else a VotersRecord with it, pending until committed."""
        checked = self._check_voter_change(s, "add_voter")
        if checked is None:
            return
        offset, voters = checked
        if new.id in {k[0] for k in voters}:
            self._error(s, "add_voter", "DUPLICATE_VOTER", voter=new.id)
            return
        ls = s.leader_state
        assert ls is not None
        replica = ls.replicas.get(s.replica_state_key(new.key))
        if not new.alive or replica is None or replica.key != new.key or not replica.caught_up:
            self._error(s, "add_voter", "REQUEST_TIMED_OUT", detail=f"server {new.id} is not caught up")
            return
        self._append_voter_change(s, "add_voter", new.key, tuple(sorted(voters + (new.key,))), offset)

    def _remove_voter(self, s: Server, old: Server) -> None:
        """``RemoveVoterHandler.handleRemoveVoterRequest``: VOTER_NOT_FOUND when the key is not a voter
        (or removing it leaves no voter), else a VotersRecord without it, pending until committed."""
        checked = self._check_voter_change(s, "remove_voter")
        if checked is None:
            return
        offset, voters = checked
        remaining = tuple(k for k in voters if k != old.key)
        if len(remaining) == len(voters) or not remaining:
            self._error(s, "remove_voter", "VOTER_NOT_FOUND", voter=old.id)
            return
        self._append_voter_change(s, "remove_voter", old.key, remaining, offset)

    def _append_voter_change(self, s: Server, operation: str, voter: ReplicaKey, voters: tuple[ReplicaKey, ...],
                             previous: int) -> None:
        ls = s.leader_state
        assert ls is not None
        at = s.leo
        listeners = {voter[0]: self.servers[voter[0]].listeners} if operation == "add_voter" else {}
        self._append_records(s, [QuorumRecord(s.epoch, f"{operation}={voter[0]}", ControlType.VOTERS, voters,
                                              self._endpoints(s, voters, listeners))])
        ls.pending = PendingVoterChange(operation, voter, at)
        self._out.effects.append(VotersAppended(s.id, at, previous))
        self._event("VotersAppended", server=s.id, offset=at, voters=[k[0] for k in voters])
        self._update_leader_end_offset(s)

    def _maybe_complete_voter_change(self, s: Server) -> None:
        """``RemoveVoterHandler.highWatermarkUpdated`` (and the add handler's): committed, the change is
        answered NONE; a leader no longer in the voter set resigns (``requestResign``)."""
        ls = s.leader_state
        if ls is None or ls.pending is None or ls.high_watermark is None or ls.high_watermark <= ls.pending.offset:
            return
        pending, ls.pending = ls.pending, None
        self._event("VoterChangeCompleted", server=s.id, operation=pending.operation, voter=pending.voter[0], error=NONE)
        if not s.is_voter():
            ls.resign_requested = True  # RemoveVoterHandler.highWatermarkUpdated -> requestResign (pollLeader)

    @staticmethod
    def _endpoints(s: Server, voters: tuple[ReplicaKey, ...], changed: dict[int, int]) -> tuple[int, ...]:
        """A new VotersRecord's endpoints: each voter's listeners as ``s``'s last voter set holds them (an added
        voter's and an updated one's from ``changed``); () when all are the first (1)."""
        out = tuple(changed.get(k[0], s.voter_listeners(k[0]) or 1) for k in voters)
        return () if all(x == 1 for x in out) else out

    # -- UpdateRaftVoter (KIP-853) --------------------------------------------------------------------

    def _update_voter_period(self, s: Server) -> None:
        """3.9.0 ``pollFollowerAsVoter``: the update-voter period expired -- UpdateRaftVoter to the leader when
        ``lastKraftVersion().isReconfigSupported()`` and ``voterNodeNeedsUpdate(localVoterNode)``, else a
        Fetch (``maybeSendFetchOrFetchSnapshot``); ``resetUpdateVoterPeriod`` either way."""
        if s.role is not QuorumRole.FOLLOWER or not s.is_voter() or s.shutting_down or s.leader is None:
            raise StepRefused(f"server {s.id} is not a follower voter: it has no update-voter period "
                              f"({s.role.value}{', shutting down' if s.shutting_down else ''}"
                              f"{'' if s.is_voter() else ', an observer'})")
        if self.variant.dynamic_voters and s.voter_node_needs_update():
            self._send_request(s, s.leader, UpdateVoterRequest(s.key, s.epoch, s.listeners))
        else:
            self._send_fetch(s, None, None)

    def _handle_update_voter_request(self, s: Server, r: UpdateVoterRequest) -> UpdateVoterResponse:
        """3.9.0 ``handleUpdateVoterRequest`` (``validateLeaderOnlyRequest``: FENCED_LEADER_EPOCH older,
        UNKNOWN_LEADER_EPOCH newer, NOT_LEADER_OR_FOLLOWER not leader, BROKER_NOT_AVAILABLE shutting down)
        then ``UpdateVoterHandler.handleUpdateVoterRequest``, in its order: a pending AddRaftVoter /
        RemoveRaftVoter or no high watermark yet -> REQUEST_TIMED_OUT; kraft.version 0 ->
        UNSUPPORTED_VERSION; the last voter set not committed -> REQUEST_TIMED_OUT; the key not a voter ->
        VOTER_NOT_FOUND; else a VotersRecord with the voter's listeners, answered NONE at once (not
        waiting for the commit, and with no pending change)."""
        ls = s.leader_state
        offset, voters = s.last_voters()
        if r.current_leader_epoch < s.epoch:
            code = "FENCED_LEADER_EPOCH"
        elif r.current_leader_epoch > s.epoch:
            code = "UNKNOWN_LEADER_EPOCH"
        elif s.role is not QuorumRole.LEADER or ls is None:
            code = "NOT_LEADER_OR_FOLLOWER"
        elif s.shutting_down:  # pragma: no cover - a leader shutting down resigns at the end of the step
            code = "BROKER_NOT_AVAILABLE"
        elif ls.pending is not None or ls.high_watermark is None:
            code = "REQUEST_TIMED_OUT"
        elif not self.variant.dynamic_voters:
            code = "UNSUPPORTED_VERSION"
        elif offset >= ls.high_watermark:
            code = "REQUEST_TIMED_OUT"
        elif not is_voter_key(voters, r.voter_key):
            code = "VOTER_NOT_FOUND"
        else:
            code = NONE
        if code != NONE:
            # the voter's RPC answer, recorded as an admin request's is (KafkaRaftClientReconfigTest asserts it)
            self._error(s, "update_voter", code, voter=r.voter_key[0])
            return UpdateVoterResponse(code, s.epoch, s.leader)
        at = s.leo
        self._append_records(s, [QuorumRecord(s.epoch, f"update_voter={r.voter_key[0]}", ControlType.VOTERS, voters,
                                              self._endpoints(s, voters, {r.voter_key[0]: r.listeners}))])
        self._out.effects.append(VotersAppended(s.id, at, offset))
        self._event("VotersAppended", server=s.id, offset=at, voters=[k[0] for k in voters], updated=r.voter_key[0])
        self._update_leader_end_offset(s)
        return UpdateVoterResponse(NONE, s.epoch, s.id)

    def _change_listeners(self, s: Server) -> None:
        """A stopped server's listeners are reconfigured; it starts with them (``QuorumState.initialize``)."""
        s.listeners += 1
        self._event("ListenersChanged", server=s.id, listeners=s.listeners)
        self._restart(s)

    # -- crash, restart, disk loss --------------------------------------------------------------------

    def _stop(self, s: Server, mode: CrashMode) -> None:
        """The process is gone: its memory with it (a pending voter change is answered by no one:
        the admin client's request times out), and whatever was in flight to or from it."""
        s.leader_state = None
        s.role = QuorumRole.STOPPED
        s.expected = {}
        s.shutting_down = False
        if mode is CrashMode.POWER:
            self._truncate(s, s.flushed)
        for link in sorted(self.in_flight):
            if s.id in link:
                self.in_flight[link].clear()
        self._event("Stopped", server=s.id, mode=mode.value)

    def _crash(self, s: Server, mode: CrashMode) -> None:
        self._stop(s, mode)

    def _restart(self, s: Server) -> None:
        """``QuorumState.initialize``: the file's epoch below the log's last epoch -> unattached in the
        log's epoch; the file's leader is this server -> resigned (no second leader, no reuse of an
        (offset, epoch)); voted for itself -> candidate (Vote requests again); voted -> unattached
        voted; a leader -> follower (unattached if not a known voter); else unattached.  The HW is
        not persisted (0)."""
        f = s.state_file
        s.hw, s.leader_state = 0, None
        s.votes_granted, s.votes_rejected, s.backing_off, s.has_fetched_from_leader = set(), set(), False, False
        s.epoch, s.voted_key, s.leader, s.leader_endpoints = f.epoch, f.voted_key, f.leader, False
        if f.epoch < s.last_epoch():
            s.role, s.epoch, s.voted_key, s.leader = QuorumRole.UNATTACHED, s.last_epoch(), None, None
        elif f.leader == s.id:
            # ResignedState with no preferred successors; pollResigned sends EndQuorumEpoch to the voters
            s.role = QuorumRole.RESIGNED
            for v in s.voter_ids():
                if v != s.id and v in self.servers:
                    self._send_request(s, v, EndQuorumEpochRequest(s.epoch, s.id, ()))
        elif f.voted_key is not None and f.voted_key[0] == s.id and s.is_voter():
            s.role = QuorumRole.CANDIDATE
            s.election_voters = s.last_voters()[1]
            s.votes_granted = {s.id}
            self._send_vote_requests(s, pre_vote=False)
        elif f.voted_key is not None:
            s.role = QuorumRole.UNATTACHED
        elif f.leader is not None and s.voter_key_of(f.leader) is not None:
            s.role = QuorumRole.FOLLOWER
            s.leader_endpoints = True
        else:
            s.role = QuorumRole.UNATTACHED
        self._persist(s)
        self._event("Restarted", server=s.id, role=s.role.value, epoch=s.epoch)
        if s.role is QuorumRole.CANDIDATE:
            self._maybe_transition_to_leader(s)  # KafkaRaftClient.initialize -> onBecomeCandidate
        self._maybe_elect_only_voter(s)

    def _maybe_elect_only_voter(self, s: Server) -> None:
        """3.9.0 ``KafkaRaftClient.initialize``: "When there is only a single voter, become candidate
        immediately" (``quorum.isOnlyVoter() && !quorum.isCandidate()`` -> transitionToCandidate, which
        wins at once); with pre-vote the lone voter's prospective state concludes at once too."""
        voters = s.last_voters()[1]
        if s.alive and s.role not in (QuorumRole.CANDIDATE, QuorumRole.LEADER) and len(voters) == 1 \
                and is_voter_key(voters, s.key):
            if self.variant.pre_vote:
                self._transition_to_prospective(s)
            else:
                self._transition_to_candidate(s)

    def _lose_disk(self, s: Server) -> None:
        """The disk is replaced and the server formatted again: a new directory id, no log, no
        quorum-state file; static voters keep their configured voter set (the KIP-853 motivation:
        it votes as if it had its log), dynamic ones learn it from the leader as observers."""
        s.directory_id = 1 + max(x.directory_id for x in self.servers.values())
        s.log, s.flushed, s.hw, s.cache = [], 0, 0, LeaderEpochCache("v2")
        s.state_file = ElectionState(0)
        if self.variant.dynamic_voters:
            s.bootstrap_voters = ()
        self._event("DiskLost", server=s.id, directory_id=s.directory_id)
        self._restart(s)
