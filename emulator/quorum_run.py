"""Replaying a metadata-quorum scenario (docs/quorum.md "Scenario files"): a ``Quorum`` stepped by
its steps, a ``QuorumChecker`` observing each step, one result document.

A quorum scenario is told from a partition scenario by its ``voters`` key::

    name: two-leaders
    voters: [1, 2, 3]
    observers: [4]          # optional
    knobs: {reconfig_requires_leader_epoch_commit: false}   # optional, over the preset
    steps:
      - election_timeout: {server: 1}
      - deliver: {source: 1, destination: 2}
    expect:                 # optional: per preset, what --check compares
      kraft853: {violations: [], leader: 1}

A step the protocol cannot take is refused (``StepRefused`` naming the step), never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .bounds import MAX_REPLICAS, short_repr
from .quorum import Quorum
from .quorum_invariants import QUORUM_INVARIANT_NAMES, QuorumChecker
from .quorum_state import ControlType, QuorumRecord, Server
from .quorum_steps import QuorumStep, describe_quorum_step, parse_quorum_step
from .quorum_variants import QUORUM_KNOBS, QUORUM_VARIANT_NAMES, QuorumVariant, quorum_variant_named
from .scenario import NAME_PATTERN, ScenarioError, StepRefused
from .steps import StepError, is_int
from .variants import KnobError

TOP_KEYS = ("name", "description", "voters", "observers", "knobs", "steps", "expect")
EXPECT_KEYS = ("violations", "leader", "errors", "servers")
SERVER_FIELDS = ("role", "alive", "voter", "epoch", "leader", "voted_for", "leo", "hw", "voters", "log")


@dataclass(frozen=True)
class QuorumScenario:
    name: str
    voters: tuple[int, ...]
    observers: tuple[int, ...]
    steps: tuple[QuorumStep, ...]
    knobs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "<memory>"

    @property
    def servers(self) -> tuple[int, ...]:
        return tuple(sorted(self.voters + self.observers))


def is_quorum_document(data: Any) -> bool:
    """A decoded scenario document of the metadata quorum (it names ``voters``)."""
    return isinstance(data, dict) and "voters" in data


def _ids(source: str, key: str, value: Any, required: bool) -> tuple[int, ...]:
    if value is None and not required:
        return ()
    if not isinstance(value, list) or (required and not value) or not all(is_int(v) and 0 <= v < 1_000_000 for v in value):
        raise ScenarioError(f"{source}: {key!r} must be a {'non-empty ' if required else ''}list of server ids "
                            f"(integers 0..999999), got {short_repr(value)}")
    if len(set(value)) != len(value):
        raise ScenarioError(f"{source}: {key!r} names a server twice: {short_repr(value)}")
    return tuple(value)


def parse_quorum_scenario(data: Any, source: str = "<memory>") -> QuorumScenario:
    """Validate a decoded quorum scenario; ``ScenarioError`` names the file, the key or step and why."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping")
    unknown = sorted(str(k) for k in data if k not in TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{source}: unknown key {short_repr(unknown[0])} (a quorum scenario allows: {', '.join(TOP_KEYS)})")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ScenarioError(f"{source}: 'name' must match [a-z0-9._-]+, got {short_repr(name)}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError(f"{source}: 'description' must be a string")
    voters = _ids(source, "voters", data.get("voters"), required=True)
    observers = _ids(source, "observers", data.get("observers"), required=False)
    if set(voters) & set(observers):
        raise ScenarioError(f"{source}: server {sorted(set(voters) & set(observers))[0]} is both a voter and an observer")
    if len(voters) + len(observers) > MAX_REPLICAS:
        raise ScenarioError(f"{source}: at most {MAX_REPLICAS} servers, got {len(voters) + len(observers)}")
    knobs_raw = data.get("knobs") or {}
    if not isinstance(knobs_raw, dict):
        raise ScenarioError(f"{source}: 'knobs' must be a mapping of knob names to values")
    knobs: dict[str, Any] = {}
    for key, value in knobs_raw.items():
        if key not in QUORUM_KNOBS:
            raise ScenarioError(f"{source}: knobs: unknown quorum knob {short_repr(key)} (known: {', '.join(QUORUM_KNOBS)})")
        try:
            knobs[key] = QUORUM_KNOBS[key].parse(value)
        except KnobError as bad_knob:  # (a name of its own: mypyc types a name by its first binding)
            raise ScenarioError(f"{source}: knobs: {bad_knob}") from None
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError(f"{source}: 'steps' must be a non-empty list")
    servers = tuple(sorted(voters + observers))
    steps = []
    for number, raw in enumerate(raw_steps, 1):
        if not isinstance(raw, dict) or len(raw) != 1:
            raise ScenarioError(f"{source}: step {number}: must be a mapping with exactly one step type, got {short_repr(raw)}")
        (kind, args), = raw.items()
        try:
            steps.append(parse_quorum_step(kind, args, servers))
        except StepError as bad_step:
            raise ScenarioError(f"{source}: step {number} ({kind}): {bad_step}") from None
    expect = _parse_expect(source, data.get("expect"), servers)
    return QuorumScenario(name, voters, observers, tuple(steps), knobs, description, expect, source)


def _parse_expect(source: str, raw: Any, servers: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source}: 'expect' must be a mapping of quorum protocols ({', '.join(QUORUM_VARIANT_NAMES)})")
    out: dict[str, dict[str, Any]] = {}
    for protocol, block in raw.items():
        where = f"{source}: expect.{protocol}"
        if protocol not in QUORUM_VARIANT_NAMES:
            raise ScenarioError(f"{where}: not a quorum protocol (known: {', '.join(QUORUM_VARIANT_NAMES)})")
        if not isinstance(block, dict):
            raise ScenarioError(f"{where}: must be a mapping with any of {', '.join(EXPECT_KEYS)}")
        for key in block:
            if key not in EXPECT_KEYS:
                raise ScenarioError(f"{where}: unknown key {short_repr(key)} (allowed: {', '.join(EXPECT_KEYS)})")
        names = block.get("violations", [])
        if not isinstance(names, list) or any(n not in QUORUM_INVARIANT_NAMES for n in names):
            raise ScenarioError(f"{where}.violations: must list quorum invariants ({', '.join(QUORUM_INVARIANT_NAMES)})")
        leader = block.get("leader")
        if leader is not None and leader not in servers:
            raise ScenarioError(f"{where}.leader: {short_repr(leader)} is not one of the servers {list(servers)}")
        errors = block.get("errors")
        if errors is not None and (not isinstance(errors, list) or not all(isinstance(e, str) for e in errors)):
            raise ScenarioError(f"{where}.errors: must be a list of Kafka error codes")
        wanted = block.get("servers")
        if wanted is not None:
            if not isinstance(wanted, dict) or any(k not in servers for k in wanted):
                raise ScenarioError(f"{where}.servers: must map server ids ({list(servers)}) to the fields expected")
            for sid, fields in wanted.items():
                if not isinstance(fields, dict) or any(f not in SERVER_FIELDS for f in fields):
                    raise ScenarioError(f"{where}.servers.{sid}: must map any of {', '.join(SERVER_FIELDS)} to a value")
        out[protocol] = dict(block)
    return out


# -- the result --------------------------------------------------------------------------------


def record_cell(r: QuorumRecord) -> str:
    """A record as the result shows it: its value, or its control type (a voter set with its ids)."""
    if r.control is ControlType.DATA:
        return r.value
    if r.control is ControlType.VOTERS:
        return f"{r.control.value}{[k[0] for k in r.voters]}"
    return r.control.value


def server_snapshot(s: Server, with_log: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": s.role.value, "alive": s.alive, "voter": s.is_voter(), "epoch": s.epoch, "leader": s.leader,
        "voted_for": None if s.voted_key is None else s.voted_key[0], "leo": s.leo, "hw": s.hw,
        "voters": list(s.voter_ids()),
    }
    if with_log:
        out["log"] = [[offset, r.epoch, record_cell(r)] for offset, r in enumerate(s.log)]
    return out


def quorum_snapshot(q: Quorum, with_logs: bool = True) -> dict[str, Any]:
    leaders = sorted(q.leaders(), key=lambda s: (s.epoch, s.id))  # a deposed leader may not know it yet: the newest epoch
    return {"leader": leaders[-1].id if leaders else None,
            "servers": {str(sid): server_snapshot(s, with_logs) for sid, s in sorted(q.servers.items())}}


def run_quorum_scenario(scenario: QuorumScenario, protocol: str, trace: bool = False,
                        knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replay ``scenario`` under the quorum preset ``protocol`` (its knobs, then the scenario's, then
    ``knobs``); the result is ``docs/quorum.md``'s result document. ``StepRefused`` names the step."""
    variant: QuorumVariant = quorum_variant_named(protocol, {**scenario.knobs, **(knobs or {})})
    q = Quorum(scenario.voters, scenario.observers, variant)
    checker = QuorumChecker()
    violations: list[dict[str, Any]] = []
    seen: set[str] = set()
    errors: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for number, step in enumerate(scenario.steps, 1):
        try:
            outcome = q.apply(step)
        except StepRefused as e:
            raise StepRefused(f"{scenario.source}: step {number} ({describe_quorum_step(step)}): refused under "
                              f"{protocol}: {e}") from None
        found = checker.observe(q, outcome)
        errors += [{"step": number, **e} for e in outcome.errors]
        fresh = []
        for name, detail in found:
            if name not in seen:
                seen.add(name)
                fresh.append({"invariant": name, "step": number, "detail": detail})
        violations += fresh
        if trace:
            rows.append({"step": number, "description": describe_quorum_step(step), "state": quorum_snapshot(q, with_logs=False),
                         "outcome": {"errors": [{"step": number, **e} for e in outcome.errors], "events": outcome.events,
                                     "violations": fresh}})
    overrides = {k: v for k, v in variant.knobs().items() if getattr(quorum_variant_named(protocol), k) != v}
    result: dict[str, Any] = {
        "scenario": scenario.name, "family": "quorum", "protocol": protocol, "knobs": overrides or None,
        "steps": len(scenario.steps), "final": quorum_snapshot(q), "violations": violations, "errors": errors,
    }
    if trace:
        result["trace"] = rows
    return result
