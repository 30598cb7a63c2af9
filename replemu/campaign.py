"""Fault-injection campaigns over many generated partitions, and counterexample shrinking.

``run_campaign`` generates one scenario per partition from a root seed and a profile
(``emulator.workload``), replays each under every requested variant (the core in this process;
``streaming.batch_replay`` runs the same on Spark), counts the violated invariants and writes the
first findings as contract scenario files that ``replemu run`` replays to the same violation.

``shrink`` minimises a failing scenario: delta debugging over its steps (ddmin, then single-step
removal to a fixpoint), then step-argument simplification, keeping the named invariant broken
under the given variant.

``cmd_campaign`` and ``cmd_shrink`` are the commands ``replemu campaign`` and ``replemu shrink``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from emulator import VARIANT_NAMES, dumps
from emulator.invariants import INVARIANT_NAMES, VERDICT_INVARIANTS
from emulator.run import run_scenario
from emulator.scenario import Scenario, ScenarioError, parse_scenario
from emulator.steps import parse_step, step_to_dict
from emulator.workload import Profile, generate_partition, generate_scenario
from scenario_io.kafka_logs import seeder_for
from scenario_io.profiles import load_profiles
from scenario_io.yaml_files import load_scenario, scenario_document, write_scenario

from .cli_common import EXIT_OK, fail, output_problem

MAX_EXAMPLES = 3


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal, or when forced)."""

    def __init__(self, total: int, label: str, enabled: bool | None = None, out=sys.stderr) -> None:
        self.total, self.label, self.out = max(total, 1), label, out
        self.enabled = out.isatty() if enabled is None else enabled
        self.done = 0

    def step(self, n: int = 1) -> None:
        self.done += n
        if self.enabled and (self.done == self.total or self.done % max(1, self.total // 100) == 0):
            width = 30
            filled = width * self.done // self.total
            self.out.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}")
            if self.done >= self.total:
                self.out.write("\n")
            self.out.flush()


def describe_campaign(seed: int, profile: Profile, partitions: int, protocols: list[str], engine: str,
                      knobs: dict[str, Any] | None = None) -> list[str]:
    """Every parameter the campaign draws from, printed before it runs."""
    rates = ", ".join(f"{k}={v:g}" for k, v in profile.rates.items())
    return [f"  knobs {', '.join(f'{k}={v}' for k, v in sorted(knobs.items()))} (over each preset)"] * bool(knobs) + [
        f"campaign seed {seed}  profile {profile.name} ({profile.description})",
        f"  partitions {partitions}  protocols {','.join(protocols)}  engine {engine}",
        f"  per partition k: streams replemu/{seed}/k/workload, /faults, /scheduling",
        f"  replicas {profile.replicas[0]}-{profile.replicas[1]}  steps {profile.steps[0]}-{profile.steps[1]}  "
        f"min.isr {list(profile.min_insync_replicas)}  acks {list(profile.acks)}  unclean {profile.unclean:g}  "
        f"explicit hw checkpoint {profile.explicit_hw_checkpoint:g}  explicit flush {profile.explicit_log_flush:g}",
        f"  rates {rates}",
    ]


def tally(results: Iterable[tuple[int, dict]], protocol: str, scenario_of: Callable[[int], dict], out_dir: Path,
          seed: int, profile: str) -> dict[str, Any]:
    """Count violations over ``(partition, result)`` pairs; write the first findings as scenarios."""
    partitions = steps = not_expressible = 0
    violations: dict[str, int] = {}
    first: dict[str, tuple[int, int]] = {}  # invariant -> (partition, step) of its first finding
    for k, result in results:
        partitions += 1
        if "not_expressible" in result:  # a step this variant's controller cannot take: no verdict to count
            not_expressible += 1
            continue
        steps += result["steps"]
        for v in result["violations"]:
            violations[v["invariant"]] = violations.get(v["invariant"], 0) + 1
            first.setdefault(v["invariant"], (k, v["step"]))
    # The verdict invariants (LOSS, SISR, DIV) first, then the others, one example each.
    chosen = sorted(first.items(), key=lambda kv: (kv[0] not in VERDICT_INVARIANTS, VERDICT_INVARIANTS.index(kv[0])
                                                     if kv[0] in VERDICT_INVARIANTS else 0, kv[1][0]))[:MAX_EXAMPLES]
    examples = []
    for invariant, (k, step) in chosen:
        path = write_scenario(scenario_of(k), out_dir / f"campaign-{seed}-{profile}-p{k}.yaml")
        examples.append({"partition": k, "invariant": invariant, "step": step, "scenario_file": str(path)})
    ordered = dict(sorted(violations.items(), key=lambda kv: (-kv[1], kv[0])))
    tallied = {"partitions": partitions, "steps": steps, "violations": ordered, "examples": examples}
    if not_expressible:  # only then: the report's shape is unchanged for every campaign that has none
        tallied["not_expressible"] = not_expressible
    return tallied


def run_campaign(seed: int, profile_name: str, partitions: int, protocols: list[str], out_dir: str | Path,
                 engine: str = "local", progress: bool | None = None, profiles_path: str | Path | None = None,
                 spark=None, knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``knobs`` go into every generated partition's ``config.knobs``, so the example files
    written for findings replay with the same knobs."""
    profiles = load_profiles(profiles_path) if profiles_path else load_profiles()
    if profile_name not in profiles:
        raise KeyError(f"unknown profile {profile_name!r} (known: {', '.join(profiles)})")
    profile = profiles[profile_name]
    out = Path(out_dir)
    bar = Progress(partitions, "generating", enabled=progress)
    scenarios_data = []
    for k in range(partitions):
        doc = generate_partition(seed, k, profile)
        if knobs:
            doc["config"]["knobs"] = {name: value for name, value in sorted(knobs.items())}
        scenarios_data.append(doc)
        bar.step()
    report: dict[str, Any] = {"seed": seed, "profile": profile_name, "protocols": {}}
    if knobs:
        report["knobs"] = dict(sorted(knobs.items()))
    if engine == "spark":
        from streaming.batch_replay import stream_scenarios

        per_protocol = stream_scenarios(scenarios_data, protocols, out / "stream", spark=spark, progress=progress)
        for protocol in protocols:
            report["protocols"][protocol] = tally(per_protocol[protocol], protocol, scenarios_data.__getitem__, out,
                                                  seed, profile_name)
        return report
    scenarios = [parse_scenario(d, source=f"campaign {seed}/{profile_name}/{k}") for k, d in enumerate(scenarios_data)]
    for protocol in protocols:
        bar = Progress(partitions, f"{protocol:7}", enabled=progress)

        def results(protocol=protocol, bar=bar):
            for k, s in enumerate(scenarios):
                r = run_scenario(s, protocol, refusal_as_result=True)
                bar.step()
                yield k, r

        report["protocols"][protocol] = tally(results(), protocol, scenarios_data.__getitem__, out, seed, profile_name)
    return report


# -- shrinking ------------------------------------------------------------------------------

def breaks(scenario: Scenario, protocol: str, invariant: str, prepare=None) -> bool:
    return any(v["invariant"] == invariant for v in run_scenario(scenario, protocol, prepare=prepare)["violations"])


def ddmin(items: list, test: Callable[[list], bool]) -> list:
    """Zeller's delta debugging: a 1-minimal sublist for which ``test`` still holds."""
    n = 2
    while len(items) >= 2:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for i, chunk in enumerate(chunks):
            if test(chunk):
                items, n = chunk, 2
                break
            complement = [x for j, c in enumerate(chunks) if j != i for x in c]
            if test(complement):
                items, n = complement, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    return items


def _simplifications(step) -> list:
    d = step_to_dict(step)
    (kind, args), = d.items()
    out = []
    for key in ("to", "max_records", "acks", "unclean", "epoch"):
        if key in args:
            out.append({kind: {k: v for k, v in args.items() if k != key}})
    if args.get("response") == "lost":
        out.append({kind: {**args, "response": "delivered"}})
    if args.get("mode") == "power":
        out.append({kind: {**args, "mode": "process"}})
    if "values" in args:
        out.append({kind: {**{k: v for k, v in args.items() if k != "values"}, "value": args["values"][0]}})
    return out


def reduce_to_fixpoint(steps: list, test: Callable[[list], bool], simpler: Callable[[Any], Iterable[Any]]) -> list:
    """After ddmin: remove single steps and replace a step by a simpler one (``simpler(step)``,
    each a parsed step, tried lazily in order) while ``test`` still holds, until neither helps.
    An empty candidate is never tried."""
    changed = True
    while changed:
        changed = False
        for i in range(len(steps)):
            candidate = steps[:i] + steps[i + 1:]
            if candidate and test(candidate):
                steps, changed = candidate, True
                break
        if changed:
            continue
        for i, step in enumerate(steps):
            for simpler_step in simpler(step):
                candidate = steps[:i] + [simpler_step] + steps[i + 1:]
                if test(candidate):
                    steps, changed = candidate, True
                    break
            if changed:
                break
    return steps


def shrink(scenario: Scenario, protocol: str, invariant: str, log: Callable[[str], None] = lambda _: None) -> Scenario:
    """The smallest scenario found that still breaks ``invariant`` under ``protocol``."""
    prepare = seeder_for(scenario.initial_state)  # replica directories are read once
    if not breaks(scenario, protocol, invariant, prepare):
        raise ValueError(f"{scenario.name} does not break {invariant} under {protocol}")
    test = lambda steps: breaks(replace(scenario, steps=tuple(steps)), protocol, invariant, prepare)  # noqa: E731
    steps = ddmin(list(scenario.steps), test)
    log(f"ddmin: {len(scenario.steps)} -> {len(steps)} steps")
    steps = reduce_to_fixpoint(steps, test, lambda step: (parse_step(kind, args, scenario.broker_ids)
                                                          for simpler in _simplifications(step)
                                                          for kind, args in simpler.items()))
    log(f"simplified: {len(steps)} steps")
    return replace(scenario, steps=tuple(steps))


# -- shrinking a metadata-quorum scenario (docs/quorum.md "Campaigns and shrinking") ------------------

def quorum_breaks(scenario, protocol: str, invariant: str) -> bool:
    """Whether ``scenario`` breaks ``invariant`` under the quorum preset ``protocol``; a step the
    protocol cannot take (``StepRefused``) makes a candidate fail, so shrinking keeps only steps
    the protocol takes."""
    from emulator.quorum_run import run_quorum_scenario
    from emulator.scenario import StepRefused

    try:
        result = run_quorum_scenario(scenario, protocol)
    except StepRefused:
        return False
    return any(v["invariant"] == invariant for v in result["violations"])


def _quorum_simplifications(step) -> list:
    """Simpler forms of a quorum step: each optional argument dropped (a fetch to the known leader,
    no record limit, the admin request to the leader, a process crash instead of a power loss)."""
    from emulator.quorum_steps import QUORUM_STEP_TABLE, quorum_step_to_dict

    (kind, args), = quorum_step_to_dict(step).items()
    optional = [a.name for a in QUORUM_STEP_TABLE[step.kind].args if not a.required]
    return [{kind: {k: v for k, v in args.items() if k != key}} for key in optional if key in args]


def shrink_quorum(scenario, protocol: str, invariant: str, log: Callable[[str], None] = lambda _: None):
    """The smallest quorum scenario found that still breaks ``invariant`` under ``protocol``: ddmin
    over the steps, then single-step removal and argument simplification to a fixpoint (as
    ``shrink``), every candidate replayed from the start and refused candidates dropped."""
    from emulator.quorum_steps import parse_quorum_step

    if not quorum_breaks(scenario, protocol, invariant):
        raise ValueError(f"{scenario.source} does not break {invariant} under {protocol}")
    test = lambda steps: bool(steps) and quorum_breaks(replace(scenario, steps=tuple(steps)), protocol, invariant)  # noqa: E731
    steps = ddmin(list(scenario.steps), test)
    log(f"ddmin: {len(scenario.steps)} -> {len(steps)} steps")
    steps = reduce_to_fixpoint(steps, test, lambda step: (parse_quorum_step(kind, args, scenario.servers)
                                                          for simpler in _quorum_simplifications(step)
                                                          for kind, args in simpler.items()))
    log(f"simplified: {len(steps)} steps")
    return replace(scenario, steps=tuple(steps))


def _shrunk_file(args: argparse.Namespace) -> Path:
    """Where ``replemu shrink FILE`` writes without --out: next to FILE, or in the current directory
    when FILE was a bundled scenario's name (the package's own directory is no place for it)."""
    name = f"{Path(args.file).stem}-shrunk.yaml"
    return Path(name) if args.file in getattr(args, "scenario_names", {}) else Path(args.file).with_name(name)


def _cmd_shrink_quorum(args: argparse.Namespace, scenario) -> int:
    """``replemu shrink FILE --protocol kraft853 --invariant NAME [--knob ...]`` of a quorum scenario."""
    from emulator.quorum_invariants import QUORUM_INVARIANT_NAMES
    from emulator.quorum_run import quorum_scenario_document, run_quorum_scenario
    from emulator.quorum_variants import QUORUM_VARIANT_NAMES

    if args.protocol not in QUORUM_VARIANT_NAMES:
        return fail(f"replemu: error: {scenario.source} is a metadata-quorum scenario; --protocol {args.protocol} is a "
                    f"partition protocol (quorum protocols: {', '.join(QUORUM_VARIANT_NAMES)})")
    if args.invariant not in QUORUM_INVARIANT_NAMES:
        return fail(f"replemu: error: unknown quorum invariant {args.invariant!r} (known: {', '.join(QUORUM_INVARIANT_NAMES)})")
    if args.knobs:
        return fail(f"replemu: error: --knob {next(iter(args.knobs))} is a partition knob; {scenario.source} is a "
                    "metadata-quorum scenario (its knobs: docs/quorum.md)")
    target = Path(args.out or _shrunk_file(args))
    if args.quorum_knobs:  # the shrunk file carries them, so it replays with plain `replemu run --check`
        scenario = replace(scenario, knobs={**scenario.knobs, **args.quorum_knobs})
    try:
        small = shrink_quorum(scenario, args.protocol, args.invariant, log=lambda m: print(m, file=sys.stderr))
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    found = sorted({v["invariant"] for v in run_quorum_scenario(small, args.protocol)["violations"]})
    doc = quorum_scenario_document(
        small, f"{args.invariant} under {args.protocol}, shrunk from {scenario.source} ({len(scenario.steps)} steps)",
        expect={args.protocol: {"violations": found}})
    doc["name"] = f"{scenario.name}-shrunk"
    write_scenario(doc, target)
    print(f"{len(scenario.steps)} -> {len(small.steps)} steps; wrote {target}; replay: replemu run {target} --protocol {args.protocol}")
    return EXIT_OK


# -- campaigns of the metadata quorum (docs/quorum.md "Campaigns and shrinking") ----------------------

QUORUM_PROFILE = "quorum"  # the one walk a quorum campaign draws from (emulator.quorum_workload)


def run_quorum_campaign(seed: int, partitions: int, protocols: list[str], out_dir: str | Path,
                        knobs: dict[str, Any] | None = None, progress: bool | None = None) -> dict[str, Any]:
    """``partitions`` seeded random quorum scenarios per preset, each judged by ``QuorumChecker``
    (``run_quorum_scenario``); the report has the partition campaign's shape and its first findings
    are written as quorum scenario files (with the knobs) that ``replemu run`` replays to them."""
    from emulator.quorum_run import parse_quorum_scenario, run_quorum_scenario
    from emulator.quorum_workload import generate_quorum_scenario

    out = Path(out_dir)
    report: dict[str, Any] = {"seed": seed, "profile": QUORUM_PROFILE, "protocols": {}}
    if knobs:
        report["knobs"] = dict(sorted(knobs.items()))
    for protocol in protocols:
        bar = Progress(partitions, f"{protocol:9}", enabled=progress)
        docs: dict[int, dict] = {}

        def results(protocol=protocol, bar=bar, docs=docs):
            for k in range(partitions):
                doc = generate_quorum_scenario(seed, k, protocol, knobs)
                docs[k] = doc
                scenario = parse_quorum_scenario(doc, source=f"quorum campaign {seed}/{protocol}/{k}")
                bar.step()
                yield k, run_quorum_scenario(scenario, protocol)

        r = tally(results(), protocol, docs.__getitem__, out, seed, f"{QUORUM_PROFILE}-{protocol}")
        report["protocols"][protocol] = r
    return report


def _cmd_campaign_quorum(args: argparse.Namespace, protocols: list[str]) -> int:
    if args.profile != QUORUM_PROFILE:
        return fail(f"replemu: error: --protocol {args.protocol} is a metadata-quorum protocol: its campaign draws from "
                    f"--profile {QUORUM_PROFILE} (the partition profiles do not apply), got {args.profile[:80]!r}")
    if args.knobs:
        return fail(f"replemu: error: --knob {next(iter(args.knobs))} is a partition knob; --protocol {args.protocol} is a "
                    "metadata-quorum protocol (its knobs: docs/quorum.md)")
    knobs = getattr(args, "quorum_knobs", None) or {}
    header = [f"  knobs {', '.join(f'{k}={v}' for k, v in sorted(knobs.items()))} (over each preset)"] * bool(knobs) + [
        f"campaign seed {args.seed}  profile {QUORUM_PROFILE} (random walks over the quorum's steps)",
        f"  scenarios {args.partitions}  protocols {','.join(protocols)}  engine local (the quorum core in this process)",
        f"  per scenario k: stream replemu-quorum/{args.seed}/k (voters, length, every step); refused steps drawn again",
    ]
    print("\n".join(header), file=sys.stderr if args.json else sys.stdout, flush=True)
    report = run_quorum_campaign(args.seed, args.partitions, protocols, args.out, knobs=knobs)
    return _print_report(report, args.json, "scenario")


def cmd_campaign(args: argparse.Namespace) -> int:
    from emulator.quorum_variants import QUORUM_VARIANT_NAMES

    from .cli_common import DEFAULT_PROFILE

    if args.profile is None:
        args.profile = QUORUM_PROFILE if args.protocol in QUORUM_VARIANT_NAMES else DEFAULT_PROFILE
    if args.protocol in QUORUM_VARIANT_NAMES:
        problem = output_problem(args.out, "--out")
        if problem:
            return fail(f"replemu: error: {problem}")
        return _cmd_campaign_quorum(args, [args.protocol])
    if getattr(args, "quorum_knobs", None):
        return fail(f"replemu: error: --knob {next(iter(args.quorum_knobs))} is a metadata-quorum knob; "
                    f"--protocol {args.protocol} is a partition protocol")
    profiles = load_profiles()
    if args.profile not in profiles:
        return fail(f"replemu: error: unknown profile {args.profile[:80]!r} (known: {', '.join(profiles)})")
    problem = output_problem(args.out, "--out")
    if problem:
        return fail(f"replemu: error: {problem}")
    protocols = list(VARIANT_NAMES) if args.protocol == "all" else [args.protocol]
    header = describe_campaign(args.seed, profiles[args.profile], args.partitions, protocols, args.engine, args.knobs)
    print("\n".join(header), file=sys.stderr if args.json else sys.stdout, flush=True)
    report = run_campaign(args.seed, args.profile, args.partitions, protocols, args.out, engine=args.engine, knobs=args.knobs)
    return _print_report(report, args.json, "partition")


def _print_report(report: dict[str, Any], as_json: bool, unit: str) -> int:
    """A campaign's report: its JSON, or per protocol the counts and how to replay each example
    (``unit``: what a generated case is called, partition or scenario)."""
    if as_json:
        print(dumps(report))
        return EXIT_OK
    width = max((len(p) for p in report["protocols"]), default=0)
    for protocol, r in report["protocols"].items():
        found = ", ".join(f"{k} {v}" for k, v in r["violations"].items()) or "no invariant violated"
        refused = f" ({r['not_expressible']} not expressible under {protocol}: no verdict)" if r.get("not_expressible") else ""
        print(f"{protocol:{width}} {r['partitions']} {unit}s{refused}, {r['steps']} steps: {found}")
        for e in r["examples"]:
            print(f"{'':{width + 2}}{e['invariant']} at step {e['step']} of {unit} {e['partition']}: "
                  f"replemu run {e['scenario_file']} --protocol {protocol}")
    return EXIT_OK


def cmd_shrink(args: argparse.Namespace) -> int:
    from emulator.quorum_run import QuorumScenario
    from emulator.quorum_variants import QUORUM_VARIANT_NAMES
    from scenario_io.yaml_files import load_any_scenario

    if args.file is not None and args.from_campaign is None:
        problem = output_problem(args.out, "--out", file=True) if args.out else None
        if problem:
            return fail(f"replemu: error: {problem}")
        try:
            loaded = load_any_scenario(args.file)
        except ScenarioError as exc:
            return fail(f"replemu: invalid scenario: {exc}")
        if isinstance(loaded, QuorumScenario):
            return _cmd_shrink_quorum(args, loaded)
    if args.protocol in QUORUM_VARIANT_NAMES:
        return fail(f"replemu: error: --protocol {args.protocol} is a metadata-quorum protocol; shrink it with a quorum "
                    "scenario FILE (a file that names voters)")
    if getattr(args, "quorum_knobs", None):
        return fail(f"replemu: error: --knob {next(iter(args.quorum_knobs))} is a metadata-quorum knob; give a quorum scenario FILE")
    if args.invariant not in INVARIANT_NAMES:
        return fail(f"replemu: error: unknown invariant {args.invariant!r} (known: {', '.join(INVARIANT_NAMES)})")
    if (args.file is None) == (args.from_campaign is None):
        return fail("replemu: error: give a scenario FILE or --from-campaign SEED/PROFILE/PARTITION")
    problem = output_problem(args.out, "--out", file=True) if args.out else None
    if problem:
        return fail(f"replemu: error: {problem}")
    try:
        if args.file:
            scenario = load_scenario(args.file)
            target = Path(args.out or _shrunk_file(args))
        else:
            seed, profile, partition = args.from_campaign.split("/")
            scenario = generate_scenario(int(seed), int(partition), load_profiles()[profile])
            target = Path(args.out or f"out/shrunk/campaign-{seed}-{profile}-p{partition}-{args.protocol}-{args.invariant}.yaml")
    except ScenarioError as exc:
        return fail(f"replemu: invalid scenario: {exc}")
    except (ValueError, KeyError) as exc:
        return fail(f"replemu: error: --from-campaign wants SEED/PROFILE/PARTITION: {exc}")
    if args.knobs:  # the shrunk file carries them, so it replays with plain `replemu run --check`
        scenario = replace(scenario, config=replace(scenario.config, knobs=tuple(sorted({**dict(scenario.config.knobs), **args.knobs}.items()))))
    try:
        small = shrink(scenario, args.protocol, args.invariant, log=lambda m: print(m, file=sys.stderr))
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    # The expectation lists everything the shrunk scenario breaks (``--check`` is exact over the
    # verdict invariants, which may break alongside the one asked for).
    found = [v["invariant"] for v in run_scenario(small, args.protocol, prepare=seeder_for(small.initial_state))["violations"]]
    doc = scenario_document(
        small, f"{args.invariant} under {args.protocol}, shrunk from {scenario.source} ({len(scenario.steps)} steps)",
        expect={args.protocol: {"violations": found}},
    )
    doc["name"] = f"{scenario.name}-shrunk"
    write_scenario(doc, target)
    print(f"{len(scenario.steps)} -> {len(small.steps)} steps; wrote {target}; replay: replemu run {target} --protocol {args.protocol}")
    return EXIT_OK
