"""``replemu compile``: scenario files -> event files for the streaming job (``cmd_compile`` is the command)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable

from emulator.scenario import ScenarioError
from scenario_io.yaml_files import load_scenario
from streaming.events import duplicate_keys, scenario_rows, write_event_files

from .cli_common import EXIT_OK, fail, output_problem


def compile_scenarios(paths: Iterable[str | Path], out_dir: str | Path, split: int = 1, fmt: str = "jsonl") -> list[Path]:
    """Validate every file (and that no two share a partition key), then write the event files."""
    scenarios = [load_scenario(p) for p in paths]
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
