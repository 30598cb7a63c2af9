"""``replemu compile``: scenario files -> event files for the streaming job (``cmd_compile`` is the command)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable

from emulator.scenario import ScenarioError
from scenario_io.yaml_files import load_any_scenario
from streaming.events import duplicate_keys, quorum_scenario_rows, scenario_rows, write_event_files

from .cli_common import EXIT_OK, fail, output_problem


def compile_scenarios(paths: Iterable[str | Path], out_dir: str | Path, split: int = 1, fmt: str = "jsonl") -> list[Path]:
    """Validate every file (and that no two share a partition key), then write the event files.

    Metadata-quorum files (they name ``voters``; docs/quorum.md "Streaming") become the metadata
    partitions ``__cluster_metadata``/0, /1, ... in the order given; a stream runs one family, so
    quorum and partition files are not compiled together."""
    from emulator.quorum_run import QuorumScenario

    paths = list(paths)
    scenarios = [load_any_scenario(p) for p in paths]
    quorum = [s for s in scenarios if isinstance(s, QuorumScenario)]
    if quorum:
        partition = [s for s in scenarios if not isinstance(s, QuorumScenario)]
        if partition:
            raise ScenarioError(f"{partition[0].source} is a partition scenario and {quorum[0].source} a metadata-quorum "
                                f"one: a stream runs one family (a partition or a quorum protocol), compile them into "
                                f"two --out directories")
        return write_event_files([quorum_scenario_rows(s, k) for k, s in enumerate(quorum)], out_dir, split=split, fmt=fmt)
    duplicate = duplicate_keys(scenarios)
    if duplicate:
        raise ScenarioError(duplicate)
    return write_event_files([scenario_rows(s) for s in scenarios], out_dir, split=split, fmt=fmt)


def cmd_compile(args: argparse.Namespace) -> int:
    problem = output_problem(args.out, "--out")
    if problem:
        return fail(f"replemu: error: {problem}")
    try:
        paths = compile_scenarios(args.files, args.out, split=args.split, fmt=args.format)
    except ScenarioError as exc:
        return fail(f"replemu: invalid scenario: {exc}")
    print(f"wrote {len(paths)} event files for {len(args.files)} scenarios to {args.out}")
    return EXIT_OK
