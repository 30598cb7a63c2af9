"""The partition-replication family (``hw`` ... ``kip966``) as a ``Family``: the engines' one view
of ``emulator.steps``, ``emulator.variants``, ``emulator.scenario``, ``emulator.run`` and the
checker's invariant registry.  The rules are docs/protocol.md's."""

from __future__ import annotations

from typing import Any, Callable

from . import explore
from .explore_reduce import REDUCTIONS
from .family import Family
from .invariants import INVARIANT_NAMES
from .run import run_scenario
from .scenario import parse_scenario
from .search import SearchSpace
from .search_command import Counterexample, SearchOption
from .steps import STEP_KINDS, describe_step, parse_step, step_to_dict
from .variants import KNOBS, VARIANT_NAMES, parse_knob_assignments, variant_named


class PartitionFamily(Family):
    name = "partition"
    title = "partition"
    docs = "docs/protocol.md"

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
    search_owner = "partition protocols"
    search_kind = "a partition protocol"

    def search_options(self) -> tuple[SearchOption, ...]:
        return explore.SEARCH_OPTIONS

    def search_engines(self) -> tuple[str, ...]:
        return ("local", "spark")

    def search_checkpoints(self) -> bool:
        return True

    def search_reductions(self) -> tuple[str, ...]:
        return REDUCTIONS

    def search_spaces(self, protocols: list[str], knobs: dict[str, Any],
                      options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
        return explore.search_spaces(protocols, knobs, options)

    def describe_search(self, space: Any) -> tuple[str, str]:
        return explore.describe_search(space)

    def search_notes(self, space: Any) -> list[str]:
        return explore.search_notes(space)

    def search_result(self, space: Any) -> dict[str, Any]:
        return explore.search_result(space)

    def counterexample(self, space: Any, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
        return explore.counterexample(space, invariant, depth, path, knobs)

    def search_chart_marks(self) -> tuple[str, ...] | None:
        return ("StrongIsr", "NoCommittedDataLoss", "EventualConvergence")  # the verdicts (docs/explore.md)

    # -- stream ------------------------------------------------------------------------------------


PARTITION = PartitionFamily()
