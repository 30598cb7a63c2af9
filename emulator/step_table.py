"""A family's step vocabulary as one table: what parses, writes back, describes and documents steps.

Each protocol family builds one ``StepTable`` from its rows (``emulator.steps.STEP_TABLE`` for
partition replication, ``emulator.quorum.steps.QUORUM_STEP_TABLE`` for the metadata quorum): one
``StepSpec`` per step kind -- its frozen dataclass, its arguments (``Arg``: a name, an
``ArgType`` saying how a YAML value is checked, a default) and its meaning.  The table is what
the scenario loaders validate a step with (``parse``), what a scenario file and a stream's event
row write a step as (``to_dict``), the short form in results and stream rows (``describe``) and
the rows of ``docs/steps.md`` (``markdown``).  What differs between families is data on the rows
(a cross-argument ``check``, a ``build`` or ``written`` hook for a step whose dataclass is not its
arguments one to one) or on the table (how an unknown kind is named, how a step is described).

Also here: what both families' steps share -- ``CrashMode``, the argument types and checks, and
the errors (``StepError`` for a step's arguments; ``ScenarioError`` for a scenario, and its
``StepRefused`` for a step the protocol could not take).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Generic, Iterator, Protocol, TypeVar

from ._build import rebuilt
from .bounds import INT32_MAX, INT64_MAX, short_repr


class StepError(ValueError):
    """An invalid step: the message says which argument is wrong and why (no file name)."""


class ScenarioError(ValueError):
    """An invalid scenario: the message names the file, the step and what is wrong."""


class StepRefused(ScenarioError):
    """A scenario valid in itself whose step the variant's controller cannot take (a KRaft
    controller writes no epoch or ISR an election asks for): refused under that variant, never
    turned into a verdict; the scenario may run under the others."""


class CrashMode(str, Enum):
    """How a server stops uncleanly (a partition's ``crash`` and the quorum's ``crash``): ``process``
    keeps the page cache; ``power`` also loses what was not flushed."""

    PROCESS = "process"
    POWER = "power"


# -- argument types -------------------------------------------------------------------------


class ArgType(str, Enum):
    """How a YAML value of an argument is checked (and described in errors and docs)."""

    REPLICA = "a replica id (int)"
    REPLICA_LIST = "a list of replica ids"
    EPOCH = "a leader epoch (int32, >= 0)"
    COUNT = "a count (int32, >= 0)"
    MILLIS = "milliseconds (int64, >= 0)"
    OFFSET = "an offset (int64, >= 0)"
    BROKER_EPOCH = "a broker epoch (int64, >= 0)"
    BOOL = "a bool"
    STRING = "a string"
    STRING_LIST = "a list of strings"
    ACKS = "one of all, 1, 0"
    CHOICE = "one of"


assert len({t.value for t in ArgType}) == len(ArgType.__members__), "ArgType values must differ (equal values alias members)"


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_text(v: Any) -> bool:
    """A string of Unicode text: UTF-8 can carry it (a lone surrogate, which a JSON or YAML
    escape like ``\\ud800`` can produce, cannot be written to a log, a state row or a result)."""
    if not isinstance(v, str):
        return False
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_RANGE = {ArgType.EPOCH: INT32_MAX, ArgType.COUNT: INT32_MAX, ArgType.MILLIS: INT64_MAX, ArgType.OFFSET: INT64_MAX,
          ArgType.BROKER_EPOCH: INT64_MAX}
ACKS_VALUES = ("all", "-1", "1", "0", -1, 1, 0)


def is_acks(v: Any) -> bool:
    """One of ``ACKS_VALUES`` as written (``1.0 == 1`` and ``True == 1`` in Python: neither is acks)."""
    return (isinstance(v, str) or is_int(v)) and v in ACKS_VALUES


def normalise_acks(v: Any) -> str:
    """``all`` / ``-1`` / ``1`` / ``0`` (str or int) -> ``"all" | "1" | "0"``."""
    return "all" if v in ("all", "-1", -1) else str(v)


@dataclass(frozen=True, slots=True)
class Arg:
    name: str
    type: ArgType
    required: bool = False
    default: Any = None  # the value a step omitted from YAML has (omitted again when written)
    choices: tuple[str, ...] = ()
    doc: str = ""

    def describe(self) -> str:
        if self.type is ArgType.CHOICE:
            return " or ".join(repr(c) for c in self.choices)
        return self.type.value

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # compiled, the default unpickling would set each field through the frozen __setattr__


def arg_value(arg: Arg, value: Any, ids: tuple[int, ...]) -> Any:
    """One argument's YAML value checked against its type (``ids``: the servers a ``REPLICA`` may
    name) and turned into the step's field value; ``StepError`` says what is wrong."""
    t = arg.type
    if t is ArgType.REPLICA:
        if not is_int(value):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        if value not in ids:
            raise StepError(f"{arg.name} {short_repr(value)} is not one of the partition's replicas {list(ids)}")
        return value
    if t is ArgType.REPLICA_LIST:
        if not (isinstance(value, list) and all(is_int(x) for x in value)):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        for x in value:
            if x not in ids:
                raise StepError(f"{arg.name} names replica {short_repr(x)}, which is not one of the partition's replicas {list(ids)}")
        if len(set(value)) != len(value):
            raise StepError(f"{arg.name} lists a replica twice: {short_repr(value)}")
        return tuple(value)
    if t in _RANGE:
        if not (is_int(value) and value >= 0):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        if value > _RANGE[t]:
            raise StepError(f"{arg.name!r} {short_repr(value)} is out of range (at most {_RANGE[t]})")
        return value
    if t is ArgType.BOOL:
        if not isinstance(value, bool):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        return value
    if t is ArgType.STRING:
        if not is_text(value):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        return value
    if t is ArgType.STRING_LIST:
        if not (isinstance(value, list) and all(is_text(x) for x in value)):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        return tuple(value)
    if t is ArgType.ACKS:
        if not is_acks(value):
            raise StepError(f"{arg.name!r} must be {t.value}, got {short_repr(value)}")
        return normalise_acks(value)
    if value not in arg.choices:
        raise StepError(f"{arg.name!r} must be {arg.describe()}, got {short_repr(value)}")
    return value


def plain(value: Any) -> Any:
    """A step's field value as YAML holds it: an enum member as its value, a tuple as a list."""
    if isinstance(value, Enum):
        return value.value
    return list(value) if isinstance(value, tuple) else value


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepSpec:
    """One row of a step table: a step kind, its dataclass, its arguments and its meaning, and the
    hooks of a kind whose arguments are not its dataclass's fields one to one."""

    kind: Enum
    cls: type
    args: tuple[Arg, ...]
    doc: str
    check: Callable[[dict[str, Any]], None] | None = None  # cross-argument rules, raises StepError
    # The dataclass's fields from the checked arguments (default: the arguments themselves).
    build: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # The YAML arguments of a step of this kind (default: each field that is neither None nor its default).
    written: Callable[[Any], dict[str, Any]] | None = None

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.args)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # compiled, the default unpickling would set each field through the frozen __setattr__


class HasKind(Protocol):
    """A step: a frozen dataclass whose ``kind`` names its row of the table."""

    @property
    def kind(self) -> Enum: ...


K = TypeVar("K", bound=Enum)
S = TypeVar("S", bound=HasKind)


def positional_parts(step: Any, args: dict[str, Any]) -> list[str]:
    """A step's description parts: the value of each written argument, in the table's order
    (``deliver(1, 2)``, ``append(a)``)."""
    return [str(getattr(step, name)) for name in args]


class StepTable(Generic[K, S]):
    """One family's step kinds (``K``, an enum) and their steps (``S``): read as a mapping of kind to
    ``StepSpec`` in the rows' order, and the one parse / write / describe / document of its steps.

    ``what`` names a step's type in the error for an unknown one (``unknown {what} ...``);
    ``heading`` is the table's section of ``docs/steps.md``; ``describe_parts`` turns a step and its
    written arguments into the parts of its short form (default: ``positional_parts``)."""

    def __init__(self, kind_type: type[K], specs: tuple[StepSpec, ...], what: str, heading: str,
                 describe_parts: Callable[[Any, dict[str, Any]], list[str]] = positional_parts) -> None:
        self.kind_type = kind_type
        self.specs: dict[K, StepSpec] = {kind_type(spec.kind): spec for spec in specs}
        assert set(self.specs) == set(kind_type), f"{kind_type.__name__}: one row per kind"
        self.kinds: tuple[str, ...] = tuple(str(k.value) for k in self.specs)
        self.what = what
        self.heading = heading
        self.describe_parts = describe_parts

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its constructor's arguments (a family's table travels with the family to
        Spark's workers; compiled, the default unpickling would call the constructor bare)."""
        return StepTable, (self.kind_type, tuple(self.specs.values()), self.what, self.heading, self.describe_parts)

    # -- read as a mapping of kind to spec
    def __getitem__(self, kind: K) -> StepSpec:
        return self.specs[kind]

    def __iter__(self) -> Iterator[K]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, kind: object) -> bool:
        return kind in self.specs

    def keys(self) -> Iterator[K]:
        return iter(self.specs)

    def values(self) -> Iterator[StepSpec]:
        return iter(self.specs.values())

    def items(self) -> Iterator[tuple[K, StepSpec]]:
        return iter(self.specs.items())

    # -- steps
    def parse(self, kind: Any, args: Any, ids: tuple[int, ...]) -> S:
        """Validate one step's arguments (the YAML form: ``{kind: args}``; ``ids``: the servers its
        arguments may name) and build the step; ``StepError`` says what is wrong."""
        try:
            spec = self.specs[self.kind_type(kind)]
        except (ValueError, TypeError):
            raise StepError(f"unknown {self.what} {short_repr(kind)} (known: {', '.join(self.kinds)})") from None
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise StepError(f"must be a mapping, got {type(args).__name__}")
        unknown = sorted(str(k) for k in args if k not in spec.arg_names)
        if unknown:
            raise StepError(f"unknown key {short_repr(unknown[0])} (allowed: {', '.join(spec.arg_names)})")
        values: dict[str, Any] = {}
        for arg in spec.args:
            if arg.name not in args:
                if arg.required:
                    raise StepError(f"missing required key {arg.name!r}")
                continue
            values[arg.name] = arg_value(arg, args[arg.name], ids)
        if spec.check is not None:
            spec.check(values)
        step: S = spec.cls(**(values if spec.build is None else spec.build(values)))
        return step

    def args_of(self, step: S) -> dict[str, Any]:
        """The step's arguments as a scenario file writes them (defaults omitted): ``parse`` reads
        them back to the same step."""
        spec = self.specs[step.kind]  # type: ignore[index]  # (a step's kind is a K of its table)
        if spec.written is not None:
            return spec.written(step)
        args: dict[str, Any] = {}
        for arg in spec.args:
            value = getattr(step, arg.name)
            if value is None or value == arg.default:
                continue
            args[arg.name] = plain(value)
        return args

    def to_dict(self, step: S) -> dict[str, Any]:
        """The step in the YAML contract's shape: ``{type: {arg: value, ...}}`` (defaults omitted)."""
        return {step.kind.value: self.args_of(step)}

    def describe(self, step: S) -> str:
        """A short human form, e.g. ``fetch(2, lost)`` or ``deliver(1, 2)``."""
        return f"{step.kind.value}({', '.join(self.describe_parts(step, self.args_of(step)))})"

    # -- docs
    def rows_markdown(self) -> list[str]:
        """The table as markdown rows: the step, its arguments, its meaning."""
        lines = ["| step | arguments | meaning |", "|---|---|---|"]
        for spec in self.specs.values():
            args = "; ".join(
                f"`{a.name}` ({a.describe()}{', required' if a.required else ''}){': ' + a.doc if a.doc else ''}" for a in spec.args
            )
            lines.append(f"| `{spec.kind.value}` | {args} | {spec.doc} |")
        return lines

    def markdown(self) -> str:
        """The table's section of ``docs/steps.md``: its heading and its rows."""
        return "\n".join([f"## {self.heading}", "", *self.rows_markdown()]) + "\n"
