"""The partition-replication family (``hw`` ... ``kip966``) as a ``Family``: the engines' one view
of ``emulator.steps``, ``emulator.variants``, ``emulator.scenario``, ``emulator.run`` and the
checker's invariant registry.  The rules are docs/protocol.md's."""

from __future__ import annotations

from typing import Any, Callable

from . import partition_stream
from .family import Family, StreamRows
from .invariants import INVARIANT_NAMES
from .run import run_scenario
from .scenario import parse_scenario
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

    # -- stream ------------------------------------------------------------------------------------
    stream_header_type = partition_stream.PARTITION_HEADER_TYPE
    stream_ticks = True  # the workload source's ticks are partition steps (emulator.workload)

    def stream_misplaced_header(self, seq: int, kind: Any, protocol: str) -> str:
        return f"seq {seq}: the partition header must be seq 0 with type {partition_stream.PARTITION_HEADER_TYPE!r}"

    def stream_headerless(self, seq: int) -> str:
        return f"seq {seq}: the partition has no valid header (seq 0)"

    def parse_stream_header(self, args_json: str) -> tuple[str, Any]:
        return partition_stream.parse_header(args_json)

    def stream_model(self, header: Any, variant: Any, knobs: dict[str, Any] | None) -> Any:
        return partition_stream.start_replay(header, variant, knobs)

    def stream_step_ids(self, model: Any) -> tuple[int, ...]:
        # every broker a step may name: the scenario's replicas and other brokers (a reassignment's)
        return tuple(model.partition.replicas)

    def parse_stream_step(self, where: str, seq: int, kind: Any, args_json: str,
                          ids: tuple[int, ...]) -> tuple[Any, str]:
        return partition_stream.parse_step_row(where, seq, kind, args_json, ids)

    def stream_rows(self, timeline: list[tuple]) -> StreamRows:
        return partition_stream.PartitionStreamRows(timeline)

    def stream_apply(self, model: Any, step: Any, seq: int, description: str, rows: StreamRows) -> None:
        partition_stream.apply_step(model, step, seq, description, rows)

    def stream_compact(self, model: Any, min_records: int, rows: StreamRows) -> None:
        partition_stream.compact(model, min_records, rows)

    def stream_verdicts(self, model: Any) -> tuple[int | None, int, tuple[str, ...]]:
        return partition_stream.verdicts(model)

    def stream_summary(self, model: Any, steps: int) -> dict[str, Any]:
        return partition_stream.summary(model, steps)

    def stream_document(self, model: Any) -> dict[str, Any]:
        return partition_stream.document(model)

    def stream_restore(self, document: Any, violated: str) -> Any:
        return partition_stream.restore(document)


PARTITION = PartitionFamily()
