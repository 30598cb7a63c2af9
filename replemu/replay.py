"""``replemu run``: scenario files replayed through the core, in this process (no Spark), and
what goes with it: ``replemu export`` writes a result's replicas as Kafka log directories,
``replemu inspect`` reads such directories back (``run --from-dirs`` starts from them), and
``replemu steps`` prints the table of step kinds (docs/steps.md).  ``cmd_run`` is one loop over
the family of the files (``emulator.family.Family``): its presets, its run, its human output (step
table, final logs, verdict), its ``--check`` and its words for a refused step; the scenario x
variant matrix is ``replemu.report``'s.

Not ``replemu/run.py``: ``replemu.run`` is the public API's function, and importing a submodule
of the same name would put the module in its place on the package.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from emulator import ScenarioError, dumps
from emulator.families import FAMILIES, Family, family_of_protocol
from emulator.result import not_expressible_text
from scenario_io.yaml_files import MAX_FILE_BYTES, load_family_scenario

from . import report
from .cli_common import EXIT_CHECK_FAILED, EXIT_OK, fail, output_problem

# What one run may be asked for (docs/run.md, "Long scenarios"): a step-by-step output keeps every
# step's state until it is printed, so its memory grows with the steps (the table, up to its
# family's ``max_table_steps``) or with the steps times the logs (--trace, whose states carry the
# logs); verdicts alone have no such bound.
MAX_TRACED_STEPS = 5_000  # --trace, --check of an ``at_step`` expectation
ANNOUNCE_BYTES = 4 << 20  # a file this large is announced on stderr before it is read


def _progress(source: str, protocol: str):
    def report(done: int, total: int) -> None:
        print(f"replemu: {source} under {protocol}: step {done:,} of {total:,}", file=sys.stderr, flush=True)
    return report


def family_knobs(args: argparse.Namespace, family: Family) -> dict[str, Any]:
    """The ``--knob`` assignments of ``args`` that set knobs of ``family`` (``cli.main`` checked
    every one names a knob of some family)."""
    names = family.knob_names()
    return family.parse_knobs([t for t in getattr(args, "knob", None) or () if t.partition("=")[0].strip() in names])


def foreign_knob(args: argparse.Namespace, family: Family) -> tuple[str, Family] | None:
    """The first ``--knob`` of ``args`` that sets another family's knob, with that family; None when none does."""
    for other in FAMILIES.values():
        if other is not family:
            knobs = family_knobs(args, other)
            if knobs:
                return next(iter(knobs)), other
    return None


def _length_problem(scenario, args: argparse.Namespace, family: Family) -> str | None:
    """Why the output asked of ``scenario`` would not fit a run's memory; None when it would."""
    n = len(scenario.steps)
    fix = "--summary and --json (without --trace) replay any length"
    if args.trace and n > MAX_TRACED_STEPS:
        return (f"{scenario.source}: {n:,} steps; --trace (every step's state with its logs) is limited to "
                f"{MAX_TRACED_STEPS:,} steps ({fix})")
    if args.check and n > MAX_TRACED_STEPS and any("at_step" in (e or {}) for e in scenario.expect.values()):
        return (f"{scenario.source}: {n:,} steps; an at_step expectation (every step's state with its logs) is "
                f"limited to {MAX_TRACED_STEPS:,} steps")
    limit = family.max_table_steps
    if not args.json and not args.summary and n > limit:
        return (f"{scenario.source}: {n:,} steps; the step-by-step table is limited to {limit:,} steps "
                f"(use --summary for the verdicts, or --json)")
    return None


def _mixed(loaded: list[tuple[Family, Any]]) -> str | None:
    """Why files of more than one family cannot be run together; None when they are of one."""
    for family in FAMILIES.values():  # the first family (in the registry's order) among the files
        first = next((s for f, s in loaded if f is family), None)
        if first is None:
            continue
        other = next(((f, s) for f, s in loaded if f is not family), None)
        if other is None:
            return None
        return (f"{other[0].title} and {family.title} scenarios cannot be run together "
                f"({first.source} is a {family.name} scenario, {other[1].source} is not)")
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    loaded: list[tuple[Family, Any]] = []
    try:
        for path in args.files:  # validate everything first
            size = Path(path).stat().st_size if Path(path).is_file() else 0
            size = size if size <= MAX_FILE_BYTES else 0  # (refused at once, unannounced)
            if size >= ANNOUNCE_BYTES:
                print(f"replemu: reading {path} ({size / 1e6:,.1f} MB)", file=sys.stderr, flush=True)
            loaded.append(load_family_scenario(path))
            if size >= ANNOUNCE_BYTES:
                print(f"replemu: {path}: {len(loaded[-1][1].steps):,} steps", file=sys.stderr, flush=True)
    except ScenarioError as exc:
        return fail(f"replemu: invalid scenario: {exc}")
    for f, s in loaded:
        problem = _length_problem(s, args, f)
        if problem:
            return fail(f"replemu: error: {problem}")
    problem = _mixed(loaded)
    if problem:
        return fail(f"replemu: error: {problem}")
    family, scenarios = loaded[0][0], [s for _, s in loaded]
    initial: list = [None] * len(scenarios)  # seeders of replica files, read once, checked against the replicas
    if family.replica_dirs and (args.from_dirs or any(family.initial_state(s) for s in scenarios)):
        from scenario_io.kafka_logs import seeder_for

        try:
            for i, s in enumerate(scenarios):
                try:
                    initial[i] = seeder_for(family.initial_state(s), args.from_dirs)
                    if initial[i]:
                        family.check_prepare(s, initial[i])  # checks the broker ids
                except ScenarioError:
                    raise
                except ValueError as exc:  # ReplicaDirError
                    return fail(f"replemu: invalid initial state of {s.source}: {exc}")
        except ScenarioError as exc:
            return fail(f"replemu: invalid scenario: {exc}")
    other = None if args.protocol == "all" else family_of_protocol(args.protocol)
    if other is not None and other is not family:
        return fail(f"replemu: error: --protocol {args.protocol} is a {other.title} protocol; {scenarios[0].source} is a "
                    f"{family.title} scenario (protocols: {', '.join(family.variant_names())}, all)")
    foreign = foreign_knob(args, family)
    if foreign:
        return fail(f"replemu: error: --knob {foreign[0]} is a {foreign[1].title} knob; {scenarios[0].source} is a "
                    f"{family.title} scenario{family.knobs_hint}")
    if args.from_dirs and not family.replica_dirs:
        return fail(f"replemu: error: --from-dirs reads partition replicas; a {family.title} scenario starts empty")
    protocols = list(family.variant_names()) if args.protocol == "all" else [args.protocol]
    knobs = family_knobs(args, family)
    table = not args.json and not args.summary

    # A step one variant cannot take (a ZooKeeper-era forced election under KRaft) is that
    # variant's answer, "not expressible", beside the others' verdicts; only a run where no
    # (file, variant) could be replayed at all is refused as a whole (exit 2).
    def runs():
        for scenario, files in zip(scenarios, initial):
            for protocol in protocols:
                wants_trace = args.check and "at_step" in (scenario.expect.get(protocol) or {})
                yield scenario, protocol, family.run(
                    scenario, protocol, trace=args.trace or wants_trace or table, prepare=files, knobs=knobs,
                    refusal_as_result=True, trace_logs=args.trace or wants_trace, progress=_progress(scenario.source, protocol))
    return _report(runs(), protocols, len(scenarios), args, family)


def _report(runs, protocols: list[str], scenarios: int, args: argparse.Namespace, family: Family) -> int:
    """Every (scenario, variant) result in order, each shown as it comes (its human output, its
    ``--check`` lines; its step-by-step trace dropped once shown): the exit status.  Nothing
    replayable at all (every result "not expressible") is a refusal, in the family's words
    (``refusal_words``); so "not expressible" results are held back until a result with a verdict
    comes, and then shown in their place."""
    results, failures, held = [], [], []

    def show(scenario, protocol: str, result: dict) -> None:
        if not args.json:
            _print_human(scenario, result, args.summary, family)
        if args.check and not _agrees(scenario, protocol, _problems(result, scenario.expect.get(protocol), family), args):
            failures.append((scenario.name, protocol))
        if not args.trace:
            result.pop("trace", None)
        results.append(result)

    for run in runs:
        if not results and "not_expressible" in run[2]:
            held.append(run)
            continue
        for earlier in held:
            show(*earlier)
        held.clear()
        show(*run)
    if not results:
        scenario, protocol, result = held[0]
        n = result["not_expressible"]
        return fail(f"replemu: refused scenario: {scenario.source}: step {n['step']} ({n['description']}): "
                    f"{family.refusal_words(protocol)}: {n['reason']}")
    return _finish(results, protocols, scenarios, failures, args)


def _problems(result: dict, expect: dict | None, family: Family) -> list[str]:
    """``--check``'s disagreements for one result: a variant the expect block names that could not
    replay the file disagrees with it; one it does not name has no expectation to meet."""
    if "not_expressible" in result:
        return [] if expect is None else [not_expressible_text(result)]
    return family.check_expectation(result, expect)


def _agrees(scenario, protocol: str, problems: list[str], args: argparse.Namespace) -> bool:
    """``--check``'s lines for one (scenario, protocol); False when it disagrees with its expect block."""
    expect = scenario.expect.get(protocol)
    status = "no expectation" if expect is None else ("agrees" if not problems else "DISAGREES")
    print(f"check {scenario.source} --protocol {protocol}: {status}", file=sys.stderr if args.json else sys.stdout)
    for p in problems:
        print(f"  - {p}", file=sys.stderr if args.json else sys.stdout)
    return not problems


def _finish(results: list[dict], protocols: list[str], scenarios: int, failures: list, args: argparse.Namespace) -> int:
    """The JSON, or the scenario x protocol matrix when there was more than one of either; the exit status."""
    if args.json:
        print(dumps(results[0] if len(results) == 1 else results))
    elif len(protocols) > 1 or scenarios > 1:
        print()
        print(report.matrix([{"losses": [], **r} for r in results], protocols))
    return EXIT_CHECK_FAILED if failures else EXIT_OK


def _print_human(scenario, result, summary: bool, family: Family) -> None:
    if "not_expressible" in result:  # no steps, logs or verdict to show: the step and why
        print(f"verdict {result['scenario']} / {result['protocol']}: {not_expressible_text(result)}")
        if not summary:
            print()
        return
    if not summary:
        print(f"== {scenario.name} under {result['protocol']} ({scenario.source}) ==")
        if scenario.description:
            print(scenario.description)
        print()
        print(family.step_table(result))
        print()
        print(family.final_logs(result))
        print()
    print(family.verdict(result))
    if not summary:
        print()


def cmd_export(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from emulator.result import ResultFormatError, check_result_document
    from scenario_io.kafka_logs import export_result

    if Path(args.result).is_dir():
        hint = (f"; a stream's output: replemu results {args.result} --json > results.json, then export that"
                if (Path(args.result) / "run.json").is_file() else "")
        return fail(f"replemu: error: {args.result}: a directory, not the JSON of replemu run --json{hint}")
    try:
        data = json.loads(open(args.result, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        return fail(f"replemu: error: {args.result}: not a readable result JSON file ({exc})")
    try:
        results = check_result_document(data, args.result)
    except ResultFormatError as exc:
        return fail(f"replemu: error: {exc}")
    if all("not_expressible" in r for r in results):  # nothing to write: a refusal, as replemu run's
        named = "; ".join(f"{r['scenario']}: {not_expressible_text(r)}" for r in results[:2])
        more = f"; and {len(results) - 2} more" if len(results) > 2 else ""
        return fail(f"replemu: error: {args.result}: nothing to export, no result has replicas ({named}{more})")

    problem = output_problem(args.to, "--to")
    if problem:
        return fail(f"replemu: error: {problem}")
    for r in results:
        if "not_expressible" in r:  # no replicas to write: the variant could not replay the file
            print(f"skipped {r['scenario']} under {r['protocol']}: {not_expressible_text(r)}")
            continue
        target = Path(args.to) if len(results) == 1 else Path(args.to) / f"{r['scenario']}-{r['protocol']}"
        for d in export_result(r, target):
            print(f"wrote {d}")
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    """Every replica as Kafka's log recovery would load it, its findings under it, then where
    the replicas diverge.  Findings are results (exit 0); a path that is not a readable replica
    directory is an error (exit 2, one line)."""
    from scenario_io.kafka_logs import (
        HW_CHECKPOINT,
        LEADER_EPOCH_CHECKPOINT,
        ReplicaDirError,
        divergence,
        find_replica_dirs,
        read_replica_dir,
        truncation_outcomes,
    )

    try:
        reps = [read_replica_dir(d, recover=True) for root in args.dirs for d in find_replica_dirs(root)]
    except ReplicaDirError as exc:
        return fail(f"replemu: error: {exc}")
    for r in reps:
        if LEADER_EPOCH_CHECKPOINT in r.unreadable:
            epochs = "unreadable (empty)"
        else:
            epochs = " ".join(f"({e},{s})" for e, s in r.epoch_cache) or "[]"
        hw = f"HW unreadable ({r.hw})" if HW_CHECKPOINT in r.unreadable else f"HW {r.hw}"
        rp = f", recovery point {r.recovery_point}" if r.recovery_point is not None else ""
        n = len(r.findings)
        state = "no findings" if not n else f"{n} finding{'s' if n > 1 else ''}"
        print(f"broker {r.broker} {r.topic}-{r.partition} ({r.path}): LEO {r.leo}, {hw}{rp}, epochs {epochs}, "
              f"{len(r.batches)} valid batch{'es' if len(r.batches) != 1 else ''}, {state}")
        for f in r.findings:
            print(f"  finding: {f}")
    for i, a in enumerate(reps):
        for b in reps[i + 1:]:
            d = divergence(a, b)
            where = (f"diverge at offset {d['offset']}: broker {a.broker} has epoch {d['epochs'][0]} ({d['values'][0]!r}), "
                     f"broker {b.broker} epoch {d['epochs'][1]} ({d['values'][1]!r})") if d else "agree on their common prefix"
            print(f"brokers {a.broker} and {b.broker} {where}")
            if a.broker == b.broker:
                print(f"  no truncation outcomes: both directories are broker {a.broker}'s")
                continue
            for leader, follower in ((a, b), (b, a)):
                try:
                    outcome = truncation_outcomes(leader, follower)
                except ReplicaDirError as exc:
                    print(f"  if {leader.broker} leads: no truncation outcomes ({exc})")
                    continue
                told = ", ".join(f"{v}: {'keeps' if n == follower.leo else 'truncates to'} {n}" for v, n in outcome.items())
                print(f"  if {leader.broker} leads, follower {follower.broker} (LEO {follower.leo}) -> {told}")
    return EXIT_OK


def cmd_steps(args: argparse.Namespace) -> int:
    from emulator.quorum.steps import all_steps_markdown

    print(all_steps_markdown(), end="")
    return EXIT_OK
