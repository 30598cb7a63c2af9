"""``replemu explore --protocol kraft595|kraft853|kraft996``: the metadata quorum's search
(``emulator.quorum_explore``; docs/explore.md "The metadata quorum").

The CLI side, in the partition explorer's manner (``replemu/explore.py``): the parameters printed
first, a progress line per depth, each violated property's shortest path written as an ordinary
quorum scenario (``DIR/PROTOCOL/PROPERTY.yaml``, the core's steps, the knobs in its ``knobs`` and
an ``expect`` block from its own replay, so ``replemu run FILE --protocol P --check`` agrees), and
the result object of ``--json``.  One engine: the local one-process search.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from emulator.explore import Level, Outcome
from emulator.quorum_explore import (
    CODE_OF_KIND,
    DEFAULT_QUORUM_ALPHABET,
    PROPERTY_NAMES,
    PROPERTY_ORDER,
    QuorumBounds,
    QuorumSpace,
    final_node,
    replay_path,
    root,
    search_quorum,
    step_document,
)
from emulator.quorum_run import parse_quorum_scenario, run_quorum_scenario
from emulator.quorum_steps import QUORUM_STEP_TABLE, QuorumStepKind
from emulator.quorum_variants import quorum_variant_named
from scenario_io.yaml_files import write_scenario

from .cli_common import EXIT_OK, fail, output_problem

EXPLORE_FORMAT = 1
# The partition explorer's flags that mean nothing here, and the values that say "not given".
PARTITION_ONLY: tuple[tuple[str, Any, str], ...] = (("replicas", None, "--replicas"), ("config", [], "--config"), ("master", None, "--master"),
                  ("workers", None, "--workers"), ("memory", None, "--memory"), ("reduce", "none", "--reduce"))
QUORUM_ONLY: tuple[tuple[str, Any, str], ...] = (("voters", None, "--voters"), ("observers", None, "--observers"), ("reconfigs", None, "--reconfigs"),
               ("messages", None, "--messages"), ("disk_losses", None, "--disk-losses"), ("lost_responses", None, "--lost-responses"), ("stable", False, "--stable"),
               ("returning", None, "--returning"), ("any_round", False, "--any-round"), ("prefix", None, "--prefix"))


def parse_quorum_alphabet(text: str | None) -> tuple[QuorumStepKind, ...]:
    """``--steps election_timeout,fetch,...`` -> quorum step kinds, in the table's order."""
    if text is None:
        return DEFAULT_QUORUM_ALPHABET
    kinds = []
    for name in (t.strip() for t in text.split(",")):
        try:
            kinds.append(QuorumStepKind(name))
        except ValueError:
            raise ValueError(f"--steps: unknown quorum step kind {name[:40]!r} "
                             f"(known: {', '.join(k.value for k in QUORUM_STEP_TABLE)})") from None
    return tuple(k for k in QUORUM_STEP_TABLE if k in kinds)


@dataclass
class QuorumRequest:
    """One ``replemu explore`` of a quorum protocol, validated."""

    protocol: str
    space: QuorumSpace
    knobs: dict[str, Any]
    out: Path
    max_states: int | None = None
    max_seconds: float | None = None
    until: frozenset[str] = frozenset()


def describe(req: QuorumRequest) -> str:
    sp, b = req.space, req.space.bounds
    knobs = "".join(f" --knob {k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(req.knobs.items()))
    start = (f"stable leader {min(sp.voters)}, returning server {sp.returning}" if sp.returning is not None
            else "stable leader" if sp.stable else "every server started") + (f", then {sp.prefix}" if sp.prefix else "")
    return (f"replemu explore: protocol {req.protocol}, voters {list(sp.voters)}, observers {list(sp.observers)}, "
            f"root: {start}, depth {b.depth}, epochs 1..{b.epochs}, appends {b.appends}, reconfigs {b.reconfigs}, "
            f"crashes {b.crashes}, power crashes {b.power_crashes}, disk losses {b.disk_losses}, lost responses {b.lost_responses}, messages {b.messages}, "
            f"vote rounds {'any set' if sp.any_round else 'none, a bare majority or all'}, "
            f"steps {','.join(k.value for k in sp.alphabet)} ({''.join(CODE_OF_KIND[k] for k in sp.alphabet)}), "
            f"engine local{knobs}; out {req.out}")


def by_depth(violations: dict[str, tuple[int, str]]) -> list[tuple[str, tuple[int, str]]]:
    from .explore import by_depth as in_order

    return in_order(violations, PROPERTY_ORDER)


def kebab(name: str) -> str:
    return "".join("-" + ch.lower() if ch.isupper() else ch for ch in name).lstrip("-")


def scenario_document(req: QuorumRequest, name: str, depth: int, path: str) -> dict[str, Any]:
    """The violating path as a quorum scenario: the core's steps, the knobs, and an expect block
    that is what its own replay finds (for StableLeaderNotDisrupted, which the run's checker does not
    judge, the stable leader's final role and epoch too)."""
    sp, b = req.space, req.space.bounds
    steps = replay_path(sp, path)
    flags = (f"--voters {len(sp.voters)} --observers {len(sp.observers)} --depth {b.depth} --epochs {b.epochs} "
             f"--records {b.appends} --reconfigs {b.reconfigs} --crashes {b.crashes} --power-crashes {b.power_crashes} "
             f"--disk-losses {b.disk_losses} --lost-responses {b.lost_responses} --messages {b.messages}"
             + (" --stable" if sp.stable else "") + (f" --returning {sp.returning}" if sp.returning is not None else "")
             + (" --any-round" if sp.any_round else "") + (f" --prefix '{sp.prefix}'" if sp.prefix else "")
             + (f" --steps {','.join(k.value for k in sp.alphabet)}" if sp.alphabet != DEFAULT_QUORUM_ALPHABET else ""))
    doc: dict[str, Any] = {
        "name": f"explore-{req.protocol}-{kebab(name)}",
        "description": (f"{name} under {req.protocol}: a shortest path ({depth} actions after the root, {len(steps)} steps), "
                        f"found by replemu explore --protocol {req.protocol} {flags}. Search path: {path}"),
        "voters": list(sp.voters),
    }
    if sp.observers:
        doc["observers"] = list(sp.observers)
    if req.knobs:
        doc["knobs"] = dict(sorted(req.knobs.items()))
    doc["steps"] = [step_document(s) for s in steps]
    result = run_quorum_scenario(parse_quorum_scenario(doc, source=f"<{name}>"), req.protocol)
    expect: dict[str, Any] = {"violations": [v["invariant"] for v in result["violations"]]}
    node = final_node(sp, path)
    if node.stable is not None:
        leader = str(node.stable[0])
        final = result["final"]["servers"][leader]
        expect["servers"] = {node.stable[0]: {"role": final["role"], "epoch": final["epoch"]}}
    doc["expect"] = {req.protocol: expect}
    return doc


def write_violations(req: QuorumRequest, outcome: Outcome) -> list[dict[str, Any]]:
    out = []
    for name, (depth, path) in by_depth(outcome.violations):
        doc = scenario_document(req, name, depth, path)
        target = req.out / req.protocol / f"{name}.yaml"
        write_scenario(doc, target)
        out.append({"invariant": name, "depth": depth, "steps": len(doc["steps"]), "path": path,
                    "replay_violations": doc["expect"][req.protocol]["violations"], "scenario_file": str(target)})
    return out


def result_object(req: QuorumRequest, outcome: Outcome, seconds: float, violations: list[dict]) -> dict[str, Any]:
    sp = req.space
    return {
        "format": EXPLORE_FORMAT,
        "family": "quorum",
        "protocol": req.protocol,
        "voters": list(sp.voters),
        "observers": list(sp.observers),
        "root": "returning" if sp.returning is not None else "stable" if sp.stable else "started",
        "returning": sp.returning,
        "any_round": sp.any_round,
        "prefix": sp.prefix,
        "bounds": sp.bounds.as_dict(),
        "depth": outcome.depth,
        "complete": outcome.complete,
        "exhausted": outcome.exhausted,
        "diameter": outcome.diameter,
        "states_per_depth": outcome.states_per_depth,
        "distinct_states": outcome.distinct_states,
        "transitions": outcome.transitions,
        "seconds": round(seconds, 3),
        "engine": "local",
        "knobs": dict(sorted(req.knobs.items())),
        "steps": [k.value for k in sp.alphabet],
        "stopped": outcome.stopped,
        "violations": violations,
    }


def explore_quorum(req: QuorumRequest, out: TextIO = sys.stdout) -> dict[str, Any]:
    """Search ``req``; returns its result object (progress goes to ``out``)."""
    out.write(describe(req) + "\n")
    out.flush()
    from .explore import Printer

    printer = Printer(req.protocol, out, order=PROPERTY_ORDER)
    began = time.monotonic()
    found: dict[str, tuple[int, str]] = {}

    def should_stop(distinct: int) -> str | None:
        if req.max_states is not None and distinct >= req.max_states:
            return f"--max-states {req.max_states} reached"
        if req.max_seconds is not None and time.monotonic() - began >= req.max_seconds:
            return f"--max-seconds {req.max_seconds:g} reached"
        return None

    def on_level(lv: Level) -> None:
        printer.level(lv, found)

    outcome = search_quorum(req.space, on_level=on_level, should_stop=should_stop, clock=time.monotonic, found=found,
                            on_state=printer.heartbeat, until=req.until)
    seconds = time.monotonic() - began
    violations = write_violations(req, outcome)
    state = "complete" if outcome.complete else f"stopped ({outcome.stopped})"
    out.write(f"{req.protocol}: {state} to depth {outcome.depth}"
              f"{f' (state space exhausted, diameter {outcome.diameter})' if outcome.exhausted else ''}: "
              f"{outcome.distinct_states:,} distinct states, {outcome.transitions:,} transitions in {seconds:.1f} s\n")
    knobs = "".join(f" --knob {k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(req.knobs.items()))
    for v in violations:
        out.write(f"  {v['invariant']} at depth {v['depth']}: replemu run {v['scenario_file']} --protocol {req.protocol}"
                  f"{knobs} --check\n")
    if not violations:
        out.write("  no invariant violated\n")
    out.flush()
    return result_object(req, outcome, seconds, violations)


def _given(args: argparse.Namespace, flags) -> list[str]:
    return [flag for attr, unset, flag in flags if getattr(args, attr, unset) != unset]


def cmd_explore_quorum(args: argparse.Namespace) -> int:
    """``replemu explore`` of a metadata-quorum protocol: arguments checked before anything runs."""
    wrong = _given(args, PARTITION_ONLY)
    if args.engine == "spark":
        wrong.append("--engine spark")
    if args.knobs:
        wrong.append(f"--knob {next(iter(args.knobs))}")
    if wrong:
        return fail(f"replemu: error: {wrong[0]} is for partition protocols; --protocol {args.protocol} is a "
                    "metadata-quorum protocol (docs/explore.md \"The metadata quorum\")")
    try:
        voters = tuple(range(1, (3 if args.voters is None else args.voters) + 1))
        observers = tuple(range(len(voters) + 1, len(voters) + 1 + (args.observers or 0)))
        if len(voters) + len(observers) > 9:
            raise ValueError(f"--voters and --observers: at most 9 servers, got {len(voters) + len(observers)}")
        bounds = QuorumBounds(depth=1000 if args.depth is None else args.depth, epochs=3 if args.epochs is None else args.epochs,
                              appends=1 if args.records is None else args.records,
                              reconfigs=2 if args.reconfigs is None else args.reconfigs,
                              crashes=0 if args.crashes is None else args.crashes, power_crashes=args.power_crashes,
                              disk_losses=args.disk_losses or 0, lost_responses=args.lost_responses or 0,
                              messages=args.messages or 0)
        alphabet = parse_quorum_alphabet(args.steps)
        until = frozenset(t.strip() for t in (args.until or "").split(",") if t.strip())
        unknown = sorted(until - set(PROPERTY_NAMES))
        if unknown:
            raise ValueError(f"--until: unknown property {unknown[0][:40]!r} (known: {', '.join(PROPERTY_NAMES)})")
        variant = quorum_variant_named(args.protocol, args.quorum_knobs)
        space = QuorumSpace(voters, observers, variant, bounds, alphabet, returning=args.returning, stable=args.stable,
                            any_round=args.any_round, prefix=" ".join((args.prefix or "").split()))
        root(space)  # a prefix that cannot be taken is an error before anything runs
    except ValueError as exc:  # ExploreError, KnobError, an unknown step kind or property
        return fail(f"replemu: error: {exc}")
    problem = output_problem(args.out, "--out")
    if problem:
        return fail(f"replemu: error: {problem}")
    req = QuorumRequest(args.protocol, space, dict(args.quorum_knobs), Path(args.out), max_states=args.max_states,
                        max_seconds=args.max_seconds, until=until)
    result = explore_quorum(req, out=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(result, indent=1))
    return EXIT_OK


def partition_flags_problem(args: argparse.Namespace) -> str | None:
    """A quorum-only flag given to a partition search (None: none)."""
    wrong = _given(args, QUORUM_ONLY)
    if args.quorum_knobs:
        wrong.append(f"--knob {next(iter(args.quorum_knobs))}")
    if wrong:
        return (f"{wrong[0]} is for the metadata-quorum protocols (kraft595, kraft853, kraft996); --protocol "
                f"{args.protocol} is a partition protocol")
    return None
