"""``replemu``: the command line.

    replemu run FILE [FILE...] --protocol hw|kip101|kip279|kip320|all [--json] [--trace] [--check]

Exit status: 0 the run completed (whatever it found); 1 ``--check`` disagreed with an
``expect`` block; 2 invalid scenario or arguments (nothing is replayed).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import report
from .run import dumps, run_scenario
from .scenario import ScenarioError, load_scenario
from .variants import VARIANT_NAMES

EXIT_OK, EXIT_CHECK_FAILED, EXIT_INVALID = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit status is 2 as well
        self.print_usage(sys.stderr)
        print(f"replemu: error: {message}", file=sys.stderr)
        sys.exit(EXIT_INVALID)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="replemu", description="Kafka replication emulator (HW truncation, KIP-101, KIP-279, KIP-320).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="replay scenario files under one or all protocol variants")
    run.add_argument("files", nargs="+", metavar="FILE", help="scenario YAML files")
    run.add_argument("--protocol", default="all", choices=VARIANT_NAMES + ("all",), help="variant to replay (default: all)")
    run.add_argument("--json", action="store_true", help="print the contract's result object(s) as JSON")
    run.add_argument("--trace", action="store_true", help="add a per-step trace to the JSON")
    run.add_argument("--check", action="store_true", help="compare with each file's expect block; exit 1 on disagreement")
    run.add_argument("--summary", action="store_true", help="human output: verdict lines and the matrix only")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    try:
        scenarios = [load_scenario(path) for path in args.files]  # validate everything first
    except ScenarioError as exc:
        print(f"replemu: invalid scenario: {exc}", file=sys.stderr)
        return EXIT_INVALID
    protocols = list(VARIANT_NAMES) if args.protocol == "all" else [args.protocol]
    human = not args.json
    results, failures = [], []
    for scenario in scenarios:
        for protocol in protocols:
            result = run_scenario(scenario, protocol, trace=args.trace or (human and not args.summary))
            if human:
                _print_human(scenario, result, args.summary)
            if args.check:
                expect = scenario.expect.get(protocol)
                problems = report.check_expectation(result, expect)
                status = "no expectation" if expect is None else ("agrees" if not problems else "DISAGREES")
                print(f"check {scenario.source} --protocol {protocol}: {status}", file=sys.stderr if args.json else sys.stdout)
                for p in problems:
                    print(f"  - {p}", file=sys.stderr if args.json else sys.stdout)
                if problems:
                    failures.append((scenario.name, protocol))
            if not args.trace:
                result.pop("trace", None)
            results.append(result)
    if args.json:
        print(dumps(results[0] if len(results) == 1 else results))
    elif len(protocols) > 1 or len(scenarios) > 1:
        print()
        print(report.matrix(results, protocols))
    return EXIT_CHECK_FAILED if failures else EXIT_OK


def _print_human(scenario, result, summary: bool) -> None:
    if not summary:
        print(f"== {scenario.name} under {result['protocol']} ({scenario.source}) ==")
        if scenario.description:
            print(scenario.description)
        print()
        print(report.step_table(result))
        print()
        print(report.final_logs(result))
        print()
    print(report.verdict(result))
    if not summary:
        print()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(args)
    return EXIT_INVALID  # pragma: no cover - argparse rejects unknown commands


def entry() -> None:
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `replemu run ... | head`
        sys.exit(EXIT_OK)
