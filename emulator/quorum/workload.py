"""Seeded random metadata-quorum scenarios for campaigns (docs/quorum.md "Campaigns").

``generate_quorum_scenario(seed, k, protocol)`` walks a ``Quorum`` of the preset from one
``random.Random`` seeded with ``replemu-quorum/<seed>/<k>``: each step's kind is drawn from
``QUORUM_STEP_TABLE`` by weight, its arguments from the servers (and, for ``deliver`` and ``drop``,
from the links with a message in flight), and a step the quorum refuses is drawn again (at most
``ATTEMPTS`` times), so every step of the scenario is one the protocol takes.  Everything -- the
voters, the observer, the length, each step -- comes from that one stream: the same seed, partition
number and preset give the same scenario document.
"""

from __future__ import annotations

import random
from typing import Any

from ..step_table import StepRefused
from .model import Quorum
from .steps import QUORUM_STEP_TABLE, QuorumStepKind
from .variants import QUORUM_VARIANT_TABLE

ATTEMPTS = 20
# how often each step kind is drawn: messages move most of the time
WEIGHTS: dict[QuorumStepKind, int] = {
    QuorumStepKind.DELIVER: 40, QuorumStepKind.FETCH: 16, QuorumStepKind.ELECTION_TIMEOUT: 6, QuorumStepKind.APPEND: 8,
    QuorumStepKind.DROP: 3, QuorumStepKind.ADD_VOTER: 3, QuorumStepKind.REMOVE_VOTER: 3, QuorumStepKind.CRASH: 3,
    QuorumStepKind.RESTART: 4, QuorumStepKind.RESIGN: 1, QuorumStepKind.BEGIN_QUORUM_EPOCH: 1, QuorumStepKind.LOSE_DISK: 1,
}
STEPS = (30, 90)  # the scenario's length is drawn from this range


def quorum_stream(seed: int, k: int) -> random.Random:
    return random.Random(f"replemu-quorum/{seed}/{k}")


def _draw_step(rng: random.Random, q: Quorum, servers: list[int], kinds: list[QuorumStepKind],
               weights: list[int], number: int) -> dict[str, Any]:
    kind = rng.choices(kinds, weights)[0]
    server = rng.choice(servers)
    if kind in (QuorumStepKind.DELIVER, QuorumStepKind.DROP):
        links = sorted(link for link, msgs in q.in_flight.items() if msgs)
        if links:
            source, destination = rng.choice(links)
            return {kind.value: {"source": source, "destination": destination}}
        kind = QuorumStepKind.ELECTION_TIMEOUT
    if kind is QuorumStepKind.FETCH:
        args: dict[str, Any] = {"server": server}
        if rng.random() < 0.3:
            args["to"] = rng.choice([s for s in servers if s != server] or servers)
        return {kind.value: args}
    if kind is QuorumStepKind.APPEND:
        return {kind.value: {"value": f"v{number}"}}
    if kind in (QuorumStepKind.ADD_VOTER, QuorumStepKind.REMOVE_VOTER):
        return {kind.value: {"voter": server}}
    if kind is QuorumStepKind.CRASH:
        return {kind.value: {"server": server, "mode": "power" if rng.random() < 0.3 else "process"}}
    if kind is QuorumStepKind.BEGIN_QUORUM_EPOCH:
        return {kind.value: {"server": server, "to": rng.choice(servers)}}
    return {kind.value: {"server": server}}


def generate_quorum_scenario(seed: int, k: int, protocol: str, knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Scenario ``k`` of campaign ``seed`` under the quorum preset ``protocol`` (its knobs, then
    ``knobs``), as a scenario document (``emulator.quorum.run.parse_quorum_scenario`` reads it)."""
    rng = quorum_stream(seed, k)
    n_voters = rng.choice((3, 3, 4, 5))
    voters = list(range(1, n_voters + 1))
    observers = [n_voters + 1]
    servers = voters + observers
    length = rng.randint(*STEPS)
    q = Quorum(tuple(voters), tuple(observers), QUORUM_VARIANT_TABLE.named(protocol, dict(knobs or {})))
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[kind] for kind in kinds]
    steps: list[dict[str, Any]] = []
    while len(steps) < length:
        for _ in range(ATTEMPTS):
            raw = _draw_step(rng, q, servers, kinds, weights, len(steps) + 1)
            (kind, args), = raw.items()
            number = q.step_number
            try:
                q.apply(QUORUM_STEP_TABLE.parse(kind, args, tuple(servers)))
            except StepRefused:
                q.step_number = number  # a refused step changed nothing else
                continue
            steps.append(raw)
            break
        else:
            break  # nothing this quorum can take (every server stopped and no restart drawn): end here
    doc: dict[str, Any] = {"name": f"campaign-{seed}-{protocol}-q{k}",
                           "description": f"quorum campaign seed {seed}, scenario {k}, generated under {protocol}",
                           "voters": voters, "observers": observers}
    if knobs:
        doc["knobs"] = dict(sorted(knobs.items()))
    doc["steps"] = steps
    return doc
