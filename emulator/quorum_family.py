"""The metadata-quorum family (``kraft595`` ... ``kraft996``) as a ``Family``: the engines' one view
of the quorum's step table, variants, scenarios, run and invariant registry.  The rules are
docs/quorum.md's."""

from __future__ import annotations

from typing import Any, Callable

from . import quorum_explore
from .family import Family
from .quorum_invariants import QUORUM_INVARIANT_NAMES
from .quorum_run import is_quorum_document, parse_quorum_scenario, run_quorum_scenario
from .quorum_steps import (
    QUORUM_STEP_KINDS,
    describe_quorum_step,
    parse_quorum_step,
    quorum_step_to_dict,
)
from .quorum_variants import (
    QUORUM_KNOBS,
    QUORUM_VARIANT_NAMES,
    parse_quorum_knob_assignments,
    quorum_variant_named,
)
from .search import SearchSpace
from .search_command import Counterexample, SearchOption


class QuorumFamily(Family):
    name = "quorum"
    title = "metadata-quorum"
    docs = "docs/quorum.md"

    # -- variants and knobs ------------------------------------------------------------------------
    def variant_names(self) -> tuple[str, ...]:
        return QUORUM_VARIANT_NAMES

    def knob_names(self) -> tuple[str, ...]:
        return tuple(QUORUM_KNOBS)

    def variant(self, protocol: str, knobs: dict[str, Any] | None = None) -> Any:
        return quorum_variant_named(protocol, knobs)

    def parse_knobs(self, texts: list[str]) -> dict[str, Any]:
        return parse_quorum_knob_assignments(texts)

    # -- steps -------------------------------------------------------------------------------------
    def step_kinds(self) -> tuple[str, ...]:
        return QUORUM_STEP_KINDS

    def parse_step(self, kind: Any, args: Any, ids: tuple[int, ...]) -> Any:
        return parse_quorum_step(kind, args, ids)

    def step_to_dict(self, step: Any) -> dict[str, Any]:
        return quorum_step_to_dict(step)

    def describe_step(self, step: Any) -> str:
        return describe_quorum_step(step)

    # -- invariants --------------------------------------------------------------------------------
    def invariant_names(self) -> tuple[str, ...]:
        return QUORUM_INVARIANT_NAMES

    # -- scenarios ---------------------------------------------------------------------------------
    def is_document(self, data: Any) -> bool:
        return is_quorum_document(data)

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        return parse_quorum_scenario(data, source)

    # -- run / campaign / shrink -------------------------------------------------------------------
    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        return run_quorum_scenario(scenario, protocol, trace=trace, knobs=knobs, refusal_as_result=refusal_as_result,
                                   progress=progress)

    # -- search (explore) --------------------------------------------------------------------------
    search_owner = f"the metadata-quorum protocols ({', '.join(QUORUM_VARIANT_NAMES)})"
    search_kind = 'a metadata-quorum protocol (docs/explore.md "The metadata quorum")'

    def search_options(self) -> tuple[SearchOption, ...]:
        return quorum_explore.SEARCH_OPTIONS

    def search_spaces(self, protocols: list[str], knobs: dict[str, Any],
                      options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
        return quorum_explore.search_spaces(protocols, knobs, options)

    def describe_search(self, space: Any) -> tuple[str, str]:
        return quorum_explore.describe_search(space)

    def search_result(self, space: Any) -> dict[str, Any]:
        return quorum_explore.search_result(space)

    def counterexample(self, space: Any, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
        return quorum_explore.counterexample(space, invariant, depth, path, knobs)

    # -- stream ------------------------------------------------------------------------------------


QUORUM = QuorumFamily()
