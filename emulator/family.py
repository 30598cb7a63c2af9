"""A protocol family: what every engine needs from one family of protocols, in one object.

replemu models families of protocols: partition replication (``hw`` ... ``kip966``,
``emulator.partition_family.PARTITION``) and KRaft's metadata quorum (``kraft595`` ...
``kraft996``, ``emulator.quorum.family.QUORUM``).  An engine -- ``replemu run``, campaign, shrink,
explore, the stream, the dashboard -- is one code path over a ``Family``: it asks the family for its
variants, parses steps with its step table, builds and steps its model, judges with its checker,
encodes its state, and never asks which family it holds.  ``emulator.families`` is the registry:
``--protocol`` finds its family there, once, and the family makes the variant with ``--knob``.

A new family is a package that subclasses ``Family`` and one row in ``emulator.families.FAMILIES``
(docs/architecture.md says, file by file, what that takes; tests/test_family_toy.py builds one).

The hooks are grouped by the engine that calls them; a family that some engine cannot serve raises
``NotImplementedError`` from that engine's hooks and the engine says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator

from ._build import mypyc_attr
from .search import SearchSpace
from .search_command import Counterexample, SearchOption


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
    """One family of protocols (a base class: the families subclass it).  A subclass outside the
    compiled core (a plug-in's, tests/toy_family.py) sets the data attributes below in its
    ``__init__``: a class attribute of an interpreted subclass does not replace the default the
    compiled base gives the instance."""

    # -- identity, variants, steps -----------------------------------------------------------------
    def __init__(self, name: str, title: str, docs: str, steps: Any, variants: Any) -> None:
        """``steps``: the family's ``emulator.step_table.StepTable``; ``variants``: its
        ``emulator.variant_table.VariantTable`` (presets over a ``KnobTable``)."""
        self.name = name  # the result's ``family`` and the stream's: "partition", "quorum"
        self.title = title  # how messages name a protocol of the family: "partition", "metadata-quorum"
        self.docs = docs  # the document that describes the family's rules (docs/protocol.md, docs/quorum.md)
        self.steps = steps
        self.variants = variants

    def init_args(self) -> tuple[Any, ...]:
        """What the family's class is built with again where it is unpickled (Spark ships the family
        with a stream's state function and a search's spaces): the base's constructor arguments; a
        subclass whose constructor takes others returns those (tests/toy_family.py: none)."""
        return (self.name, self.title, self.docs, self.steps, self.variants)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), self.init_args()

    def variant_names(self) -> tuple[str, ...]:
        """The presets, in the family's order (``--protocol all`` runs them in this order)."""
        names: tuple[str, ...] = self.variants.names
        return names

    def knob_names(self) -> tuple[str, ...]:
        return tuple(self.variants.knobs)

    def variant(self, protocol: str, knobs: dict[str, Any] | None = None) -> Any:
        """The preset ``protocol`` with ``knobs`` set (``ValueError`` / ``KnobError`` naming what is wrong)."""
        return self.variants.named(protocol, knobs)

    def parse_knobs(self, texts: list[str]) -> dict[str, Any]:
        """``--knob NAME=VALUE`` texts of this family's knobs -> ``{name: value}`` (``KnobError``)."""
        knobs: dict[str, Any] = self.variants.parse_knobs(texts)
        return knobs

    def step_kinds(self) -> tuple[str, ...]:
        kinds: tuple[str, ...] = self.steps.kinds
        return kinds

    def parse_step(self, kind: Any, args: Any, ids: tuple[int, ...]) -> Any:
        """One step's ``{kind: args}`` validated against the family's step table (``StepError``)."""
        return self.steps.parse(kind, args, ids)

    def step_to_dict(self, step: Any) -> dict[str, Any]:
        """The step in the scenario file's shape; ``parse_step`` reads it back to the same step."""
        d: dict[str, Any] = self.steps.to_dict(step)
        return d

    def describe_step(self, step: Any) -> str:
        described: str = self.steps.describe(step)
        return described

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
    # ``replemu run`` (replemu/replay.py), campaign and shrink (replemu/campaign.py), the public API
    # (replemu/api.py), the dashboard's views of run results and scenario files (scenario_io) call these.
    qualifier: str = ""  # how messages qualify the family's words: "quorum " (an unknown quorum invariant); "" plain
    default_protocol: str = ""  # the preset the API replays a scenario of the family under when none is named
    max_table_steps: int = 5_000  # the longest scenario whose human step table ``replemu run`` prints
    knobs_hint: str = ""  # what a message about another family's --knob adds: " (its knobs: docs/quorum.md)"
    replica_dirs: bool = False  # whether a scenario may start from Kafka replica directories (initial_state, --from-dirs)
    campaign_unit: str = "scenario"  # what a campaign's report calls one generated case ("partition", "scenario")
    campaign_walk: str = ""  # the one profile a campaign draws from, the family's own walk; "" : conf/workloads.yaml's
    cases_per_protocol: bool = True  # whether a campaign draws its cases under each preset (a walk of the steps it takes)

    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None,
            prepare: Any = None, trace_logs: bool = True) -> dict[str, Any]:
        """Replay ``scenario`` under ``protocol`` (+ knobs): the result document (``StepRefused`` at a
        step the variant cannot take; with ``refusal_as_result``, the "not expressible" result).
        ``prepare(model)`` seeds the model before the first step (``replica_dirs`` families);
        ``trace_logs=False`` may leave the logs out of the trace's states (a step table needs none)."""
        raise NotImplementedError

    # replemu run's human output and --check
    def refusal_words(self, protocol: str) -> str:
        """What a refused step was to ``protocol``, as its ``StepRefused`` says: "not a step the kip966
        controller can take", "refused under kraft853"."""
        return f"refused under {protocol}"

    def step_table(self, result: dict[str, Any]) -> str:
        """``replemu run``'s step-by-step table of a result with its trace."""
        raise NotImplementedError

    def final_logs(self, result: dict[str, Any]) -> str:
        """``replemu run``'s final logs of a result, side by side."""
        raise NotImplementedError

    def verdict(self, result: dict[str, Any]) -> str:
        """``replemu run``'s one verdict line of a result."""
        raise NotImplementedError

    def check_expectation(self, result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
        """``--check``: the disagreements of a result with its variant's ``expect`` block (empty: agrees)."""
        raise NotImplementedError

    def expectation(self, result: dict[str, Any]) -> dict[str, Any]:
        """The ``expect`` block that ``--check`` finds agreeing with ``result`` in its violations (a
        shrunk file's)."""
        return {"violations": sorted({v["invariant"] for v in result["violations"]})}

    # scenarios as objects and files; a shrinker's parts
    def is_scenario(self, scenario: Any) -> bool:
        """Whether ``scenario`` is a parsed scenario of this family."""
        raise NotImplementedError

    def parse_file(self, data: Any, source: str, resolve: Callable[[str], str]) -> Any:
        """A scenario file's decoded document validated, as ``parse_scenario``; ``resolve(path)``
        turns a path the file names (relative to the file) into a directory (``ValueError``)."""
        return self.parse_scenario(data, source)

    def document(self, scenario: Any, description: str | None = None,
                 expect: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """``scenario`` as a scenario file's document (``parse_scenario`` reads it back), with
        ``description`` (default: its own) and ``expect``."""
        raise NotImplementedError

    def with_steps(self, scenario: Any, steps: Any) -> Any:
        """``scenario`` with ``steps`` (a sequence of its family's steps) instead of its own."""
        return replace(scenario, steps=tuple(steps))

    def with_knobs(self, scenario: Any, knobs: dict[str, Any]) -> Any:
        """``scenario`` with ``knobs`` set over its own (a file written from it carries them)."""
        raise NotImplementedError

    def simpler_steps(self, scenario: Any, step: Any) -> Iterator[Any]:
        """Simpler forms of ``step`` in ``scenario`` for a shrinker to try, in order, each a step
        (lazily: the shrinker stops at the first that keeps the failure)."""
        return iter(())

    # a start from Kafka replica directories
    def initial_state(self, scenario: Any) -> str | None:
        """The replica directories ``scenario`` starts from (``replica_dirs`` families); None: empty."""
        return None

    def check_prepare(self, scenario: Any, prepare: Any) -> None:
        """Seed a fresh model of ``scenario`` with ``prepare`` once, so that a ``prepare`` that does not
        fit it (other broker ids) raises its ``ValueError`` before any run (``replica_dirs`` families)."""
        raise NotImplementedError

    # the dashboard's views of replemu run --json
    def is_result(self, result: Any) -> bool:
        """Whether a decoded result object is one of this family's (``replemu run --json``)."""
        return isinstance(result, dict) and result.get("family") == self.name

    def check_results(self, results: list[Any], source: str) -> list[dict[str, Any]]:
        """The results of a ``replemu run --json`` document of this family, each checked for what a
        reader relies on (``ResultFormatError`` naming ``source`` and the result); a "not expressible"
        answer has no state to check."""
        raise NotImplementedError

    def view_entry(self, result: dict[str, Any]) -> dict[str, Any]:
        """A result as the dashboard's views show one scenario (its ``--trace`` as timeline and log operations)."""
        raise NotImplementedError

    # campaigns
    def describe_campaign(self, seed: int, profile: Any, cases: int, protocols: list[str], engine: str,
                          knobs: dict[str, Any] | None) -> list[str]:
        """The lines a campaign prints before it runs: every parameter it draws from."""
        raise NotImplementedError

    def campaign_engines(self) -> tuple[str, ...]:
        """The engines a campaign of this family runs on: ``local`` (this process) and, for a family
        whose cases stream as the job's event rows, ``spark`` (``streaming.batch_replay``); a
        campaign asked for an engine its family lacks runs locally (the same report)."""
        return ("local",)

    def generate_case(self, seed: int, k: int, profile: Any, protocol: str | None,
                      knobs: dict[str, Any] | None) -> dict[str, Any]:
        """Case ``k`` of campaign ``seed`` drawn from ``profile`` (under ``protocol`` when
        ``cases_per_protocol``, else None), with ``knobs``: a scenario document."""
        raise NotImplementedError

    # -- search (explore) --------------------------------------------------------------------------
    # ``replemu explore`` builds a family's spaces here and runs one engine on them
    # (``emulator.search``: the engine's hooks are the ``SearchSpace`` a family returns); what the
    # command prints and writes of a space comes from the family too.
    search_owner: str = ""  # how a flag of this family's refused elsewhere names it: "partition protocols"
    search_kind: str = ""  # how a refusal names one of its protocols: "a partition protocol"

    def search_options(self) -> tuple[SearchOption, ...]:
        """The flags of ``replemu explore`` this family's search takes, with their defaults (a
        flag another family takes and this one does not is refused)."""
        raise NotImplementedError

    def search_engines(self) -> tuple[str, ...]:
        """The engines that search this family: ``local`` (``emulator.search.search_local``),
        ``spark`` (``streaming.explore.search_spark``)."""
        return ("local",)

    def search_checkpoints(self) -> bool:
        """Whether a search keeps its levels under ``--out`` (``DIR/PROTOCOL/ENGINE``: rerunning the
        same command resumes it)."""
        return False

    def search_reductions(self) -> tuple[str, ...]:
        """The reductions ``--reduce`` may ask of this family's searches (docs/explore.md "Reductions")."""
        return ()

    def search_spaces(self, protocols: list[str], knobs: dict[str, Any],
                      options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
        """One space per protocol, and the properties ``--until`` names, from the values of
        ``search_options`` (given or default; ``config``: ``--config`` values by key);
        ``ValueError`` names the flag that is wrong."""
        raise NotImplementedError

    def describe_search(self, space: Any) -> tuple[str, str]:
        """What the first line of ``replemu explore`` says of a space: before the engine's
        settings, and after them."""
        raise NotImplementedError

    def search_notes(self, space: Any) -> list[str]:
        """Lines said before the search of ``space`` (a reduction asked for that does not apply)."""
        return []

    def search_result(self, space: Any) -> dict[str, Any]:
        """The result object's fields that say what was searched (``protocol``, ``bounds`` ...),
        first in the object ``--json`` prints."""
        raise NotImplementedError

    def counterexample(self, space: Any, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
        """The shortest path ``path`` (``depth`` actions) that breaks ``invariant`` as a scenario of
        the family that replays with ``replemu run FILE --check``."""
        raise NotImplementedError

    def search_chart_marks(self) -> tuple[str, ...] | None:
        """The invariants ``explore.svg`` marks where they first broke (None: no picture)."""
        return None

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
