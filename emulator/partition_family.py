"""The partition-replication family (``hw`` ... ``kip966``) as a ``Family``: the engines' one view
of ``emulator.steps``, ``emulator.variants``, ``emulator.scenario``, ``emulator.run`` and the
checker's invariant registry.  The rules are docs/protocol.md's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator

from . import explore, partition_stream, report
from .config import config_to_dict
from .explore_reduce import REDUCTIONS
from .family import Family, StreamRows
from .invariants import INVARIANT_NAMES
from .result import check_result_document
from .run import Replay, run_scenario
from .scenario import Scenario, parse_scenario
from .search import SearchSpace
from .search_command import Counterexample, SearchOption
from .steps import STEP_TABLE
from .variants import VARIANT_TABLE, variant_named
from .workload import generate_partition


class PartitionFamily(Family):
    """Partition replication: the presets hw ... kip966 over one partition's replicas."""

    # -- invariants --------------------------------------------------------------------------------
    def invariant_names(self) -> tuple[str, ...]:
        return INVARIANT_NAMES

    # -- scenarios ---------------------------------------------------------------------------------
    def is_document(self, data: Any) -> bool:
        return isinstance(data, dict) and "voters" not in data

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        return parse_scenario(data, source)

    # -- run / campaign / shrink -------------------------------------------------------------------
    default_protocol = "kip320"
    max_table_steps = 100_000  # the table's states carry no logs (trace_logs=False): it may be longer
    replica_dirs = True
    campaign_unit = "partition"
    cases_per_protocol = False  # one generated partition replays under every preset

    def campaign_engines(self) -> tuple[str, ...]:
        return ("spark", "local")

    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None,
            prepare: Any = None, trace_logs: bool = True) -> dict[str, Any]:
        return run_scenario(scenario, protocol, trace=trace, prepare=prepare, knobs=knobs,
                            refusal_as_result=refusal_as_result, trace_logs=trace_logs, progress=progress)

    def refusal_words(self, protocol: str) -> str:
        return f"not a step the {protocol} controller can take"

    def step_table(self, result: dict[str, Any]) -> str:
        return report.step_table(result)

    def final_logs(self, result: dict[str, Any]) -> str:
        return report.final_logs(result)

    def verdict(self, result: dict[str, Any]) -> str:
        return report.verdict(result)

    def check_expectation(self, result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
        return report.check_expectation(result, expect)

    def expectation(self, result: dict[str, Any]) -> dict[str, Any]:
        # every invariant broken, in the order they broke (``--check`` is exact over the verdict
        # invariants, which may break alongside the one a shrinker kept)
        return {"violations": [v["invariant"] for v in result["violations"]]}

    def is_scenario(self, scenario: Any) -> bool:
        return isinstance(scenario, Scenario)

    def parse_file(self, data: Any, source: str, resolve: Callable[[str], str]) -> Any:
        return parse_scenario(data, source=source, resolve_initial_state=resolve)

    def document(self, scenario: Any, description: str | None = None,
                 expect: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """The contract's YAML shape (``initial_state`` as resolved: absolute, so it replays from anywhere)."""
        s: Scenario = scenario
        doc: dict[str, Any] = {"name": s.name, "description": s.description if description is None else description,
                               "replicas": list(s.replicas), "config": config_to_dict(s.config)}
        if s.brokers:  # the scenario's other brokers (a reassignment's targets): every broker, as the file lists them
            doc["brokers"] = list(s.broker_ids)
        if s.initial_state:
            doc["initial_state"] = s.initial_state
        doc["steps"] = [STEP_TABLE.to_dict(step) for step in s.steps]
        if expect:
            doc["expect"] = expect
        return doc

    def with_knobs(self, scenario: Any, knobs: dict[str, Any]) -> Any:
        s: Scenario = scenario
        return replace(s, config=replace(s.config, knobs=tuple(sorted({**dict(s.config.knobs), **knobs}.items()))))

    def simpler_steps(self, scenario: Any, step: Any) -> Iterator[Any]:
        """Each of ``to``, ``max_records``, ``acks``, ``unclean``, ``epoch`` dropped, a lost response
        delivered, a power loss a process crash, ``values`` its first value (parsed as tried)."""
        (kind, args), = STEP_TABLE.to_dict(step).items()
        simpler: list[dict[str, Any]] = []
        for key in ("to", "max_records", "acks", "unclean", "epoch"):
            if key in args:
                simpler.append({k: v for k, v in args.items() if k != key})
        if args.get("response") == "lost":
            simpler.append({**args, "response": "delivered"})
        if args.get("mode") == "power":
            simpler.append({**args, "mode": "process"})
        if "values" in args:
            simpler.append({**{k: v for k, v in args.items() if k != "values"}, "value": args["values"][0]})
        ids: tuple[int, ...] = scenario.broker_ids
        for a in simpler:  # a loop, not a generator expression: mypyc builds those as lists
            yield STEP_TABLE.parse(kind, a, ids)

    def initial_state(self, scenario: Any) -> str | None:
        s: Scenario = scenario
        return s.initial_state

    def check_prepare(self, scenario: Any, prepare: Any) -> None:
        s: Scenario = scenario
        prepare(Replay(s.replicas, s.config, variant_named("kip320")))

    def is_result(self, result: Any) -> bool:
        return isinstance(result, dict) and result.get("family", self.name) == self.name  # results of format 1 name none

    def check_results(self, results: list[Any], source: str) -> list[dict[str, Any]]:
        return check_result_document(results, source)

    def view_entry(self, result: dict[str, Any]) -> dict[str, Any]:
        return report.view_entry(result)

    def describe_campaign(self, seed: int, profile: Any, cases: int, protocols: list[str], engine: str,
                          knobs: dict[str, Any] | None) -> list[str]:
        rates = ", ".join(f"{k}={v:g}" for k, v in profile.rates.items())
        return [f"  knobs {', '.join(f'{k}={v}' for k, v in sorted((knobs or {}).items()))} (over each preset)"] * bool(knobs) + [
            f"campaign seed {seed}  profile {profile.name} ({profile.description})",
            f"  partitions {cases}  protocols {','.join(protocols)}  engine {engine}",
            f"  per partition k: streams replemu/{seed}/k/workload, /faults, /scheduling",
            f"  replicas {profile.replicas[0]}-{profile.replicas[1]}  steps {profile.steps[0]}-{profile.steps[1]}  "
            f"min.isr {list(profile.min_insync_replicas)}  acks {list(profile.acks)}  unclean {profile.unclean:g}  "
            f"explicit hw checkpoint {profile.explicit_hw_checkpoint:g}  explicit flush {profile.explicit_log_flush:g}",
            f"  rates {rates}",
        ]

    def generate_case(self, seed: int, k: int, profile: Any, protocol: str | None,
                      knobs: dict[str, Any] | None) -> dict[str, Any]:
        """``emulator.workload``'s partition ``k`` (whatever the preset); ``knobs`` go into its
        ``config.knobs``, so a file written from it replays with them."""
        doc = generate_partition(seed, k, profile)
        if knobs:
            doc["config"]["knobs"] = {name: value for name, value in sorted(knobs.items())}
        return doc

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


PARTITION = PartitionFamily("partition", "partition", "docs/protocol.md", STEP_TABLE, VARIANT_TABLE)
