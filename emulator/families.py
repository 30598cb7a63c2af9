"""The registry of protocol families: one row per family (``emulator.family.Family``).

Every entry point finds the family of ``--protocol`` here (``family_of_protocol``), once, and asks
that family for the variant with the ``--knob`` values it parses; a scenario document finds its
family with ``family_of_document``.  A third family
is one more row in ``FAMILIES`` (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

from .family import Family
from .partition_family import PARTITION
from .quorum.family import QUORUM

# In the order documents are tried (the first whose ``is_document`` accepts one is its family) and
# help texts list them; the partition family accepts what no other does, so it comes last.
FAMILIES: dict[str, Family] = {f.name: f for f in (QUORUM, PARTITION)}


def register(family: Family) -> None:
    """Add a family (a plug-in's, or a test's toy family) before the others: it is asked first."""
    global FAMILIES
    FAMILIES = {family.name: family, **{n: f for n, f in FAMILIES.items() if n != family.name}}


def unregister(name: str) -> None:
    global FAMILIES
    FAMILIES = {n: f for n, f in FAMILIES.items() if n != name}


def all_protocol_names() -> tuple[str, ...]:
    return tuple(p for f in FAMILIES.values() for p in f.variant_names())


def family_of_protocol(protocol: str) -> Family | None:
    """The family whose preset is named ``protocol`` (None: no family has one)."""
    for family in FAMILIES.values():
        if protocol in family.variant_names():
            return family
    return None


def family_named(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown protocol family {name!r} (known: {', '.join(FAMILIES)})") from None


def family_of_document(data: Any) -> Family:
    """The family of a decoded scenario document."""
    for family in FAMILIES.values():
        if family.is_document(data):
            return family
    return PARTITION


def family_of_scenario(scenario: Any) -> Family:
    """The family of a parsed scenario (``ValueError`` when it is none of theirs)."""
    for family in FAMILIES.values():
        if family.is_scenario(scenario):
            return family
    raise ValueError(f"not a scenario of any protocol family: {type(scenario).__name__}")


__all__ = ["FAMILIES", "Family", "all_protocol_names", "family_named", "family_of_document",
           "family_of_protocol", "family_of_scenario", "register", "unregister"]
