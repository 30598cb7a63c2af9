"""A protocol family: what every engine needs from one family of protocols, in one object.

replemu models families of protocols: partition replication (``hw`` ... ``kip966``,
``emulator.partition_family.PARTITION``) and KRaft's metadata quorum (``kraft595`` ...
``kraft996``, ``emulator.quorum_family.QUORUM``).  An engine -- ``replemu run``, campaign, shrink,
explore, the stream, the dashboard -- is one code path over a ``Family``: it asks the family for its
variants, parses steps with its step table, builds and steps its model, judges with its checker,
encodes its state, and never asks which family it holds.  ``emulator.families`` is the registry:
``--protocol`` and ``--knob`` become ``(family, variant)`` there, once.

A new family is a package that subclasses ``Family`` and one row in ``emulator.families.FAMILIES``
(docs/architecture.md says, file by file, what that takes; tests/test_family_toy.py builds one).

The hooks are grouped by the engine that calls them; a family that some engine cannot serve raises
``NotImplementedError`` from that engine's hooks and the engine says so.
"""

from __future__ import annotations

from typing import Any, Callable

from ._build import mypyc_attr


class StreamRowError(ValueError):
    """A stream row a family refuses (a step its table or its variant cannot take): the message
    is the row's quarantine reason."""


@mypyc_attr(allow_interpreted_subclasses=True)
class StreamRows:
    """One stream partition's rows of one micro-batch as a family's stream hooks hand them over,
    as plain tuples (``streaming.processor`` lays them out as the output kinds' columns):

    * ``timeline`` -- appended to for good, one tuple per step and replica (server) in
      ``STREAM_TIMELINE`` order;
    * ``log`` -- ``(replica, op, offset, epoch, value)``, ``op`` one of ``append``, ``truncate``,
      ``epoch`` (an epoch-cache entry compaction dropped: ``offset`` its start);
    * ``violations`` -- ``(at_step, invariant, detail)``; ``losses`` -- ``(at_step, offset, value,
      acked, allowed)``; ``errors`` -- ``(at_step, error)``.

    The stream takes the rows of ``log`` and the verdicts after each step, and empties them."""

    def __init__(self, timeline: list[tuple]) -> None:
        self.timeline = timeline
        self.log: list[tuple] = []
        self.violations: list[tuple] = []
        self.losses: list[tuple] = []
        self.errors: list[tuple] = []


# A timeline tuple's values, in this order (the ``timeline`` output kind's columns but the
# partition's constants: streaming.schemas).
STREAM_TIMELINE = ("seq", "idx", "event", "replica", "role", "alive", "halted", "leader_epoch", "leo", "hw",
                   "remote_leo", "epoch_cache", "leader", "controller_epoch", "isr")
STREAM_LOG = ("replica", "op", "offset", "epoch", "value")


@mypyc_attr(allow_interpreted_subclasses=True)
class Family:
    """One family of protocols (a base class: the families subclass it)."""

    # -- identity ----------------------------------------------------------------------------------
    name: str = ""  # the result's ``family`` and the stream's: "partition", "quorum"
    title: str = ""  # how messages name a protocol of the family: "partition", "metadata-quorum"
    docs: str = ""  # the document that describes the family's rules (docs/protocol.md, docs/quorum.md)

    # -- variants and knobs ------------------------------------------------------------------------
    def variant_names(self) -> tuple[str, ...]:
        """The presets, in the family's order (``--protocol all`` runs them in this order)."""
        raise NotImplementedError

    def knob_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    def variant(self, protocol: str, knobs: dict[str, Any] | None = None) -> Any:
        """The preset ``protocol`` with ``knobs`` set (``ValueError`` / ``KnobError`` naming what is wrong)."""
        raise NotImplementedError

    def parse_knobs(self, texts: list[str]) -> dict[str, Any]:
        """``--knob NAME=VALUE`` texts of this family's knobs -> ``{name: value}`` (``KnobError``)."""
        raise NotImplementedError

    # -- steps -------------------------------------------------------------------------------------
    def step_kinds(self) -> tuple[str, ...]:
        raise NotImplementedError

    def parse_step(self, kind: Any, args: Any, ids: tuple[int, ...]) -> Any:
        """One step's ``{kind: args}`` validated against the family's step table (``StepError``)."""
        raise NotImplementedError

    def step_to_dict(self, step: Any) -> dict[str, Any]:
        """The step in the scenario file's shape; ``parse_step`` reads it back to the same step."""
        raise NotImplementedError

    def describe_step(self, step: Any) -> str:
        raise NotImplementedError

    # -- invariants --------------------------------------------------------------------------------
    def invariant_names(self) -> tuple[str, ...]:
        raise NotImplementedError

    # -- scenarios ---------------------------------------------------------------------------------
    def is_document(self, data: Any) -> bool:
        """Whether a decoded scenario document belongs to this family."""
        raise NotImplementedError

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        """A decoded scenario document validated (``ScenarioError`` naming ``source``, the key or step)."""
        raise NotImplementedError

    # -- run / campaign / shrink -------------------------------------------------------------------
    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Replay ``scenario`` under ``protocol`` (+ knobs): the result document (``StepRefused`` at a
        step the variant cannot take; with ``refusal_as_result``, the "not expressible" result)."""
        raise NotImplementedError

    # -- search (explore) --------------------------------------------------------------------------

    # -- stream ------------------------------------------------------------------------------------
    # The stream's state function (``streaming.processor.process_batch``) is one loop over these
    # hooks: it puts a keyed stream partition's event rows in ``seq`` order and quarantines the rows
    # it cannot apply; the family reads the header row (seq 0), builds and steps the model, judges
    # it, encodes it for the state store, and hands the output rows over as plain tuples in a
    # ``StreamRows`` (streaming lays them out as columns).  A hook that refuses a row raises
    # ``StreamRowError`` with the quarantine reason.
    stream_header_type: str = ""  # the ``type`` of a stream partition's header row (seq 0): "partition", "quorum"
    stream_ticks: bool = False  # whether the workload source's ticks stand for this family's steps (``--workload``)

    def stream_header_types(self) -> tuple[str, ...]:
        """The row types taken for a header wherever they stand (a header anywhere but at seq 0 is
        refused, and so is any other row at seq 0): the family's own header type, and any other
        family's header the family names in its refusal."""
        return (self.stream_header_type,)

    def stream_misplaced_header(self, seq: int, kind: Any, protocol: str) -> str:
        """The quarantine reason of a row of ``stream_header_types`` not at seq 0, or of a row at
        seq 0 that is not this family's header (``protocol``: the stream's)."""
        raise NotImplementedError

    def stream_headerless(self, seq: int) -> str:
        """The quarantine reason of a step row of a stream partition whose header is missing or invalid."""
        raise NotImplementedError

    def parse_stream_header(self, args_json: str) -> tuple[str, Any]:
        """A header row's ``args`` -> ``(scenario name, header)`` (``ValueError`` -- ``ScenarioError``,
        ``KnobError``, JSON -- or ``RecursionError`` naming what is wrong: the row is quarantined as
        an invalid header)."""
        raise NotImplementedError

    def stream_model(self, header: Any, variant: Any, knobs: dict[str, Any] | None) -> Any:
        """A stream partition's model from its header: the stream's ``variant`` with the header's own
        knobs, then the stream's ``knobs`` (``--knob``) again, which win (``ValueError``: the row
        is quarantined as an invalid header)."""
        raise NotImplementedError

    def stream_step_ids(self, model: Any) -> tuple[int, ...]:
        """The ids a step row of this model may name (``parse_stream_step``'s ``ids``)."""
        raise NotImplementedError

    def parse_stream_step(self, where: str, seq: int, kind: Any, args_json: str,
                          ids: tuple[int, ...]) -> tuple[Any, str]:
        """A step row -> ``(step, its description)``; ``StreamRowError`` (the reason) for a step the
        step table refuses, ``ValueError`` / ``RecursionError`` for ``args`` that are not JSON.
        ``where``: ``topic/partition``.  The step is frozen: the stream reuses it for equal rows."""
        raise NotImplementedError

    def stream_rows(self, timeline: list[tuple]) -> "StreamRows":
        """The rows object of one stream partition's micro-batch (a family may keep per-batch
        encodings in a subclass); ``timeline``: the list its timeline tuples are appended to."""
        return StreamRows(timeline)

    def stream_apply(self, model: Any, step: Any, seq: int, description: str, rows: "StreamRows") -> None:
        """Apply ``step`` (row ``seq``) to the model, judge it, and put its rows into ``rows``;
        ``StreamRowError`` (the reason) for a step the variant refuses: nothing changed."""
        raise NotImplementedError

    def stream_compact(self, model: Any, min_records: int, rows: "StreamRows") -> None:
        """After a step: drop what no later step can reach once ``min_records`` more records could
        go (``--compact-min-records``), with ``log`` rows for what the outputs must keep.  By
        default the model keeps everything."""

    def stream_verdicts(self, model: Any) -> tuple[int | None, int, tuple[str, ...]]:
        """What the state row shows of the model: ``(controller_leader, controller_epoch, the
        invariants broken so far, sorted)``."""
        raise NotImplementedError

    def stream_summary(self, model: Any, steps: int) -> dict[str, Any]:
        """The ``summary`` row's fields after a micro-batch that applied a step (``steps``: applied so far)."""
        raise NotImplementedError

    def stream_document(self, model: Any) -> dict[str, Any]:
        """The model as a JSON document (the state row's ``core``, ``streaming.state_codec``)."""
        raise NotImplementedError

    def stream_restore(self, document: Any, violated: str) -> Any:
        """The model ``stream_document`` wrote (``violated``: the state row's, comma-separated)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<family {self.name}>"
