"""Scenario files (shared/scenario-format.md §1): the steps, the config, strict loading.

A scenario is data: frozen dataclasses for the config and for each step type.  ``load_scenario``
validates the whole file before anything is replayed and raises ``ScenarioError`` with the
file, the step number and the reason; nothing is half-applied.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Union

import yaml

from .invariants import INVARIANT_NAMES
from .variants import VARIANT_NAMES

NAME_PATTERN = re.compile(r"^[a-z0-9._-]+$")


class ScenarioError(ValueError):
    """An invalid scenario: the message names the file, the step and what is wrong."""


# -- config -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    acks: str = "all"  # "all" | "1" | "0"
    hw_checkpoint: str = "every_step"  # every_step | explicit
    log_flush: str = "every_step"  # every_step | explicit
    replica_lag_time_max_ms: int = 10000


# -- steps --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Elect:
    leader: int | None = None
    epoch: int | None = None
    isr: tuple[int, ...] | None = None
    to: tuple[int, ...] | None = None
    unclean: bool | None = None
    kind = "elect"


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    replica: int
    epoch: int | None = None
    kind = "leader_and_isr"


@dataclass(frozen=True, slots=True)
class Produce:
    values: tuple[str, ...]
    acks: str | None = None
    replica: int | None = None
    kind = "produce"


@dataclass(frozen=True, slots=True)
class Fetch:
    replica: int
    max_records: int | None = None
    response: str = "delivered"  # delivered | lost
    kind = "fetch"


@dataclass(frozen=True, slots=True)
class ShrinkIsr:
    replica: int
    kind = "shrink_isr"


@dataclass(frozen=True, slots=True)
class ControllerRemove:
    replica: int
    kind = "controller_remove"


@dataclass(frozen=True, slots=True)
class CheckpointHw:
    replica: int | None = None
    kind = "checkpoint_hw"


@dataclass(frozen=True, slots=True)
class Flush:
    replica: int
    offset: int | None = None
    kind = "flush"


@dataclass(frozen=True, slots=True)
class Crash:
    replica: int
    mode: str = "process"  # process | power
    kind = "crash"


@dataclass(frozen=True, slots=True)
class Restart:
    replica: int
    kind = "restart"


@dataclass(frozen=True, slots=True)
class Tick:
    ms: int
    kind = "tick"


Step = Union[
    Elect, LeaderAndIsr, Produce, Fetch, ShrinkIsr, ControllerRemove, CheckpointHw, Flush,
    Crash, Restart, Tick,
]


def config_to_dict(c: Config) -> dict[str, Any]:
    """The config in the YAML contract's shape (every key; acks ``all`` or an int)."""
    return {**asdict(c), "acks": c.acks if c.acks == "all" else int(c.acks)}


def step_to_dict(step: Step) -> dict[str, Any]:
    """The step in the YAML contract's shape: ``{type: {arg: value, ...}}`` (defaults omitted)."""
    args: dict[str, Any] = {}
    if isinstance(step, Produce):
        if len(step.values) == 1:
            args["value"] = step.values[0]
        else:
            args["values"] = list(step.values)
        if step.acks is not None:
            args["acks"] = step.acks if step.acks == "all" else int(step.acks)
        if step.replica is not None:
            args["replica"] = step.replica
        return {step.kind: args}
    for name in step.__dataclass_fields__:
        value = getattr(step, name)
        if value is None:
            continue
        if isinstance(step, Fetch) and name == "response" and value == "delivered":
            continue
        if isinstance(step, Crash) and name == "mode" and value == "process":
            continue
        args[name] = list(value) if isinstance(value, tuple) else value
    return {step.kind: args}


def describe_step(step: Step) -> str:
    """A short human form, e.g. ``fetch(2, lost)`` or ``elect(1, e0, isr=[1,2])``."""
    d = step_to_dict(step)[step.kind]
    parts = []
    for key, value in d.items():
        if key in ("replica", "leader"):
            parts.insert(0, str(value))
        elif key == "epoch":
            parts.append(f"e{value}")
        elif key == "value":
            parts.append(str(value))
        elif key == "values":
            parts.append(",".join(value))
        elif key == "response":
            parts.append(value)
        elif isinstance(value, list):
            parts.append(f"{key}=[{','.join(map(str, value))}]")
        else:
            parts.append(f"{key}={value}")
    return f"{step.kind}({', '.join(parts)})"


# -- scenario -----------------------------------------------------------------------------


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


# -- validation ---------------------------------------------------------------------------


class _Reader:
    """Typed access to one mapping of the file, raising ``ScenarioError`` with context."""

    def __init__(self, source: str, where: str, data: Any, allowed: tuple[str, ...]) -> None:
        self.source, self.where = source, where
        if not isinstance(data, dict):
            self.fail(f"must be a mapping, got {_type_name(data)}")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            self.fail(f"unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")
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
            self.fail(f"{key!r} must be {what}, got {value!r}")
        return value


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_nonneg_int(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_int_list(v: Any) -> bool:
    return isinstance(v, list) and all(_is_int(x) for x in v)


def _acks(v: Any) -> bool:
    return v in ("all", "-1", "1", "0") or (_is_int(v) and v in (-1, 0, 1))


def _normalise_acks(v: Any) -> str:
    return "all" if v in ("all", "-1", -1) else str(v)


_STEP_KEYS: dict[str, tuple[str, ...]] = {
    "elect": ("leader", "epoch", "isr", "to", "unclean"),
    "leader_and_isr": ("replica", "epoch"),
    "produce": ("value", "values", "acks", "replica"),
    "fetch": ("replica", "max_records", "response"),
    "shrink_isr": ("replica",),
    "controller_remove": ("replica",),
    "checkpoint_hw": ("replica",),
    "flush": ("replica", "offset"),
    "crash": ("replica", "mode"),
    "restart": ("replica",),
    "tick": ("ms",),
}
STEP_TYPES: tuple[str, ...] = tuple(_STEP_KEYS)

_CONFIG_KEYS = (
    "min_insync_replicas", "unclean_leader_election", "acks", "hw_checkpoint", "log_flush",
    "replica_lag_time_max_ms",
)
_TOP_KEYS = ("name", "description", "topic", "partition", "replicas", "config", "steps", "expect", "initial_state")
EXPECT_KEYS = ("violations", "losses", "replicas", "controller", "at_step")


def _parse_step(source: str, number: int, raw: Any, replicas: tuple[int, ...]) -> Step:
    where = f"step {number}"
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ScenarioError(
            f"{source}: {where}: a step is a mapping with exactly one key, its type "
            f"(one of {', '.join(STEP_TYPES)}); got {raw!r}"
        )
    (kind, args), = raw.items()
    if kind not in _STEP_KEYS:
        raise ScenarioError(f"{source}: {where}: unknown step type {kind!r} (known: {', '.join(STEP_TYPES)})")
    where = f"step {number} ({kind})"
    r = _Reader(source, where, {} if args is None else args, _STEP_KEYS[kind])

    def replica(key: str, required: bool = True) -> int | None:
        value = r.get(key, _is_int, "a replica id (int)", required=required)
        if value is not None and value not in replicas:
            r.fail(f"{key} {value} is not one of the partition's replicas {list(replicas)}")
        return value

    def replica_list(key: str) -> tuple[int, ...] | None:
        value = r.get(key, _is_int_list, "a list of replica ids")
        if value is None:
            return None
        for x in value:
            if x not in replicas:
                r.fail(f"{key} names replica {x}, which is not one of the partition's replicas {list(replicas)}")
        if len(set(value)) != len(value):
            r.fail(f"{key} lists a replica twice: {value}")
        return tuple(value)

    if kind == "elect":
        leader = replica("leader", required=False)
        epoch = r.get("epoch", _is_nonneg_int, "a non-negative int")
        isr = replica_list("isr")
        to = replica_list("to")
        unclean = r.get("unclean", _is_bool, "a bool")
        if isr is not None and not isr:
            r.fail("isr must not be empty")
        if isr is not None and leader is not None and leader not in isr:
            r.fail(f"isr {list(isr)} does not contain the leader {leader}")
        return Elect(leader=leader, epoch=epoch, isr=None if isr is None else tuple(sorted(isr)), to=to, unclean=unclean)
    if kind == "leader_and_isr":
        return LeaderAndIsr(replica=replica("replica"), epoch=r.get("epoch", _is_nonneg_int, "a non-negative int"))
    if kind == "produce":
        if r.has("value") == r.has("values"):
            r.fail("give exactly one of 'value' (a string) or 'values' (a list of strings)")
        if r.has("value"):
            values = (r.get("value", _is_str, "a string"),)
        else:
            lst = r.get("values", lambda v: isinstance(v, list) and all(_is_str(x) for x in v), "a list of strings")
            if not lst:
                r.fail("'values' must not be empty")
            values = tuple(lst)
        acks = r.get("acks", _acks, "one of all, 1, 0")
        return Produce(values=values, acks=None if acks is None else _normalise_acks(acks), replica=replica("replica", required=False))
    if kind == "fetch":
        response = r.get("response", lambda v: v in ("delivered", "lost"), "'delivered' or 'lost'", default="delivered")
        return Fetch(
            replica=replica("replica"),
            max_records=r.get("max_records", _is_nonneg_int, "a non-negative int"),
            response=response,
        )
    if kind == "shrink_isr":
        return ShrinkIsr(replica=replica("replica"))
    if kind == "controller_remove":
        return ControllerRemove(replica=replica("replica"))
    if kind == "checkpoint_hw":
        return CheckpointHw(replica=replica("replica", required=False))
    if kind == "flush":
        return Flush(replica=replica("replica"), offset=r.get("offset", _is_nonneg_int, "a non-negative int"))
    if kind == "crash":
        mode = r.get("mode", lambda v: v in ("process", "power"), "'process' or 'power'", default="process")
        return Crash(replica=replica("replica"), mode=mode)
    if kind == "restart":
        return Restart(replica=replica("replica"))
    return Tick(ms=r.get("ms", _is_nonneg_int, "a non-negative int (milliseconds)", required=True))


def _parse_expect(source: str, raw: Any) -> dict[str, dict[str, Any]]:
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
                    r.fail(f"unknown invariant {name!r} (known: {', '.join(INVARIANT_NAMES)})")
            block["violations"] = list(names)
        if r.has("losses"):
            block["losses"] = r.get("losses", lambda v: isinstance(v, list), "a list of {offset, value, ...} maps")
        if r.has("replicas"):
            block["replicas"] = r.get("replicas", lambda v: isinstance(v, dict), "a map of replica id to expected fields")
        if r.has("controller"):
            block["controller"] = r.get("controller", lambda v: isinstance(v, dict), "a map of expected controller fields")
        if r.has("at_step"):
            at = r.get("at_step", lambda v: isinstance(v, dict) and all(_is_int(k) and k >= 1 for k in v),
                       "a map of step number (int >= 1) to {replicas, controller}")
            for number, state in at.items():
                _Reader(source, f"expect.{variant}.at_step.{number}", state, ("replicas", "controller"))
            block["at_step"] = at
        out[variant] = block
    return out


def parse_scenario(data: Any, source: str = "<memory>") -> Scenario:
    """Validate a decoded YAML document and build the ``Scenario``."""
    top = _Reader(source, "scenario", data, _TOP_KEYS)
    name = top.get("name", _is_str, "a string", required=True)
    if not NAME_PATTERN.match(name):
        top.fail(f"name {name!r} must match [a-z0-9._-]+")
    replicas = top.get("replicas", _is_int_list, "a list of broker ids (ints)", required=True)
    if not replicas:
        top.fail("replicas must not be empty")
    if any(r < 0 for r in replicas):
        top.fail(f"replica ids must be >= 0, got {replicas}")
    if len(set(replicas)) != len(replicas):
        top.fail(f"replica ids must be unique, got {replicas}")
    replicas = tuple(replicas)

    c = _Reader(source, "config", data.get("config") or {}, _CONFIG_KEYS)
    config = Config(
        min_insync_replicas=c.get("min_insync_replicas", lambda v: _is_int(v) and v >= 1, "an int >= 1", default=1),
        unclean_leader_election=c.get("unclean_leader_election", _is_bool, "a bool", default=False),
        acks=_normalise_acks(c.get("acks", _acks, "one of all, 1, 0", default="all")),
        hw_checkpoint=c.get("hw_checkpoint", lambda v: v in ("every_step", "explicit"), "every_step or explicit", default="every_step"),
        log_flush=c.get("log_flush", lambda v: v in ("every_step", "explicit"), "every_step or explicit", default="every_step"),
        replica_lag_time_max_ms=c.get("replica_lag_time_max_ms", _is_nonneg_int, "a non-negative int", default=10000),
    )
    if config.min_insync_replicas > len(replicas):
        c.fail(f"min_insync_replicas {config.min_insync_replicas} exceeds the {len(replicas)} replicas")

    raw_steps = top.get("steps", lambda v: isinstance(v, list), "a list of steps", required=True)
    steps = tuple(_parse_step(source, i, raw, replicas) for i, raw in enumerate(raw_steps, start=1))
    expect = _parse_expect(source, data["expect"]) if data.get("expect") is not None else {}
    return Scenario(
        name=name,
        replicas=replicas,
        steps=steps,
        config=config,
        description=top.get("description", _is_str, "a string", default="") or "",
        topic=top.get("topic", _is_str, "a string", default="t"),
        partition=top.get("partition", _is_nonneg_int, "a non-negative int", default=0),
        expect=expect,
        source=source,
        topic_named="topic" in data,
        initial_state=_initial_state(top, source),
    )


def _initial_state(top: _Reader, source: str) -> str | None:
    value = top.get("initial_state", _is_str, "a directory path (string)")
    if value is None:
        return None
    base = Path(source).parent if source not in ("<memory>",) else Path(".")
    path = (base / value).resolve()
    if not path.is_dir():
        top.fail(f"initial_state {value!r} is not a directory ({path})")
    return str(path)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file; raises ``ScenarioError`` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path}: invalid YAML: {where}{problem}") from None
    if data is None:
        raise ScenarioError(f"{path}: the file is empty")
    return parse_scenario(data, source=str(path))
