"""The partition-replication family (``hw`` ... ``kip966``) as a ``Family``: the engines' one view
of ``emulator.steps``, ``emulator.variants``, ``emulator.scenario``, ``emulator.run`` and the
checker's invariant registry.  The rules are docs/protocol.md's."""

from __future__ import annotations

from typing import Any, Callable

from .family import Family
from .invariants import INVARIANT_NAMES
from .run import run_scenario
from .scenario import parse_scenario
from .steps import STEP_KINDS, describe_step, parse_step, step_to_dict
from .variants import KNOBS, VARIANT_NAMES, parse_knob_assignments, variant_named


class PartitionFamily(Family):
    """Partition replication: the presets hw ... kip966 over one partition's replicas."""

    # -- variants and knobs ------------------------------------------------------------------------
    def variant_names(self) -> tuple[str, ...]:
        return VARIANT_NAMES

    def knob_names(self) -> tuple[str, ...]:
        return tuple(KNOBS)

    def variant(self, protocol: str, knobs: dict[str, Any] | None = None) -> Any:
        return variant_named(protocol, knobs)

    def parse_knobs(self, texts: list[str]) -> dict[str, Any]:
        return parse_knob_assignments(texts)

    # -- steps -------------------------------------------------------------------------------------
    def step_kinds(self) -> tuple[str, ...]:
        return STEP_KINDS

    def parse_step(self, kind: Any, args: Any, ids: tuple[int, ...]) -> Any:
        return parse_step(kind, args, ids)

    def step_to_dict(self, step: Any) -> dict[str, Any]:
        return step_to_dict(step)

    def describe_step(self, step: Any) -> str:
        return describe_step(step)

    # -- invariants --------------------------------------------------------------------------------
    def invariant_names(self) -> tuple[str, ...]:
        return INVARIANT_NAMES

    # -- scenarios ---------------------------------------------------------------------------------
    def is_document(self, data: Any) -> bool:
        return isinstance(data, dict) and "voters" not in data

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        return parse_scenario(data, source)

    # -- run / campaign / shrink -------------------------------------------------------------------
    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        return run_scenario(scenario, protocol, trace=trace, knobs=knobs, refusal_as_result=refusal_as_result,
                            progress=progress)

    # -- search (explore) --------------------------------------------------------------------------

    # -- stream ------------------------------------------------------------------------------------


PARTITION = PartitionFamily("partition", "partition", "docs/protocol.md")
