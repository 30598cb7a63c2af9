"""What a protocol family's search says to ``replemu explore`` beside the engine's hooks
(``emulator.search``): the flags it takes (``SearchOption``), a violation's shortest path as the
family's scenario (``Counterexample``), and the helpers every family reads its flags and names
its files with.  ``emulator.family.Family``'s "search" section returns these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .search import ExploreError


def parse_alphabet(text: str | None, kinds: Iterable[Any], default: tuple[Any, ...], noun: str = "step kind") -> tuple[Any, ...]:
    """``--steps a,b,...`` -> the step kinds (members of a family's step-kind enum, ``kinds`` in its
    table's order) named, in that order; None: ``default``.  ``ExploreError`` names an unknown one."""
    if text is None:
        return default
    table = list(kinds)
    by_name = {k.value: k for k in table}
    named = []
    for name in (t.strip() for t in text.split(",")):
        if name not in by_name:
            raise ExploreError(f"--steps: unknown {noun} {name[:40]!r} (known: {', '.join(k.value for k in table)})")
        named.append(by_name[name])
    if not named:
        raise ExploreError(f"--steps: give at least one {noun}")
    return tuple(k for k in table if k in named)


def parse_until(text: str | None, names: tuple[str, ...], noun: str = "invariant") -> frozenset[str]:
    """``--until A,B``: the properties (of ``names``, a family's) after whose first break a search
    stops; ``ExploreError`` names an unknown one."""
    until = frozenset(t.strip() for t in (text or "").split(",") if t.strip())
    unknown = sorted(until - set(names))
    if unknown:
        raise ExploreError(f"--until: unknown {noun} {unknown[0][:40]!r} (known: {', '.join(names)})")
    return until


@dataclass(frozen=True)
class SearchOption:
    """One flag of ``replemu explore`` that a family's search takes (``Family.search_options``):
    its name (``power_crashes`` is ``--power-crashes``), the value the search takes when it is not
    given (``required``: none, the user must give it), and the value a parser holds when it is not
    given (a flag of another family that is not ``unset`` is refused)."""

    name: str
    default: Any = None
    unset: Any = None
    required: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def knob_flags(knobs: dict[str, Any]) -> str:
    """``--knob NAME=VALUE`` flags of ``knobs``, in name order, each after a space (booleans lowercase)."""
    return "".join(f" --knob {k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(knobs.items()))


def counterexample_name(protocol: str, invariant: str) -> str:
    """The name of the scenario a violation's shortest path is written as: ``explore-kip320-strong-isr``."""
    kebab = "".join("-" + ch.lower() if ch.isupper() else ch for ch in invariant).lstrip("-")
    return f"explore-{protocol}-{kebab}"


@dataclass
class Counterexample:
    """A violation's shortest path as the family writes it: the scenario document (with its
    ``expect`` block, so ``replemu run FILE --check`` replays it), what the result's violation
    entry adds before ``scenario_file``, and the flags shown after ``replemu run FILE --protocol P``."""

    document: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)
    run_flags: str = ""
