"""``replemu explore``: exhaustive bounded search of every interleaving (docs/explore.md).

The search itself is ``emulator.explore`` (local engine) and ``streaming.explore`` (Spark
engine); this module picks the engine, prints the parameters first and progress per depth,
writes each violated invariant's shortest path as a scenario file with an ``expect`` block
(``replemu run FILE --check`` replays it), and builds the result object of ``--json``.
``cmd_explore`` is the command: its arguments checked before anything runs, then the search
(on a Spark session it starts for ``--engine spark``, Ctrl-C cancelling the running level).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, TextIO

from emulator.config import Config
from emulator.explore import (
    DEFAULT_ALPHABET,
    INVARIANT_ORDER,
    Bounds,
    Level,
    Outcome,
    Reduction,
    Space,
    replay_path,
    search_local,
)
from emulator.invariants import INVARIANT_NAMES
from emulator.levels import WorkDirError
from emulator.run import effective_variant, run_scenario
from emulator.scenario import Scenario
from emulator.steps import StepKind
from emulator.variants import VARIANT_NAMES
from scenario_io.yaml_files import scenario_document, write_scenario

from .cli_common import EXIT_OK, fail, output_problem

EXPLORE_FORMAT = 1
# What one key of the local engine's in-memory visited set costs (a 16-byte bytes object in a
# set: measured 98 bytes a key at 2*10^6 keys), to turn ``--memory SIZE`` into keys.
KEY_BYTES_IN_MEMORY = 100


def default_workers() -> int:
    """One local-engine worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def choose_engine(engine: str) -> str:
    """``auto`` is the local engine: it checkpoints every level, resumes, uses every core and
    keeps its visited set on disk past ``--memory``; Spark is for more than one machine."""
    return "local" if engine == "auto" else engine


def parse_alphabet(text: str | None) -> tuple[StepKind, ...]:
    """``--steps produce,fetch,...`` -> step kinds (ValueError names the unknown one)."""
    if text is None:
        return DEFAULT_ALPHABET
    kinds = []
    for name in (t.strip() for t in text.split(",")):
        try:
            kinds.append(StepKind(name))
        except ValueError:
            raise ValueError(f"--steps: unknown step kind {name[:40]!r} (known: {', '.join(k.value for k in StepKind)})") from None
    if not kinds:
        raise ValueError("--steps: give at least one step kind")
    return tuple(k for k in StepKind if k in kinds)


@dataclass
class Request:
    """One ``replemu explore`` invocation, validated."""

    protocols: list[str]
    replicas: int
    bounds: Bounds
    config: Config
    knobs: dict[str, Any]
    alphabet: tuple[StepKind, ...]
    engine: str
    out: Path
    max_states: int | None = None
    master: str | None = None
    until: frozenset[str] = frozenset()
    max_seconds: float | None = None
    workers: int = 1  # processes of the local engine
    reduce: Reduction = Reduction()
    memory_keys: int | None = None  # keys the local engine's visited set may hold in memory

    def space(self, protocol: str) -> Space:
        return Space(tuple(range(1, self.replicas + 1)), self.config,
                     effective_variant(protocol, self.config, self.knobs), self.bounds, self.alphabet, self.reduce)


def describe(req: Request) -> str:
    b = req.bounds
    knobs = "".join(f" --knob {k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(req.knobs.items()))
    return (f"replemu explore: protocol {','.join(req.protocols)}, replicas {req.replicas}, depth {b.depth}, "
            f"records {b.records}, epochs 0..{b.epochs}, crashes {b.crashes}, power crashes {b.power_crashes}, "
            f"steps {','.join(k.value for k in req.alphabet)}, engine {req.engine}"
            f"{f' ({req.workers} workers)' if req.engine == 'local' else ''}{knobs}, reduce {','.join(req.reduce.names) or 'none'}"
            f"{f', memory {req.memory_keys:,} keys' if req.memory_keys else ''}; "
            f"config {_config_text(req.config)}; out {req.out}")


def _config_text(c: Config) -> str:
    return (f"min_insync_replicas={c.min_insync_replicas} unclean_leader_election={str(c.unclean_leader_election).lower()} "
            f"hw_checkpoint={c.hw_checkpoint} log_flush={c.log_flush}"
            + (f" alter_partition={c.alter_partition}" if c.alter_partition != "every_step" else ""))


class Printer:
    """Progress per depth, and within a long level every few seconds."""

    def __init__(self, protocol: str, out: TextIO, clock: Callable[[], float] = time.monotonic,
                 order: dict[str, int] | None = None) -> None:
        """``order``: the registry order of the invariants reported (default: the partition family's)."""
        self.protocol, self.out, self.clock = protocol, out, clock
        self.order = order
        self.last_line = clock()
        self.previous: Level | None = None
        self.reported: set[str] = set()

    def heartbeat(self, depth: int, done: int, frontier: int) -> None:
        """Within a long level: a line every 10 s."""
        now = self.clock()
        if done and now - self.last_line >= 10:
            self.out.write(f"{self.protocol} depth {depth}: {done:,} of {frontier:,} states of depth {depth - 1} expanded "
                           f"({100 * done // frontier}%)\n")
            self.out.flush()
            self.last_line = now

    def level(self, lv: Level, violations: dict[str, tuple[int, str]]) -> None:
        rate = lv.transitions / lv.seconds if lv.seconds > 0 else 0.0
        grow = lv.new_states / self.previous.new_states if self.previous and self.previous.new_states else None
        estimate = f", next level ~{int(lv.new_states * grow):,} (x{grow:.2f})" if grow else ""
        timing = "resumed: found by an earlier run" if lv.resumed else f"in {lv.seconds:.1f} s ({rate:,.0f}/s){estimate}"
        self.out.write(f"{self.protocol} depth {lv.depth}: {lv.new_states:,} new states ({lv.distinct_states:,} in all), "
                       f"{lv.transitions:,} transitions {timing}\n")
        for name, (depth, path) in by_depth(violations, self.order):
            if name not in self.reported and depth <= lv.depth:
                self.reported.add(name)
                self.out.write(f"  {name} first broken at depth {depth}: {path}\n")
        self.out.flush()
        self.previous = lv
        self.last_line = self.clock()


def by_depth(violations: dict[str, tuple[int, str]], order: dict[str, int] | None = None) -> list[tuple[str, tuple[int, str]]]:
    """Violations shallowest first, then in registry order (``order``: default the partition registry's)."""
    rank = order if order is not None else INVARIANT_ORDER
    return sorted(violations.items(), key=lambda kv: (kv[1][0], rank[kv[0]]))


def scenario_for(space: Space, protocol: str, invariant: str, path: str, knobs: dict[str, Any]) -> tuple[Scenario, list[str]]:
    """The violating path as a scenario (knobs carried in its config, so it replays with plain
    ``replemu run --check``) and every invariant its replay breaks."""
    steps = tuple(replay_path(space, path))
    config = space.config
    if knobs:
        config = replace(config, knobs=tuple(sorted({**dict(config.knobs), **knobs}.items())))
    kebab = "".join("-" + ch.lower() if ch.isupper() else ch for ch in invariant).lstrip("-")
    scenario = Scenario(name=f"explore-{protocol}-{kebab}", replicas=space.replicas, steps=steps, config=config)
    found = [v["invariant"] for v in run_scenario(scenario, protocol)["violations"]]
    return scenario, found


def write_violations(space: Space, protocol: str, req: Request, outcome: Outcome) -> list[dict[str, Any]]:
    out = []
    b = req.bounds
    for name, (depth, path) in by_depth(outcome.violations):
        scenario, found = scenario_for(space, protocol, name, path, req.knobs)
        description = (f"{name} under {protocol}: a shortest path ({depth} steps after the first election), found by "
                       f"replemu explore --replicas {req.replicas} --depth {b.depth} --records {b.records} --epochs {b.epochs} "
                       f"--crashes {b.crashes} --power-crashes {b.power_crashes}. Search path: {path}")
        doc = scenario_document(scenario, description, expect={protocol: {"violations": found}})
        target = req.out / protocol / f"{name}.yaml"
        write_scenario(doc, target)
        out.append({"invariant": name, "depth": depth, "steps": len(scenario.steps), "path": path,
                    "scenario_file": str(target)})
    return out


def result_object(protocol: str, req: Request, outcome: Outcome, seconds: float, violations: list[dict],
                  reductions: list[str] | None = None) -> dict[str, Any]:
    return {
        "format": EXPLORE_FORMAT,
        "protocol": protocol,
        "replicas": req.replicas,
        "bounds": req.bounds.as_dict(),
        "depth": outcome.depth,
        "complete": outcome.complete,
        "exhausted": outcome.exhausted,
        "diameter": outcome.diameter,
        "reduce": list(reductions or []),
        "states_per_depth": outcome.states_per_depth,
        "distinct_states": outcome.distinct_states,
        "transitions": outcome.transitions,
        "seconds": round(seconds, 3),
        "engine": req.engine,
        "knobs": dict(sorted(req.knobs.items())),
        "steps": [k.value for k in req.alphabet],
        "stopped": outcome.stopped,
        "violations": violations,
    }


COLOURS = {"hw": "#d62728", "kip101": "#ff7f0e", "kip279": "#1f77b4", "kip320": "#2ca02c", "kip903": "#9467bd",
           "kip966": "#17becf"}


def picture(results: list[dict[str, Any]]) -> str:
    """An SVG of new states per depth (log scale), one line per protocol, with a marker at each
    depth where a verdict invariant first broke: what ``explore.svg`` shows."""
    import math

    width, height, left, bottom, top, legend = 900, 360, 70, 40, 44, 240
    depth = max(len(r["states_per_depth"]) for r in results) - 1 or 1
    peak = max(max(r["states_per_depth"]) for r in results)
    decades = max(1, math.ceil(math.log10(max(peak, 10))))

    def x(d: float) -> float:
        return left + (width - legend - left - 20) * d / depth

    def y(n: float) -> float:
        return height - bottom - (height - bottom - top) * math.log10(max(n, 1)) / decades

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">replemu explore: new states per depth (log scale)</text>',
           f'<text x="{left}" y="32">circles: the depth where StrongIsr, NoCommittedDataLoss or EventualConvergence first broke</text>']
    for k in range(decades + 1):
        out.append(f'<line x1="{left}" x2="{width - legend - 20}" y1="{y(10 ** k):.1f}" y2="{y(10 ** k):.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(10 ** k) + 4:.1f}" text-anchor="end">{10 ** k:,}</text>')
    for d in range(depth + 1):
        out.append(f'<text x="{x(d):.1f}" y="{height - bottom + 16}" text-anchor="middle">{d}</text>')
    out.append(f'<text x="{(left + width - legend) / 2}" y="{height - 6}" text-anchor="middle">depth (steps after the first election)</text>')
    for i, r in enumerate(results):
        colour = COLOURS.get(r["protocol"], "#555")
        label = r["protocol"] + (" +knobs" if r["knobs"] else "")
        points = " ".join(f"{x(d):.1f},{y(n):.1f}" for d, n in enumerate(r["states_per_depth"]))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{width - legend + 10}" y="{top + 16 * (i + 1)}" fill="{colour}">{label}: '
                   f'{r["distinct_states"]:,} states{"" if r["complete"] else " (stopped)"}</text>')
        for v in r["violations"]:
            if v["invariant"] in ("StrongIsr", "NoCommittedDataLoss", "EventualConvergence"):
                n = r["states_per_depth"][v["depth"]] if v["depth"] < len(r["states_per_depth"]) else 1
                out.append(f'<circle cx="{x(v["depth"]):.1f}" cy="{y(n):.1f}" r="5" fill="none" stroke="{colour}" stroke-width="2">'
                           f'<title>{r["protocol"]}: {v["invariant"]} at depth {v["depth"]}</title></circle>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def explore(req: Request, out: TextIO = sys.stdout, spark=None, stop=None) -> list[dict[str, Any]]:
    """Search each protocol of ``req``; returns their result objects (progress goes to ``out``).
    ``stop``: a ``threading.Event`` set on Ctrl-C (the Spark engine's running level is cancelled
    meanwhile): the search ends as interrupted, its whole levels kept."""
    out.write(describe(req) + "\n")
    out.flush()
    results = []
    for protocol in req.protocols:
        space = req.space(protocol)
        printer = Printer(protocol, out)
        began = time.monotonic()
        found: dict[str, tuple[int, str]] = {}

        def should_stop(distinct: int) -> str | None:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            if req.max_states is not None and distinct >= req.max_states:
                return f"--max-states {req.max_states} reached"
            # (called only inside this protocol's search: the loop variables are this protocol's)
            if req.max_seconds is not None and time.monotonic() - began >= req.max_seconds:  # noqa: B023
                return f"--max-seconds {req.max_seconds:g} reached"
            return None

        def on_level(lv: Level) -> None:
            printer.level(lv, found)  # noqa: B023

        try:
            if req.engine == "spark":
                from streaming.explore import search_spark

                try:
                    outcome = search_spark(spark, space, req.out / protocol / "spark", on_level=on_level,
                                           should_stop=should_stop, clock=time.monotonic, found=found, until=req.until)
                except Exception:
                    if stop is not None and stop.is_set():  # the level's job was cancelled by Ctrl-C
                        raise KeyboardInterrupt from None
                    raise
            else:
                skipped = sorted(set(req.reduce.names) - set(space.reductions))
                if skipped:
                    out.write(f"{protocol}: no {' or '.join(skipped)} reduction under KRaft (the controller elects in "
                              f"assignment order; restarts and shutdowns write the controller): docs/explore.md\n")
                outcome = search_local(space, on_level=on_level, should_stop=should_stop, clock=time.monotonic,
                                       found=found, on_state=printer.heartbeat, until=req.until, workers=req.workers,
                                       work=req.out / protocol / "local", memory=req.memory_keys)
        except KeyboardInterrupt:
            kept = (f"; the levels found so far are kept in {req.out / protocol / req.engine}: run the same command to resume")
            out.write(f"{protocol}: interrupted{kept}\n")
            raise
        seconds = time.monotonic() - began
        violations = write_violations(space, protocol, req, outcome)
        state = "complete" if outcome.complete else f"stopped ({outcome.stopped})"
        out.write(f"{protocol}: {state} to depth {outcome.depth}"
                  f"{f' (state space exhausted, diameter {outcome.diameter})' if outcome.exhausted else ''}: "
                  f"{outcome.distinct_states:,} distinct states, {outcome.transitions:,} transitions in {seconds:.1f} s\n")
        for v in violations:
            out.write(f"  {v['invariant']} at depth {v['depth']}: replemu run {v['scenario_file']} --protocol {protocol} --check\n")
        if not violations:
            out.write("  no invariant violated\n")
        out.flush()
        results.append(result_object(protocol, req, outcome, seconds, violations, space.reductions))
    req.out.mkdir(parents=True, exist_ok=True)
    chart = req.out / "explore.svg"
    chart.write_text(picture(results))
    out.write(f"picture: {chart}\n")
    return results


def _config_assignments(texts: list[str], replicas: int):
    """``--config KEY=VALUE`` -> a validated ``Config`` for ``replicas`` (values read as YAML scalars)."""
    import yaml

    from emulator.config import ConfigError, parse_config

    data = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config wants KEY=VALUE, got {text[:80]!r}")
        try:
            data[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"--config {key}: {value[:80]!r} is not a value") from None
    return parse_config(data, replicas)


def cmd_explore(args: argparse.Namespace) -> int:
    from emulator.quorum_variants import QUORUM_VARIANT_NAMES

    from .quorum_explore import cmd_explore_quorum, partition_flags_problem

    if args.protocol in QUORUM_VARIANT_NAMES:
        return cmd_explore_quorum(args)
    problem = partition_flags_problem(args)
    if problem:
        return fail(f"replemu: error: {problem}")
    if args.depth is None:
        return fail("replemu: error: the following arguments are required: --depth")
    for name, default in (("replicas", 2), ("records", 2), ("epochs", 2), ("crashes", 1)):
        if getattr(args, name) is None:
            setattr(args, name, default)
    try:
        config = _config_assignments(args.config, args.replicas)
        alphabet = parse_alphabet(args.steps)
        until = frozenset(t.strip() for t in (args.until or "").split(",") if t.strip())
        unknown = sorted(until - set(INVARIANT_NAMES))
        if unknown:
            raise ValueError(f"--until: unknown invariant {unknown[0][:40]!r} (known: {', '.join(INVARIANT_NAMES)})")
        bounds = Bounds(args.depth, args.records, args.epochs, args.crashes, args.power_crashes)
        reduce = Reduction.parse(args.reduce)
    except ValueError as exc:  # ConfigError, ExploreError, an unknown step kind or invariant
        return fail(f"replemu: error: {exc}")
    problem = output_problem(args.out, "--out")
    if problem:
        return fail(f"replemu: error: {problem}")
    engine = choose_engine(args.engine)
    if args.master and engine != "spark":
        return fail("replemu: error: --master needs --engine spark")
    if args.workers and engine != "local":
        return fail("replemu: error: --workers is for --engine local (Spark uses its executors)")
    if args.memory and engine != "local":
        return fail("replemu: error: --memory is for --engine local (Spark keeps its visited set on disk)")
    if reduce.names and engine != "local":
        return fail("replemu: error: --reduce is for --engine local (the Spark engine searches without reductions)")
    protocols = list(VARIANT_NAMES) if args.protocol == "all" else [args.protocol]
    req = Request(protocols, args.replicas, bounds, config, args.knobs, alphabet, engine, Path(args.out),
                  max_states=args.max_states, master=args.master, until=until, max_seconds=args.max_seconds,
                  workers=args.workers or default_workers(), reduce=reduce,
                  memory_keys=None if args.memory is None else max(2, args.memory // KEY_BYTES_IN_MEMORY))
    spark = stop = None
    if engine == "spark":
        import signal
        import threading

        from streaming.session import build_spark

        spark = build_spark(args.master, app_name="replemu-explore")
        stop = threading.Event()

        def on_sigint(signum, frame):  # pyspark's own handler would call into py4j from inside a py4j call
            if stop.is_set():
                raise KeyboardInterrupt
            stop.set()
            print("replemu: stopping: cancelling the running level (Ctrl-C again to quit at once)", file=sys.stderr, flush=True)
            threading.Thread(target=spark.sparkContext.cancelAllJobs, daemon=True).start()

        signal.signal(signal.SIGINT, on_sigint)
    try:
        results = explore(req, out=sys.stderr if args.json else sys.stdout, spark=spark, stop=stop)
    except WorkDirError as exc:  # both engines' work directories
        return fail(f"replemu: error: {exc}")
    finally:
        if spark is not None:
            if stop.is_set():  # let the cancelled tasks wind down: stopping under them makes the JVM print errors
                tracker, waited = spark.sparkContext.statusTracker(), 0.0
                while (tracker.getActiveJobsIds() or tracker.getActiveStageIds()) and waited < 15:
                    time.sleep(0.25)
                    waited += 0.25
                time.sleep(1)
            spark.stop()
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else {"format": 1, "protocol": "all", "runs": results}, indent=1))
    return EXIT_OK
