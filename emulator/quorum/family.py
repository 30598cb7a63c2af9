"""The metadata-quorum family (``kraft595`` ... ``kraft996``) as a ``Family``: the engines' one view
of the quorum's step table, variants, scenarios, run and invariant registry.  The rules are
docs/quorum.md's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator

from .. import partition_stream
from ..family import Family, StreamRows
from ..result import ResultFormatError
from ..search import SearchSpace
from ..search_command import Counterexample, SearchOption
from . import explore as quorum_explore
from . import report as quorum_report
from . import stream as quorum_stream
from .invariants import QUORUM_INVARIANT_NAMES
from .run import (
    QuorumScenario,
    is_quorum_document,
    parse_quorum_scenario,
    quorum_result_problem,
    quorum_scenario_document,
    run_quorum_scenario,
)
from .steps import QUORUM_STEP_TABLE
from .variants import (
    QUORUM_VARIANT_TABLE,
)
from .workload import generate_quorum_scenario


class QuorumFamily(Family):
    """KRaft's metadata quorum: the presets kraft595 ... kraft996 over its voters and observers."""

    # -- invariants --------------------------------------------------------------------------------
    def invariant_names(self) -> tuple[str, ...]:
        return QUORUM_INVARIANT_NAMES

    # -- scenarios ---------------------------------------------------------------------------------
    def is_document(self, data: Any) -> bool:
        return is_quorum_document(data)

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        return parse_quorum_scenario(data, source)

    # -- run / campaign / shrink -------------------------------------------------------------------
    qualifier = "quorum "
    default_protocol = "kraft853"
    knobs_hint = " (its knobs: docs/quorum.md)"
    campaign_walk = "quorum"  # emulator.quorum.workload's random walks (the partition profiles do not apply)

    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Callable[[int, int], None] | None = None,
            prepare: Any = None, trace_logs: bool = True) -> dict[str, Any]:
        # a quorum starts empty (no ``prepare``); its trace's states always carry the logs
        return run_quorum_scenario(scenario, protocol, trace=trace, knobs=knobs, refusal_as_result=refusal_as_result,
                                   progress=progress)

    def step_table(self, result: dict[str, Any]) -> str:
        return quorum_report.step_table(result)

    def final_logs(self, result: dict[str, Any]) -> str:
        return quorum_report.final_logs(result)

    def verdict(self, result: dict[str, Any]) -> str:
        return quorum_report.verdict(result)

    def check_expectation(self, result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
        return quorum_report.check_expectation(result, expect)

    def is_scenario(self, scenario: Any) -> bool:
        return isinstance(scenario, QuorumScenario)

    def document(self, scenario: Any, description: str | None = None,
                 expect: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        return quorum_scenario_document(scenario, description, expect)

    def with_knobs(self, scenario: Any, knobs: dict[str, Any]) -> Any:
        s: QuorumScenario = scenario
        return replace(s, knobs={**s.knobs, **knobs})

    def simpler_steps(self, scenario: Any, step: Any) -> Iterator[Any]:
        """Each optional argument dropped: a fetch to the known leader, no record limit, the admin
        request to the leader, a process crash instead of a power loss."""
        (kind, args), = QUORUM_STEP_TABLE.to_dict(step).items()
        optional = [a.name for a in QUORUM_STEP_TABLE[step.kind].args if not a.required]
        servers: tuple[int, ...] = scenario.servers
        for key in optional:  # a loop, not a generator expression: mypyc builds those as lists
            if key in args:
                yield QUORUM_STEP_TABLE.parse(kind, {k: v for k, v in args.items() if k != key}, servers)

    def check_results(self, results: list[Any], source: str) -> list[dict[str, Any]]:
        for number, r in enumerate(results, start=1):
            if isinstance(r, dict) and isinstance(r.get("not_expressible"), dict):
                continue  # a preset's "not expressible" answer: no state to check
            problem = quorum_result_problem(r)
            if problem:
                where = f"{source}: result {number}" if len(results) > 1 else source
                raise ResultFormatError(f"{where}: {problem}")
        return results

    def view_entry(self, result: dict[str, Any]) -> dict[str, Any]:
        return quorum_report.view_entry(result)

    def describe_campaign(self, seed: int, profile: Any, cases: int, protocols: list[str], engine: str,
                          knobs: dict[str, Any] | None) -> list[str]:
        return [f"  knobs {', '.join(f'{k}={v}' for k, v in sorted((knobs or {}).items()))} (over each preset)"] * bool(knobs) + [
            f"campaign seed {seed}  profile {profile} (random walks over the quorum's steps)",
            f"  scenarios {cases}  protocols {','.join(protocols)}  engine local (the quorum core in this process)",
            f"  per scenario k: stream replemu-quorum/{seed}/k (voters, length, every step); refused steps drawn again",
        ]

    def generate_case(self, seed: int, k: int, profile: Any, protocol: str | None,
                      knobs: dict[str, Any] | None) -> dict[str, Any]:
        """A random walk of a quorum of ``protocol`` (``emulator.quorum.workload``): every step one it takes."""
        if protocol is None:
            raise ValueError("a metadata-quorum walk is drawn under a preset")
        return generate_quorum_scenario(seed, k, protocol, knobs)

    # -- search (explore) --------------------------------------------------------------------------
    search_owner = f"the metadata-quorum protocols ({', '.join(QUORUM_VARIANT_TABLE.names)})"
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


QUORUM = QuorumFamily("quorum", "metadata-quorum", "docs/quorum.md", QUORUM_STEP_TABLE, QUORUM_VARIANT_TABLE)
