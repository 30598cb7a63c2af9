"""A family's protocol variants as named presets of knobs: one mechanism for every family.

A family's rules read only knobs, never a variant's name.  Each family has one ``KnobTable`` (its
knobs: values, meaning, the Kafka version and code each comes from, and how its messages name
them), a frozen dataclass deriving from ``Variant`` (a name and one field per knob) and one
``VariantTable`` (its presets, in the order ``--protocol all`` runs them): partition replication's
in ``emulator.variants``, the metadata quorum's in ``emulator.quorum.variants``.  ``--knob
NAME=VALUE``, a scenario's knobs, the knob tables of the docs and the state documents all go
through these.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Generic, Iterable, TypeVar

from ._build import mypyc_attr, rebuilt
from .bounds import short_repr


class KnobError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Knob:
    name: str
    values: tuple[Any, ...]  # (False, True) for a switch
    doc: str
    source: str  # the Kafka version / code (or the TLA+ module) it comes from

    def parse(self, text: Any) -> Any:
        """A value given as YAML (bool / str) or on the command line (str)."""
        if self.values == (False, True):
            if isinstance(text, bool):
                return text
            if isinstance(text, str) and text.lower() in ("true", "false"):
                return text.lower() == "true"
        elif text in self.values:
            return text
        shown = "true, false" if self.values == (False, True) else ", ".join(self.values)
        raise KnobError(f"knob {self.name}: {short_repr(text)} is not one of {shown}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # compiled, the default unpickling would set each field through the frozen __setattr__


class KnobTable:
    """One family's knobs, in their documented order, and the words its errors use: an unknown
    name given as an override is ``{noun} NAME ({known})``, given as ``--knob`` ``knob NAME
    ({listed})``.  ``sort_overrides``: overrides are checked in name order (else as given)."""

    def __init__(self, knobs: tuple[Knob, ...], noun: str, known: str, listed: str | None = None,
                 sort_overrides: bool = False) -> None:
        self.knobs: dict[str, Knob] = {k.name: k for k in knobs}
        self.noun = noun
        self.known = known
        self.listed = known if listed is None else listed
        self.sort_overrides = sort_overrides

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return KnobTable, (tuple(self.knobs.values()), self.noun, self.known, self.listed, self.sort_overrides)

    def check(self, variant: Any) -> None:
        """Every knob of ``variant`` holds one of its values (``KnobError`` naming the first that does not)."""
        for name, knob in self.knobs.items():
            if getattr(variant, name) not in knob.values:
                raise KnobError(f"knob {name}: {getattr(variant, name)!r} is not one of {knob.values}")

    def parse(self, overrides: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
        """``(name, value as YAML or command-line text)`` pairs -> validated ``{name: value}``."""
        values: dict[str, Any] = {}
        for name, text in overrides:
            if name not in self.knobs:
                raise KnobError(f"unknown {self.noun} {short_repr(name)} ({self.known})")
            values[name] = self.knobs[name].parse(text)
        return values

    def parse_assignments(self, texts: list[str]) -> dict[str, Any]:
        """``["fencing=true", ...]`` (``--knob`` arguments) -> validated ``{name: value}``."""
        out: dict[str, Any] = {}
        for text in texts:
            name, sep, value = text.partition("=")
            if not sep:
                raise KnobError(f"--knob wants NAME=VALUE, got {short_repr(text)}")
            name = name.strip()
            if name not in self.knobs:
                raise KnobError(f"unknown knob {short_repr(name)} ({self.listed})")
            out[name] = self.knobs[name].parse(value.strip())
        return out


V = TypeVar("V", bound="Variant")


@mypyc_attr(allow_interpreted_subclasses=True)  # a family outside the core (a plug-in's, tests/toy_family.py)
@dataclass(frozen=True, slots=True)
class Variant:
    """One protocol of a family: a name and (in the family's subclass) one field per knob of its
    ``KnobTable``.  Frozen, checked when built, pickled as its fields (Spark ships variants)."""

    name: str

    def knob_table(self) -> KnobTable:
        """The family's knobs (each subclass returns its own table)."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        self.knob_table().check(self)

    def knobs(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.knob_table().knobs}

    def with_knobs(self: V, overrides: dict[str, Any]) -> V:
        """The variant with some knobs set (values as YAML or command-line text); same name."""
        table = self.knob_table()
        values = table.parse(sorted(overrides.items()) if table.sort_overrides else overrides.items())
        return replace(self, **values) if values else self

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return rebuilt(self)  # pickled as its fields (compiled, the default would set them through __setattr__)


class VariantTable(Generic[V]):
    """One family's presets, by name in their order, over its ``KnobTable``; ``what`` names a
    preset in the error for an unknown one (``unknown {what} NAME (known: ...)``)."""

    def __init__(self, knob_table: KnobTable, presets: tuple[V, ...], what: str) -> None:
        self.knob_table = knob_table
        self.knobs: dict[str, Knob] = knob_table.knobs
        self.presets: dict[str, V] = {v.name: v for v in presets}
        self.names: tuple[str, ...] = tuple(self.presets)
        self.what = what
        for preset in presets:
            assert {f.name for f in fields(preset)} - {"name"} == set(self.knobs), f"{preset.name}: one field per knob"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return VariantTable, (self.knob_table, tuple(self.presets.values()), self.what)

    def named(self, name: str, knobs: dict[str, Any] | None = None) -> V:
        """The preset ``name`` with ``knobs`` set (``ValueError`` / ``KnobError`` naming what is wrong)."""
        try:
            variant = self.presets[name]
        except KeyError:
            raise ValueError(f"unknown {self.what} {name!r} (known: {', '.join(self.names)})") from None
        return variant.with_knobs(knobs or {})

    def overrides(self, variant: V) -> dict[str, Any]:
        """The knobs in which ``variant`` differs from the preset of its name."""
        preset = self.presets[variant.name]
        return {name: value for name, value in variant.knobs().items() if getattr(preset, name) != value}

    def parse_knobs(self, texts: list[str]) -> dict[str, Any]:
        """``--knob NAME=VALUE`` texts -> validated ``{name: value}``."""
        return self.knob_table.parse_assignments(texts)

    def knobs_markdown(self) -> str:
        """The family's knob table for its document: each knob's value in every preset, its
        meaning and where it comes from."""
        def show(v: Any) -> str:
            return str(v).lower() if isinstance(v, bool) else str(v)

        lines = ["| knob | " + " | ".join(f"`{n}`" for n in self.names) + " | meaning | Kafka version / code |",
                 "|---|" + "---|" * len(self.names) + "---|---|"]
        for name, knob in self.knobs.items():
            cells = " | ".join(show(getattr(self.presets[v], name)) for v in self.names)
            lines.append(f"| `{name}` | {cells} | {knob.doc} | {knob.source} |")
        return "\n".join(lines) + "\n"
