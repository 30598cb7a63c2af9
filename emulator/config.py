"""The topic and broker configuration of a partition, and its one validator.

``CONFIG_FIELDS`` is the table the validator, the contract writer and the docs read; every
caller that turns a mapping into a ``Config`` (the scenario loader, the stream's partition
header, the workload generator) goes through ``parse_config``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Callable

from ._build import rebuilt
from .bounds import INT32_MAX, INT64_MAX, short_repr
from .step_table import is_acks, is_int, normalise_acks
from .variant_table import KnobError
from .variants import KNOB_TABLE


class ConfigError(ValueError):
    """An invalid config: the message names the key and what is wrong (no file name)."""


@dataclass(frozen=True, slots=True)
class Config:
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    acks: str = "all"  # "all" | "1" | "0"
    hw_checkpoint: str = "every_step"  # every_step | explicit
    log_flush: str = "every_step"  # every_step | explicit
    replica_lag_time_max_ms: int = 10000
    alter_partition: str = "every_step"  # every_step | explicit
    knobs: tuple[tuple[str, Any], ...] = ()  # protocol knobs this partition sets (docs/protocol.md)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # pickled as its fields (compiled, the default would set them through __setattr__)


def _knobs(v: Any) -> tuple[tuple[str, Any], ...]:
    """``{name: value}`` -> sorted, validated pairs (raises KnobError)."""
    parsed = KNOB_TABLE.parse_assignments([f"{k}={str(x).lower() if isinstance(x, bool) else x}" for k, x in v.items()])
    return tuple(sorted(parsed.items()))


@dataclass(frozen=True, slots=True)
class ConfigField:
    name: str
    valid: Callable[[Any], bool]
    what: str
    doc: str
    normalise: Callable[[Any], Any] = lambda v: v


CONFIG_FIELDS: tuple[ConfigField, ...] = (
    ConfigField("min_insync_replicas", lambda v: is_int(v) and 1 <= v <= INT32_MAX, "an int >= 1",
                "acks=all needs at least this many ISR members"),
    ConfigField("unclean_leader_election", lambda v: isinstance(v, bool), "a bool",
                "may a replica outside the ISR become leader"),
    ConfigField("acks", is_acks, "one of all, 1, 0",
                "default acks of produce steps", normalise_acks),
    ConfigField("hw_checkpoint", lambda v: v in ("every_step", "explicit"), "every_step or explicit",
                "explicit: only checkpoint_hw steps persist the HW"),
    ConfigField("log_flush", lambda v: v in ("every_step", "explicit"), "every_step or explicit",
                "explicit: only flush steps advance the recovery point"),
    ConfigField("replica_lag_time_max_ms", lambda v: is_int(v) and 0 <= v <= INT64_MAX, "a non-negative int",
                "replica.lag.time.max.ms, used by tick steps"),
    ConfigField("alter_partition", lambda v: v in ("every_step", "explicit"), "every_step or explicit",
                "explicit: a leader's AlterPartition stays in flight until an alter_partition step answers it"),
    ConfigField("knobs", lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v), "a map of knob name to value",
                "protocol knobs set for this partition on top of the variant's preset (--knob wins)", _knobs),
)
CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in CONFIG_FIELDS)
assert CONFIG_KEYS == tuple(f.name for f in fields(Config))


def parse_config(data: Any, replicas: int | None = None) -> Config:
    """Validate a config mapping (every key optional); ``replicas`` bounds min_insync_replicas."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"must be a mapping, got {'null' if data is None else type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown key {short_repr(unknown[0])} (allowed: {', '.join(CONFIG_KEYS)})")
    values = {}
    for f in CONFIG_FIELDS:
        if f.name in data:
            value = data[f.name]
            if not f.valid(value):
                raise ConfigError(f"{f.name!r} must be {f.what}, got {short_repr(value)}")
            try:
                values[f.name] = f.normalise(value)
            except KnobError as exc:
                raise ConfigError(str(exc)) from None
    config = Config(**values)
    if replicas is not None and config.min_insync_replicas > replicas:
        raise ConfigError(f"min_insync_replicas {config.min_insync_replicas} exceeds the {replicas} replicas")
    return config


def config_to_dict(c: Config) -> dict[str, Any]:
    """The config in the YAML contract's shape (every key; acks ``all`` or an int; ``knobs``
    only when it sets any)."""
    d = {**asdict(c), "acks": c.acks if c.acks == "all" else int(c.acks)}
    if c.alter_partition == "every_step":
        del d["alter_partition"]  # written only when set (files written before it existed stay byte-identical)
    if c.knobs:
        d["knobs"] = dict(c.knobs)
    else:
        del d["knobs"]
    return d
