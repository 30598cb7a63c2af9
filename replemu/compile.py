"""``replemu compile``: scenario files -> event files for the streaming job (``cmd_compile`` is the command)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable

from emulator.families import FAMILIES, Family
from emulator.partition_family import PARTITION
from emulator.quorum.family import QUORUM
from emulator.scenario import ScenarioError
from scenario_io.yaml_files import load_family_scenario
from streaming.events import duplicate_keys, quorum_scenario_rows, scenario_rows, write_event_files

from .cli_common import EXIT_OK, fail, output_problem


def compile_scenarios(paths: Iterable[str | Path], out_dir: str | Path, split: int = 1, fmt: str = "jsonl") -> list[Path]:
    """Validate every file (and that no two share a partition key), then write the event files.

    Metadata-quorum files (they name ``voters``; docs/quorum.md "Streaming") become the metadata
    partitions ``__cluster_metadata``/0, /1, ... in the order given; a stream runs one family, so
    files of two families are not compiled together."""
    loaded = [load_family_scenario(p) for p in paths]
    for family in FAMILIES.values():  # the first family (in the registry's order) among the files
        first = next((s for f, s in loaded if f is family), None)
        other = next(((f, s) for f, s in loaded if f is not family), None)
        if first is not None and other is not None:
            raise ScenarioError(f"{other[1].source} is a {other[0].title} scenario and {first.source} a {family.title} "
                                f"one: a stream runs one family (a {other[0].name} or a {family.name} protocol), "
                                f"compile them into two --out directories")
    family, scenarios = (loaded[0][0] if loaded else PARTITION), [s for _, s in loaded]
    return write_event_files(_event_rows(family, scenarios), out_dir, split=split, fmt=fmt)


def _event_rows(family: Family, scenarios: list) -> list[list[dict]]:
    """The event rows of each scenario (``streaming.events``): a quorum scenario's are the metadata
    partition of its number; partition scenarios are keyed by their topic and partition, which no
    two may share.  (The one place that asks which family it holds: the stream's row builders are
    not a Family hook yet.)"""
    if family is QUORUM:
        return [quorum_scenario_rows(s, k) for k, s in enumerate(scenarios)]
    duplicate = duplicate_keys(scenarios)
    if duplicate:
        raise ScenarioError(duplicate)
    return [scenario_rows(s) for s in scenarios]


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
