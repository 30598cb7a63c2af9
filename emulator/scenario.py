"""Scenarios (docs/scenario-format.md §1) as data, validated from their decoded form.

``parse_scenario`` turns a decoded document (the mapping a YAML file holds) into a
``Scenario`` and raises ``ScenarioError`` naming the source, the step and the reason; nothing is
half-applied.  Reading files (YAML, Kafka replica directories) is ``scenario_io``'s job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .bounds import INT32_MAX, MAX_REPLICAS, short_repr
from .config import Config, ConfigError, parse_config
from .invariants import INVARIANT_NAMES
from .result import CONTROLLER_FIELDS, LOSS_FIELDS, REPLICA_FIELDS
from .step_table import ScenarioError, StepError, StepRefused, is_int, is_text  # noqa: F401 (StepRefused: read from here too)
from .steps import STEP_KINDS, STEP_TABLE, Step
from .variants import VARIANT_NAMES

NAME_PATTERN = re.compile(r"^[a-z0-9._-]+$")


@dataclass(frozen=True)
class Scenario:
    name: str
    replicas: tuple[int, ...]
    steps: tuple[Step, ...]
    config: Config = Config()
    description: str = ""
    topic: str = "t"
    partition: int = 0
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "<memory>"
    topic_named: bool = False  # the file has a ``topic`` key (the stream keys partitions by it)
    initial_state: str | None = None  # Kafka replica directories to start from (resolved path)
    brokers: tuple[int, ...] = ()  # the cluster's other brokers (``brokers`` less ``replicas``): a reassignment's targets

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Every broker a step may name: the replicas, then the other brokers."""
        return self.replicas + self.brokers


class _Reader:
    """Typed access to one mapping of the file, raising ``ScenarioError`` with context."""

    def __init__(self, source: str, where: str, data: Any, allowed: tuple[str, ...]) -> None:
        self.source, self.where = source, where
        if not isinstance(data, dict):
            self.fail(f"must be a mapping, got {_type_name(data)}")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            self.fail(f"unknown key {short_repr(unknown[0])} (allowed: {', '.join(allowed)})")
        self.data = data

    def fail(self, reason: str) -> None:
        raise ScenarioError(f"{self.source}: {self.where}: {reason}")

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, kind: Callable[[Any], bool], what: str, default: Any = None, required: bool = False) -> Any:
        if key not in self.data:
            if required:
                self.fail(f"missing required key {key!r}")
            return default
        value = self.data[key]
        if not kind(value):
            self.fail(f"{key!r} must be {what}, got {short_repr(value)}")
        return value


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_str(v: Any) -> bool:
    return is_text(v)


def _is_int_list(v: Any) -> bool:
    return isinstance(v, list) and all(is_int(x) for x in v)


TOP_KEYS = ("name", "description", "topic", "partition", "replicas", "brokers", "config", "steps", "expect", "initial_state")
EXPECT_KEYS = ("violations", "losses", "replicas", "controller", "at_step")


def step_from_mapping(source: str, number: int, raw: Any, replicas: tuple[int, ...]) -> Step:
    """Step ``number`` of a scenario, in its YAML form ``{type: {args}}``."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ScenarioError(
            f"{source}: step {number}: a step is a mapping with exactly one key, its type "
            f"(one of {', '.join(STEP_KINDS)}); got {short_repr(raw)}"
        )
    (kind, args), = raw.items()
    where = f"step {number}" if kind not in STEP_KINDS else f"step {number} ({kind})"
    try:
        return STEP_TABLE.parse(kind, args, replicas)
    except StepError as exc:
        raise ScenarioError(f"{source}: {where}: {exc}") from None


_STEP_CACHE_MAX = 4096
_SCALAR_TYPES = (int, str, bool, type(None))


def _parse_steps(source: str, raw_steps: list, replicas: tuple[int, ...]) -> tuple[Step, ...]:
    """Every step, parsed once per distinct form: steps are frozen, and most of a long file's
    repeat (``fetch: {replica: 2}``), so a repeated one is the same object (a cache of at most
    ``_STEP_CACHE_MAX`` forms, keyed by kind, argument names, types and values: ``true`` is not ``1``)."""
    cache: dict[tuple, Step] = {}
    steps: list[Step] = []
    for number, raw in enumerate(raw_steps, start=1):
        key = None
        if type(raw) is dict and len(raw) == 1:
            (kind, args), = raw.items()
            if type(args) is dict and all(type(v) in _SCALAR_TYPES for v in args.values()):
                key = (kind, *((k, type(v), v) for k, v in args.items()))
                hit = cache.get(key)
                if hit is not None:
                    steps.append(hit)
                    continue
        step = step_from_mapping(source, number, raw, replicas)
        if key is not None and len(cache) < _STEP_CACHE_MAX:
            cache[key] = step
        steps.append(step)
    return tuple(steps)


def _check_fields(r: "_Reader", where: str, fields: Any, table: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    """A map of result field -> expected value, each field known and each value one it can take."""
    if not isinstance(fields, dict):
        r.fail(f"{where} must be a map of field to value, got {short_repr(fields)}")
    for name, value in fields.items():
        if name not in table:
            r.fail(f"{where}: unknown field {short_repr(name)} (known: {', '.join(table)})")
        what, ok = table[name]
        if not ok(value):
            r.fail(f"{where}: {name} must be {what}, got {short_repr(value)}")
    return fields


def _check_state(r: "_Reader", where: str, raw: dict[str, Any], replicas: tuple[int, ...]) -> dict[str, Any]:
    """The ``replicas`` and ``controller`` parts of an expected state (final or ``at_step``)."""
    out: dict[str, Any] = {}
    if "replicas" in raw:
        reps = raw["replicas"]
        if not isinstance(reps, dict):
            r.fail(f"{where}replicas must be a map of replica id to expected fields, got {short_repr(reps)}")
        for rid, fields in reps.items():
            number = int(rid) if is_int(rid) or (isinstance(rid, str) and rid.isdigit() and len(rid) < 12) else None
            if number not in replicas:
                r.fail(f"{where}replicas: {short_repr(rid)} is not a replica of the scenario ({', '.join(map(str, replicas))})")
            _check_fields(r, f"{where}replicas.{number}", fields, REPLICA_FIELDS)
        out["replicas"] = reps
    if "controller" in raw:
        out["controller"] = _check_fields(r, f"{where}controller", raw["controller"], CONTROLLER_FIELDS)
    return out


def _parse_expect(source: str, raw: Any, replicas: tuple[int, ...], steps: int) -> dict[str, dict[str, Any]]:
    """``expect`` validated like the steps: variants, invariant names, replica ids and the
    result's field names (``emulator.result``'s tables) and the values those fields can take."""
    top = _Reader(source, "expect", raw, VARIANT_NAMES)
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANT_NAMES:
        if not top.has(variant):
            continue
        r = _Reader(source, f"expect.{variant}", raw[variant], EXPECT_KEYS)
        block: dict[str, Any] = {}
        if r.has("violations"):
            names = r.get("violations", lambda v: isinstance(v, list) and all(_is_str(x) for x in v), "a list of invariant names")
            for name in names:
                if name not in INVARIANT_NAMES:
                    r.fail(f"unknown invariant {short_repr(name)} (known: {', '.join(INVARIANT_NAMES)})")
            block["violations"] = list(names)
        if r.has("losses"):
            losses = r.get("losses", lambda v: isinstance(v, list), "a list of {offset, value, ...} maps")
            for k, loss in enumerate(losses, start=1):
                _check_fields(r, f"losses[{k}]", loss, LOSS_FIELDS)
            block["losses"] = losses
        block.update(_check_state(r, "", r.data, replicas))
        if r.has("at_step"):
            at = r.get("at_step", lambda v: isinstance(v, dict) and all(is_int(k) and 1 <= k <= steps for k in v),
                       f"a map of step number (1 to {steps}, the scenario's steps) to {{replicas, controller}}")
            for number, state in at.items():
                sub = _Reader(source, f"expect.{variant}.at_step.{number}", state, ("replicas", "controller"))
                _check_state(sub, "", sub.data, replicas)
            block["at_step"] = at
        out[variant] = block
    return out


def _check_ids(top: "_Reader", ids: list, what: str) -> None:
    """At most ``MAX_REPLICAS`` ids (``what``: replica or broker), each an int32 >= 0, unique."""
    if len(ids) > MAX_REPLICAS:
        top.fail(f"at most {MAX_REPLICAS} {what}s, got {len(ids)}")
    if any(r < 0 or r > INT32_MAX for r in ids):
        top.fail(f"{what} ids must be between 0 and {INT32_MAX}, got {short_repr(ids)}")
    if len(set(ids)) != len(ids):
        top.fail(f"{what} ids must be unique, got {short_repr(ids)}")


def parse_partition(fields: dict[str, Any], source: str) -> tuple[str, tuple[int, ...], Config]:
    """The one validator of a partition's ``name``, ``replicas`` and ``config`` (a scenario
    file's top level, a stream's partition header, a generated partition)."""
    top = _Reader(source, "scenario", {k: fields[k] for k in ("name", "replicas") if k in fields}, ("name", "replicas"))
    name = top.get("name", _is_str, "a string", required=True)
    if not NAME_PATTERN.match(name):
        top.fail(f"name {short_repr(name)} must match [a-z0-9._-]+")
    replicas = top.get("replicas", _is_int_list, "a list of broker ids (ints)", required=True)
    if not replicas:
        top.fail("replicas must not be empty")
    _check_ids(top, replicas, "replica")
    try:
        config = parse_config(fields.get("config") or {}, replicas=len(replicas))
    except ConfigError as exc:
        raise ScenarioError(f"{source}: config: {exc}") from None
    return name, tuple(replicas), config


def parse_brokers(fields: dict[str, Any], source: str, replicas: tuple[int, ...]) -> tuple[int, ...]:
    """The optional ``brokers``: every broker of the cluster, a list holding every replica (default:
    the replicas).  Returns the brokers that are not replicas, in the order given: a reassignment
    may add them (they hold no copy of the partition until then)."""
    top = _Reader(source, "scenario", {k: fields[k] for k in ("brokers",) if k in fields}, ("brokers",))
    brokers = top.get("brokers", _is_int_list, "a list of broker ids (ints)")
    if brokers is None:
        return ()
    _check_ids(top, brokers, "broker")
    missing = [r for r in replicas if r not in brokers]
    if missing:
        top.fail(f"brokers {short_repr(brokers)} must list every replica: {missing} missing")
    return tuple(b for b in brokers if b not in replicas)


def parse_scenario(data: Any, source: str = "<memory>", resolve_initial_state: Callable[[str], str] | None = None) -> Scenario:
    """Validate a decoded scenario document and build the ``Scenario``.

    ``resolve_initial_state`` turns an ``initial_state`` value into a checked directory path
    (the file layer knows where the file is); without it the value is kept as written.
    """
    top = _Reader(source, "scenario", data, TOP_KEYS)
    name, replicas, config = parse_partition(data, source)
    brokers = parse_brokers(data, source, replicas)

    raw_steps = top.get("steps", lambda v: isinstance(v, list), "a list of steps", required=True)
    steps = _parse_steps(source, raw_steps, replicas + brokers)
    expect = _parse_expect(source, data["expect"], replicas + brokers, len(steps)) if data.get("expect") is not None else {}
    initial = top.get("initial_state", _is_str, "a directory path (string)")
    if initial is not None and resolve_initial_state is not None:
        try:
            initial = resolve_initial_state(initial)
        except ValueError as exc:
            top.fail(str(exc))
    return Scenario(
        name=name,
        replicas=replicas,
        steps=steps,
        config=config,
        description=top.get("description", _is_str, "a string", default="") or "",
        topic=top.get("topic", _is_str, "a string", default="t"),
        partition=top.get("partition", lambda v: is_int(v) and 0 <= v <= INT32_MAX, "a non-negative int", default=0),
        expect=expect,
        source=source,
        topic_named="topic" in data,
        initial_state=initial,
        brokers=brokers,
    )
