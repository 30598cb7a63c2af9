"""Fault-injection campaigns over many generated scenarios, and counterexample shrinking: one
campaign and one shrinker for every protocol family (``emulator.family.Family``).

``run_campaign`` generates one case per number ``k`` from a root seed and a profile (the family's
``generate_case``: ``emulator.workload``'s partitions from the profiles of conf/workloads.yaml, or
the metadata quorum's random walks, drawn under each preset), replays each under every requested
preset (the core in this process; ``streaming.batch_replay`` runs the partition family's on Spark),
counts the violated invariants and writes the first findings as scenario files that ``replemu run``
replays to the same violation.

``Shrinker`` minimises a failing scenario, shaped as Hypothesis's one shrinker with small per-type
parts: the machinery (delta debugging over the steps, then single-step removal and step
simplification to a fixpoint, every candidate replayed from the start) is shared; the family
supplies a candidate scenario with other steps (``with_steps``), a step's simpler forms
(``simpler_steps``), the run that judges it and the document of the result.

``cmd_campaign`` and ``cmd_shrink`` are the commands ``replemu campaign`` and ``replemu shrink``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from emulator import dumps
from emulator.families import Family, family_of_protocol, family_of_scenario
from emulator.invariants import VERDICT_INVARIANTS
from emulator.partition_family import PARTITION
from emulator.scenario import ScenarioError, StepRefused
from scenario_io.kafka_logs import seeder_for
from scenario_io.profiles import load_profiles
from scenario_io.yaml_files import load_family_scenario, write_scenario

from .cli_common import EXIT_OK, fail, output_problem
from .replay import family_knobs, foreign_knob

# The family of ``replemu campaign --protocol all`` (all its presets) and the one whose campaigns
# draw from the workload profiles of conf/workloads.yaml.
DEFAULT_FAMILY: Family = PARTITION

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


def campaign_profiles(family: Family, path: str | Path | None = None) -> dict[str, Any]:
    """The profiles a campaign of ``family`` may draw from, by name: its own walk
    (``campaign_walk``), or the workload profiles of ``path`` (default: conf/workloads.yaml)."""
    if family.campaign_walk:
        return {family.campaign_walk: family.campaign_walk}
    return load_profiles(path) if path else load_profiles()


def _profile_problem(family: Family, name: str, protocol: str, profiles: dict[str, Any]) -> str | None:
    """Why ``--profile name`` cannot be a campaign's of ``family``; None when it can."""
    if name in profiles:
        return None
    if family.campaign_walk:
        return (f"--protocol {protocol} is a {family.title} protocol: its campaign draws from --profile "
                f"{family.campaign_walk} (the {DEFAULT_FAMILY.name} profiles do not apply), got {name[:80]!r}")
    return f"unknown profile {name[:80]!r} (known: {', '.join(profiles)})"


def run_campaign(seed: int, profile_name: str, partitions: int, protocols: list[str], out_dir: str | Path,
                 engine: str = "local", progress: bool | None = None, profiles_path: str | Path | None = None,
                 spark=None, knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``partitions`` cases of campaign ``seed`` drawn from the profile ``profile_name`` of the
    family of ``protocols``, each replayed under every one of them; the report (``--json``).
    ``knobs`` go into every generated case, so the example files written for findings replay
    with the same knobs.  A family whose cases are drawn under each preset (``cases_per_protocol``)
    names its example files ``campaign-SEED-PROFILE-PROTOCOL-pK.yaml``; such a family's campaign
    runs in this process whatever ``engine`` says."""
    family = (family_of_protocol(protocols[0]) if protocols else None) or DEFAULT_FAMILY
    profiles = campaign_profiles(family, profiles_path)
    if profile_name not in profiles:
        raise KeyError(f"unknown profile {profile_name!r} (known: {', '.join(profiles)})")
    profile = profiles[profile_name]
    out = Path(out_dir)
    report: dict[str, Any] = {"seed": seed, "profile": profile_name, "protocols": {}}
    if knobs:
        report["knobs"] = dict(sorted(knobs.items()))
    shared: list[dict] = []  # the cases every preset replays (a family that draws them once)
    if not family.cases_per_protocol:
        bar = Progress(partitions, "generating", enabled=progress)
        for k in range(partitions):
            shared.append(family.generate_case(seed, k, profile, None, knobs))
            bar.step()
        if engine == "spark" and "spark" in family.campaign_engines():
            from streaming.batch_replay import stream_scenarios

            per_protocol = stream_scenarios(shared, protocols, out / "stream", spark=spark, progress=progress)
            for protocol in protocols:
                report["protocols"][protocol] = tally(per_protocol[protocol], protocol, shared.__getitem__, out,
                                                      seed, profile_name)
            return report
    scenarios = [family.parse_scenario(d, source=f"campaign {seed}/{profile_name}/{k}") for k, d in enumerate(shared)]
    width = max(len(p) for p in family.variant_names()) + 1
    for protocol in protocols:
        bar = Progress(partitions, f"{protocol:{width}}", enabled=progress)
        name = f"{profile_name}-{protocol}" if family.cases_per_protocol else profile_name
        cases: dict[int, dict] = {}

        def results(protocol=protocol, bar=bar, name=name, cases=cases):
            for k in range(partitions):
                if family.cases_per_protocol:
                    cases[k] = family.generate_case(seed, k, profile, protocol, knobs)
                    scenario = family.parse_scenario(cases[k], source=f"campaign {seed}/{name}/{k}")
                else:
                    scenario = scenarios[k]
                r = family.run(scenario, protocol, refusal_as_result=True)
                bar.step()
                yield k, r

        scenario_of = cases.__getitem__ if family.cases_per_protocol else shared.__getitem__
        report["protocols"][protocol] = tally(results(), protocol, scenario_of, out, seed, name)
    return report


# -- shrinking ------------------------------------------------------------------------------

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


class Shrinker:
    """The smallest scenario found that still breaks ``invariant`` under ``protocol``: ddmin over the
    steps, then single-step removal and step simplification to a fixpoint.  Every candidate replays
    from the start (from the scenario's replica directories, read once, for a family that has them);
    one with a step the protocol cannot take does not fail, so the result is a scenario the protocol
    takes.  ``log`` gets a line after each phase."""

    def __init__(self, scenario: Any, protocol: str, invariant: str, log: Callable[[str], None] = lambda _: None) -> None:
        self.family = family_of_scenario(scenario)
        self.scenario, self.protocol, self.invariant, self.log = scenario, protocol, invariant, log
        self.prepare = seeder_for(self.family.initial_state(scenario))

    def run(self, scenario: Any) -> dict[str, Any]:
        return self.family.run(scenario, self.protocol, prepare=self.prepare, refusal_as_result=True)

    def breaks(self, steps: list) -> bool:
        result = self.run(self.family.with_steps(self.scenario, steps))
        return "not_expressible" not in result and any(v["invariant"] == self.invariant for v in result["violations"])

    def shrink(self) -> Any:
        """The shrunk scenario (``StepRefused`` when the protocol cannot take a step of the scenario
        itself, ``ValueError`` when it does not break the invariant)."""
        s, family = self.scenario, self.family
        first = self.run(s)
        if "not_expressible" in first:
            n = first["not_expressible"]
            raise StepRefused(f"{s.source}: step {n['step']} ({n['description']}): "
                              f"{family.refusal_words(self.protocol)}: {n['reason']}")
        if not any(v["invariant"] == self.invariant for v in first["violations"]):
            raise ValueError(f"{s.source} does not break {self.invariant} under {self.protocol}")
        steps = ddmin(list(s.steps), self.breaks)
        self.log(f"ddmin: {len(s.steps)} -> {len(steps)} steps")
        steps = reduce_to_fixpoint(steps, self.breaks, lambda step: family.simpler_steps(s, step))
        self.log(f"simplified: {len(steps)} steps")
        return family.with_steps(s, steps)

    def document(self, small: Any) -> dict[str, Any]:
        """The shrunk scenario's file: named ``NAME-shrunk``, what it was shrunk from, and an expect
        block that ``replemu run --check`` agrees with (every invariant it breaks)."""
        s = self.scenario
        doc = self.family.document(
            small, f"{self.invariant} under {self.protocol}, shrunk from {s.source} ({len(s.steps)} steps)",
            expect={self.protocol: self.family.expectation(self.run(small))})
        doc["name"] = f"{s.name}-shrunk"
        return doc


def breaks(scenario: Any, protocol: str, invariant: str) -> bool:
    """Whether ``scenario`` breaks ``invariant`` under ``protocol`` (a step the protocol cannot take: no)."""
    return Shrinker(scenario, protocol, invariant).breaks(list(scenario.steps))


def shrink(scenario: Any, protocol: str, invariant: str, log: Callable[[str], None] = lambda _: None) -> Any:
    """The smallest scenario found that still breaks ``invariant`` under ``protocol`` (``Shrinker``)."""
    return Shrinker(scenario, protocol, invariant, log).shrink()


def _shrunk_file(args: argparse.Namespace) -> Path:
    """Where ``replemu shrink FILE`` writes without --out: next to FILE, or in the current directory
    when FILE was a bundled scenario's name (the package's own directory is no place for it)."""
    name = f"{Path(args.file).stem}-shrunk.yaml"
    return Path(name) if args.file in getattr(args, "scenario_names", {}) else Path(args.file).with_name(name)


def cmd_campaign(args: argparse.Namespace) -> int:
    from .cli_common import DEFAULT_PROFILE

    family = DEFAULT_FAMILY if args.protocol == "all" else family_of_protocol(args.protocol) or DEFAULT_FAMILY
    if args.profile is None:
        args.profile = family.campaign_walk or DEFAULT_PROFILE
    foreign = foreign_knob(args, family)
    if foreign:
        return fail(f"replemu: error: --knob {foreign[0]} is a {foreign[1].title} knob; --protocol {args.protocol} is a "
                    f"{family.title} protocol{family.knobs_hint}")
    profiles = campaign_profiles(family)
    problem = _profile_problem(family, args.profile, args.protocol, profiles) or output_problem(args.out, "--out")
    if problem:
        return fail(f"replemu: error: {problem}")
    protocols = list(family.variant_names()) if args.protocol == "all" else [args.protocol]
    knobs = family_knobs(args, family)
    header = family.describe_campaign(args.seed, profiles[args.profile], args.partitions, protocols, args.engine, knobs)
    print("\n".join(header), file=sys.stderr if args.json else sys.stdout, flush=True)
    report = run_campaign(args.seed, args.profile, args.partitions, protocols, args.out, engine=args.engine, knobs=knobs)
    return _print_report(report, args.json, family.campaign_unit)


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
    """``replemu shrink FILE|--from-campaign SEED/PROFILE/K --protocol P --invariant NAME [--knob ...]``:
    the scenario's family is its file's, else the protocol's."""
    protocol_family = family_of_protocol(args.protocol) or DEFAULT_FAMILY
    family, scenario = protocol_family, None
    if args.file is not None and args.from_campaign is None:
        problem = output_problem(args.out, "--out", file=True) if args.out else None
        if problem:
            return fail(f"replemu: error: {problem}")
        try:
            family, scenario = load_family_scenario(args.file)
        except ScenarioError as exc:
            return fail(f"replemu: invalid scenario: {exc}")
    where = (f"{scenario.source} is a {family.title} scenario" if scenario is not None
             else f"--protocol {args.protocol} is a {family.title} protocol")
    if protocol_family is not family:
        return fail(f"replemu: error: {where}; --protocol {args.protocol} is a {protocol_family.title} protocol "
                    f"({family.qualifier}protocols: {', '.join(family.variant_names())})")
    foreign = foreign_knob(args, family)
    if foreign:
        return fail(f"replemu: error: --knob {foreign[0]} is a {foreign[1].title} knob; {where}{family.knobs_hint}")
    if args.invariant not in family.invariant_names():
        return fail(f"replemu: error: unknown {family.qualifier}invariant {args.invariant!r} "
                    f"(known: {', '.join(family.invariant_names())})")
    if (args.file is None) == (args.from_campaign is None):
        return fail("replemu: error: give a scenario FILE or --from-campaign SEED/PROFILE/PARTITION")
    problem = output_problem(args.out, "--out", file=True) if args.out else None
    if problem:
        return fail(f"replemu: error: {problem}")
    knobs = family_knobs(args, family)
    if scenario is not None:
        target = Path(args.out or _shrunk_file(args))
    else:
        try:
            seed, profile, number = args.from_campaign.split("/")
            profiles = campaign_profiles(family)
            problem = _profile_problem(family, profile, args.protocol, profiles) if family.campaign_walk else None
            if problem:
                return fail(f"replemu: error: {problem}")
            per_protocol = family.cases_per_protocol  # then drawn under the preset and its knobs, as the campaign drew it
            doc = family.generate_case(int(seed), int(number), profiles[profile], args.protocol if per_protocol else None,
                                       knobs if per_protocol else None)
            scenario = family.parse_scenario(doc, source=f"campaign {int(seed)}/{profile}/{int(number)}")
            target = Path(args.out or f"out/shrunk/campaign-{seed}-{profile}-p{number}-{args.protocol}-{args.invariant}.yaml")
        except ScenarioError as exc:
            return fail(f"replemu: invalid scenario: {exc}")
        except (ValueError, KeyError) as exc:
            return fail(f"replemu: error: --from-campaign wants SEED/PROFILE/PARTITION: {exc}")
    if knobs:  # the shrunk file carries them, so it replays with plain `replemu run --check`
        scenario = family.with_knobs(scenario, knobs)
    try:
        shrinker = Shrinker(scenario, args.protocol, args.invariant, log=lambda m: print(m, file=sys.stderr))
        small = shrinker.shrink()
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    write_scenario(shrinker.document(small), target)
    print(f"{len(scenario.steps)} -> {len(small.steps)} steps; wrote {target}; replay: replemu run {target} --protocol {args.protocol}")
    return EXIT_OK
