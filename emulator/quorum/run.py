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

from ..bounds import MAX_REPLICAS, PROGRESS_EVERY, short_repr
from ..result import not_expressible_result
from ..scenario import NAME_PATTERN
from ..step_table import ScenarioError, StepError, StepRefused, is_int
from ..variant_table import KnobError
from .invariants import QUORUM_INVARIANT_NAMES, QuorumChecker
from .model import Quorum
from .state import ControlType, QuorumRecord, QuorumRole, Server
from .steps import QUORUM_STEP_TABLE, QuorumStep
from .variants import (
    QUORUM_KNOB_TABLE,
    QUORUM_VARIANT_NAMES,
    QUORUM_VARIANT_TABLE,
    QuorumVariant,
)

TOP_KEYS = ("name", "description", "voters", "observers", "knobs", "steps", "expect")
EXPECT_KEYS = ("violations", "leader", "errors", "servers")
SERVER_FIELDS = ("role", "alive", "voter", "epoch", "leader", "voted_for", "leo", "hw", "voters", "shutting_down", "log")
# Fields a server's snapshot holds only when they differ from this value (a result of a scenario
# that never uses them reads as it did before them; an ``expect`` may still name them).
SERVER_FIELD_DEFAULTS: dict[str, Any] = {"shutting_down": False}


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


def parse_quorum_header(data: dict[str, Any], source: str = "<memory>") -> tuple[str, tuple[int, ...], tuple[int, ...],
                                                                           dict[str, Any], str]:
    """A quorum scenario's ``name``, ``voters``, ``observers``, ``knobs`` and ``description``
    validated (``ScenarioError`` naming ``source`` and the key); the stream's header row reads these."""
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
    try:
        knobs = QUORUM_KNOB_TABLE.parse(knobs_raw.items())
    except KnobError as bad_knob:  # (a name of its own: mypyc types a name by its first binding)
        raise ScenarioError(f"{source}: knobs: {bad_knob}") from None
    return name, voters, observers, knobs, description


def parse_quorum_scenario(data: Any, source: str = "<memory>") -> QuorumScenario:
    """Validate a decoded quorum scenario; ``ScenarioError`` names the file, the key or step and why."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping")
    unknown = sorted(str(k) for k in data if k not in TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{source}: unknown key {short_repr(unknown[0])} (a quorum scenario allows: {', '.join(TOP_KEYS)})")
    name, voters, observers, knobs, description = parse_quorum_header(data, source)
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
            steps.append(QUORUM_STEP_TABLE.parse(kind, args, servers))
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


def quorum_scenario_document(s: QuorumScenario, description: str | None = None,
                             expect: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A quorum scenario in the file's shape (``parse_quorum_scenario`` reads it back)."""
    doc: dict[str, Any] = {"name": s.name, "description": s.description if description is None else description,
                           "voters": list(s.voters)}
    if s.observers:
        doc["observers"] = list(s.observers)
    if s.knobs:
        doc["knobs"] = dict(sorted(s.knobs.items()))
    doc["steps"] = [QUORUM_STEP_TABLE.to_dict(step) for step in s.steps]
    if expect:
        doc["expect"] = expect
    return doc


# -- the result --------------------------------------------------------------------------------


def record_cell(r: QuorumRecord) -> str:
    """A record as the result shows it: its value, or its control type (a voter set with its ids)."""
    if r.control is ControlType.DATA:
        return r.value
    if r.control is ControlType.VOTERS:
        moved = {k[0]: e for k, e in zip(r.voters, r.endpoints) if e != 1}  # listeners changed since formatting
        return f"{r.control.value}{[k[0] for k in r.voters]}" + (f" listeners {moved}" if moved else "")
    return r.control.value


def server_snapshot(s: Server, with_log: bool = True, with_control: bool = False) -> dict[str, Any]:
    """A server in the result's ``final.servers`` shape; ``with_control`` adds ``control`` (the
    offsets of its log's control records: LeaderChange, VotersRecord), as ``--trace`` rows have it."""
    out: dict[str, Any] = {
        "role": s.role.value, "alive": s.alive, "voter": s.is_voter(), "epoch": s.epoch, "leader": s.leader,
        "voted_for": None if s.voted_key is None else s.voted_key[0], "leo": s.leo, "hw": s.hw,
        "voters": list(s.voter_ids()),
    }
    if s.shutting_down:  # SERVER_FIELD_DEFAULTS
        out["shutting_down"] = True
    if with_log:
        out["log"] = [[offset, r.epoch, record_cell(r)] for offset, r in enumerate(s.log)]
        if with_control:
            out["control"] = [offset for offset, r in enumerate(s.log) if r.control is not ControlType.DATA]
    return out


def quorum_snapshot(q: Quorum, with_logs: bool = True, with_control: bool = False) -> dict[str, Any]:
    leaders = sorted(q.leaders(), key=lambda s: (s.epoch, s.id))  # a deposed leader may not know it yet: the newest epoch
    return {"leader": leaders[-1].id if leaders else None,
            "servers": {str(sid): server_snapshot(s, with_logs, with_control) for sid, s in sorted(q.servers.items())}}


def run_quorum_scenario(scenario: QuorumScenario, protocol: str, trace: bool = False,
                        knobs: dict[str, Any] | None = None, refusal_as_result: bool = False,
                        progress=None) -> dict[str, Any]:
    """Replay ``scenario`` under the quorum preset ``protocol`` (its knobs, then the scenario's, then
    ``knobs``); the result is ``docs/quorum.md``'s result document. ``StepRefused`` names the step;
    with ``refusal_as_result`` the answer is the variant's "not expressible" result instead
    (``emulator.result.not_expressible_result``). ``progress(steps_done, steps)``, when given, is
    called every ``PROGRESS_EVERY`` steps (as ``run_scenario``'s)."""

    variant: QuorumVariant = QUORUM_VARIANT_TABLE.named(protocol, {**scenario.knobs, **(knobs or {})})
    q = Quorum(scenario.voters, scenario.observers, variant)
    checker = QuorumChecker()
    violations: list[dict[str, Any]] = []
    seen: set[str] = set()
    errors: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    total = len(scenario.steps)
    for number, step in enumerate(scenario.steps, 1):
        try:
            outcome = q.apply(step)
        except StepRefused as e:
            if refusal_as_result:
                return not_expressible_result(scenario.name, protocol, number, QUORUM_STEP_TABLE.describe(step), str(e),
                                              family="quorum")
            raise StepRefused(f"{scenario.source}: step {number} ({QUORUM_STEP_TABLE.describe(step)}): refused under "
                              f"{protocol}: {e}") from None
        if progress is not None and number % PROGRESS_EVERY == 0 and number < total:
            progress(number, total)
        found = checker.observe(q, outcome)
        errors += [{"step": number, **e} for e in outcome.errors]
        fresh = []
        for name, detail in found:
            if name not in seen:
                seen.add(name)
                fresh.append({"invariant": name, "step": number, "detail": detail})
        violations += fresh
        if trace:
            rows.append({"step": number, "description": QUORUM_STEP_TABLE.describe(step), "state": quorum_snapshot(q, with_logs=True, with_control=True),
                         "outcome": {"errors": [{"step": number, **e} for e in outcome.errors], "events": outcome.events,
                                     "violations": fresh}})
    overrides = QUORUM_VARIANT_TABLE.overrides(variant)
    result: dict[str, Any] = {
        "scenario": scenario.name, "family": "quorum", "protocol": protocol, "knobs": overrides or None,
        "steps": len(scenario.steps), "final": quorum_snapshot(q), "violations": violations, "errors": errors,
    }
    if trace:
        result["trace"] = rows
    return result


# -- reading a result back (the dashboard's input) -----------------------------------------------

_ROLES = tuple(r.value for r in QuorumRole)


def _server_problem(where: str, s: Any, trace_row: bool) -> str | None:
    if not isinstance(s, dict):
        return f"{where} must be a map of fields"
    for name in SERVER_FIELDS:
        if name == "log" and trace_row and "log" not in s:
            continue  # a trace written before its rows carried logs
        if name in SERVER_FIELD_DEFAULTS and name not in s:
            continue  # shown only when set
        if name not in s:
            return f"{where}: missing {name}"
    if s["role"] not in _ROLES:
        return f"{where}.role must be one of {', '.join(_ROLES)}"
    for name in ("epoch", "leo", "hw"):
        if not is_int(s[name]):
            return f"{where}.{name} must be an int"
    for name in ("alive", "voter"):
        if not isinstance(s[name], bool):
            return f"{where}.{name} must be true or false"
    for name in ("leader", "voted_for"):
        if s[name] is not None and not is_int(s[name]):
            return f"{where}.{name} must be a server id or null"
    if not isinstance(s["voters"], list) or not all(is_int(v) for v in s["voters"]):
        return f"{where}.voters must be a list of server ids"
    log = s.get("log", [])
    if not isinstance(log, list) or not all(isinstance(x, list) and len(x) == 3 and is_int(x[0]) and is_int(x[1])
                                            and isinstance(x[2], str) for x in log):
        return f"{where}.log: each record must be [offset, epoch, value]"
    control = s.get("control", [])
    if not isinstance(control, list) or not all(is_int(x) for x in control):
        return f"{where}.control must be a list of offsets"
    return None


def quorum_result_problem(r: Any) -> str | None:
    """What makes a decoded quorum result (``family: quorum``) unusable, or None: the fields a
    reader of the result document (docs/quorum.md) relies on, its trace's rows included."""
    if not isinstance(r, dict) or r.get("family") != "quorum":
        return "not a metadata-quorum result (family: quorum)"
    if not isinstance(r.get("scenario"), str) or not isinstance(r.get("protocol"), str):
        return "scenario and protocol must be strings"
    if not is_int(r.get("steps")):
        return "steps must be an int"
    final = r.get("final")
    if not isinstance(final, dict) or not isinstance(final.get("servers"), dict) or not final["servers"]:
        return "final.servers must be a map of server id to server"
    if any(not str(sid).isdigit() for sid in final["servers"]):
        return "final.servers: keys must be server ids"
    for sid, s in final["servers"].items():
        problem = _server_problem(f"final.servers.{sid}", s, trace_row=False)
        if problem:
            return problem
    for key in ("violations", "errors"):
        if not isinstance(r.get(key), list) or not all(isinstance(x, dict) and is_int(x.get("step")) for x in r[key]):
            return f"{key} must be a list of maps with a step"
    if not all(isinstance(v.get("invariant"), str) for v in r["violations"]):
        return "violations: each must name its invariant"
    trace = r.get("trace")
    if trace is None:
        return None
    if not isinstance(trace, list):
        return "trace must be a list of steps"
    for number, row in enumerate(trace, 1):
        where = f"trace[{number}]"
        if not isinstance(row, dict) or not is_int(row.get("step")) or not isinstance(row.get("state"), dict):
            return f"{where} must have step and state"
        servers = row["state"].get("servers")
        if not isinstance(servers, dict) or sorted(servers) != sorted(final["servers"]):
            return f"{where}.state.servers must name the servers of final.servers"
        for sid, s in servers.items():
            problem = _server_problem(f"{where}.state.servers.{sid}", s, trace_row=True)
            if problem:
                return problem
    return None
