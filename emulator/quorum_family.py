"""The metadata-quorum family (``kraft595`` ... ``kraft996``) as a ``Family``: the engines' one view
of the quorum's step table, variants, scenarios, run and invariant registry.  The rules are
docs/quorum.md's."""

from __future__ import annotations

from typing import Any, Callable

from . import partition_stream, quorum_stream
from .family import Family, StreamRows
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

    # -- stream ------------------------------------------------------------------------------------
    stream_header_type = quorum_stream.QUORUM_HEADER_TYPE

    def stream_header_types(self) -> tuple[str, ...]:
        return (quorum_stream.QUORUM_HEADER_TYPE, partition_stream.PARTITION_HEADER_TYPE)  # a partition header is refused by name

    def stream_misplaced_header(self, seq: int, kind: Any, protocol: str) -> str:
        return quorum_stream.misplaced_header(seq, kind, protocol)

    def stream_headerless(self, seq: int) -> str:
        return f"seq {seq}: the metadata partition has no valid header (seq 0)"

    def parse_stream_header(self, args_json: str) -> tuple[str, Any]:
        return quorum_stream.parse_header(args_json)

    def stream_model(self, header: Any, variant: Any, knobs: dict[str, Any] | None) -> Any:
        return quorum_stream.start_quorum(header, variant, knobs)

    def stream_step_ids(self, model: Any) -> tuple[int, ...]:
        return tuple(sorted(model.q.servers))

    def parse_stream_step(self, where: str, seq: int, kind: Any, args_json: str,
                          ids: tuple[int, ...]) -> tuple[Any, str]:
        return quorum_stream.parse_step_row(seq, kind, args_json, ids)

    def stream_apply(self, model: Any, step: Any, seq: int, description: str, rows: StreamRows) -> None:
        quorum_stream.apply_step(model, step, seq, description, rows)

    def stream_verdicts(self, model: Any) -> tuple[int | None, int, tuple[str, ...]]:
        return quorum_stream.verdicts(model)

    def stream_summary(self, model: Any, steps: int) -> dict[str, Any]:
        return quorum_stream.summary(model, steps)

    def stream_document(self, model: Any) -> dict[str, Any]:
        return quorum_stream.document(model)

    def stream_restore(self, document: Any, violated: str) -> Any:
        return quorum_stream.restore(document, violated)


QUORUM = QuorumFamily()
