"""``replemu explore``: exhaustive bounded search of every interleaving (docs/explore.md).

One command path over a protocol family (``emulator.family.Family``, its "search" section): the
family's flags checked (another family's flags refused), the family's spaces built, then one
engine searches each -- ``emulator.search.search_local`` (local) or ``streaming.explore`` (Spark),
the same engine for every family.  This module prints the parameters first and progress per
depth, writes each violated invariant's shortest path as the family's scenario file with an
``expect`` block (``replemu run FILE --check`` replays it), and builds the result object of
``--json``.  ``cmd_explore`` is the command: its arguments checked before anything runs, then
the search (on a Spark session it starts for ``--engine spark``, Ctrl-C cancelling the running
level).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

import yaml

from emulator.config import Config, ConfigError
from emulator.explore import DEFAULT_ALPHABET, Bounds, Reduction, Space
from emulator.families import FAMILIES, Family, family_named, family_of_protocol
from emulator.levels import WorkDirError
from emulator.run import effective_variant
from emulator.search import Level, Outcome, SearchSpace, search_local
from emulator.search_command import knob_flags
from emulator.steps import StepKind
from scenario_io.yaml_files import write_scenario
from streaming.explore import search_spark
from streaming.session import build_spark

from .cli_common import EXIT_OK, fail, output_problem

EXPLORE_FORMAT = 1
# What one key of the local engine's in-memory visited set costs (a 16-byte bytes object in a
# set: measured 98 bytes a key at 2*10^6 keys), to turn ``--memory SIZE`` into keys.
KEY_BYTES_IN_MEMORY = 100
# ``--protocol all``: every variant of this family (the default of ``replemu explore``).
ALL_FAMILY = "partition"


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


@dataclass
class Request:
    """One ``replemu explore`` invocation, validated: a family's spaces (one per protocol) and how
    to search them."""

    family: Family
    protocols: list[str]
    spaces: list[SearchSpace]
    knobs: dict[str, Any]
    engine: str
    out: Path
    max_states: int | None = None
    master: str | None = None
    until: frozenset[str] = frozenset()
    max_seconds: float | None = None
    workers: int = 1  # processes of the local engine
    memory_keys: int | None = None  # keys the local engine's visited set may hold in memory


def partition_request(protocols: list[str], replicas: int, bounds: Bounds, config: Config, knobs: dict[str, Any],
                      alphabet: tuple[StepKind, ...] = DEFAULT_ALPHABET, engine: str = "local", out: Path = Path("out/explore"),
                      reduce: Reduction | None = None, **settings: Any) -> Request:
    """A request of partition searches from their parts (``replemu.api.explore``,
    scripts/explore_targets.py): replicas 1..``replicas``, each protocol's variant with the knobs."""
    ids = tuple(range(1, replicas + 1))
    spaces: list[SearchSpace] = [Space(ids, config, effective_variant(p, config, knobs), bounds, alphabet,
                                       reduce or Reduction()) for p in protocols]
    return Request(family_named("partition"), list(protocols), spaces, knobs, engine, Path(out), **settings)


def describe(req: Request) -> str:
    space = req.spaces[0]
    head, tail = req.family.describe_search(space)
    workers = f" ({req.workers} workers)" if req.engine == "local" and _takes(req.family, "workers") else ""
    reduce = f", reduce {','.join(space.asked_reductions()) or 'none'}" if req.family.search_reductions() else ""
    memory = f", memory {req.memory_keys:,} keys" if req.memory_keys else ""
    return (f"replemu explore: protocol {','.join(req.protocols)}, {head}, engine {req.engine}{workers}"
            f"{knob_flags(req.knobs)}{reduce}{memory}{tail}; out {req.out}")


def _takes(family: Family, option: str) -> bool:
    return any(o.name == option for o in family.search_options())


class Printer:
    """Progress per depth, and within a long level every few seconds."""

    def __init__(self, protocol: str, out: TextIO, order: dict[str, int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``order``: the registry order of the family's invariants (``SearchSpace.order``)."""
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


def by_depth(violations: dict[str, tuple[int, str]], order: dict[str, int]) -> list[tuple[str, tuple[int, str]]]:
    """Violations shallowest first, then in registry order (``order``: the family's)."""
    return sorted(violations.items(), key=lambda kv: (kv[1][0], order[kv[0]]))


def write_violations(req: Request, space: SearchSpace, protocol: str, outcome: Outcome) -> list[tuple[dict[str, Any], str]]:
    """Each violation's shortest path written as the family's scenario file (``DIR/PROTOCOL/INVARIANT.yaml``):
    its entry of the result object, and the flags ``replemu run FILE --protocol P`` is shown with."""
    out = []
    for name, (depth, path) in by_depth(outcome.violations, space.order()):
        found = req.family.counterexample(space, name, depth, path, req.knobs)
        target = req.out / protocol / f"{name}.yaml"
        write_scenario(found.document, target)
        out.append(({"invariant": name, "depth": depth, "steps": len(found.document["steps"]), "path": path, **found.fields,
                     "scenario_file": str(target)}, found.run_flags))
    return out


def result_object(req: Request, space: SearchSpace, outcome: Outcome, seconds: float,
                  violations: list[dict[str, Any]]) -> dict[str, Any]:
    result = {"format": EXPLORE_FORMAT, **req.family.search_result(space), "depth": outcome.depth, "complete": outcome.complete,
              "exhausted": outcome.exhausted, "diameter": outcome.diameter}
    if req.family.search_reductions():
        result["reduce"] = space.reductions()
    result.update({
        "states_per_depth": outcome.states_per_depth,
        "distinct_states": outcome.distinct_states,
        "transitions": outcome.transitions,
        "seconds": round(seconds, 3),
        "engine": req.engine,
        "knobs": dict(sorted(req.knobs.items())),
        "steps": space.step_names(),
        "stopped": outcome.stopped,
        "violations": violations,
    })
    return result


COLOURS = {"hw": "#d62728", "kip101": "#ff7f0e", "kip279": "#1f77b4", "kip320": "#2ca02c", "kip903": "#9467bd",
           "kip966": "#17becf"}


def picture(results: list[dict[str, Any]], marks: tuple[str, ...]) -> str:
    """An SVG of new states per depth (log scale), one line per protocol, with a marker at each
    depth where one of the invariants ``marks`` (the family's verdicts) first broke: what
    ``explore.svg`` shows."""
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
           f'<text x="{left}" y="32">circles: the depth where {" or ".join([", ".join(marks[:-1]), marks[-1]] if len(marks) > 1 else marks)} '
           'first broke</text>']
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
            if v["invariant"] in marks:
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
    checkpoints = req.family.search_checkpoints()
    for protocol, space in zip(req.protocols, req.spaces):
        printer = Printer(protocol, out, space.order())
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
                try:
                    outcome = search_spark(spark, space, req.out / protocol / "spark", on_level=on_level,
                                           should_stop=should_stop, clock=time.monotonic, found=found, until=req.until)
                except Exception:
                    if stop is not None and stop.is_set():  # the level's job was cancelled by Ctrl-C
                        raise KeyboardInterrupt from None
                    raise
            else:
                for note in req.family.search_notes(space):
                    out.write(f"{protocol}: {note}\n")
                outcome = search_local(space, on_level=on_level, should_stop=should_stop, clock=time.monotonic,
                                       found=found, on_state=printer.heartbeat, until=req.until, workers=req.workers,
                                       work=req.out / protocol / "local" if checkpoints else None, memory=req.memory_keys)
        except KeyboardInterrupt:
            if checkpoints:
                out.write(f"{protocol}: interrupted; the levels found so far are kept in {req.out / protocol / req.engine}: "
                          "run the same command to resume\n")
            raise
        seconds = time.monotonic() - began
        written = write_violations(req, space, protocol, outcome)
        state = "complete" if outcome.complete else f"stopped ({outcome.stopped})"
        out.write(f"{protocol}: {state} to depth {outcome.depth}"
                  f"{f' (state space exhausted, diameter {outcome.diameter})' if outcome.exhausted else ''}: "
                  f"{outcome.distinct_states:,} distinct states, {outcome.transitions:,} transitions in {seconds:.1f} s\n")
        for v, flags in written:
            out.write(f"  {v['invariant']} at depth {v['depth']}: replemu run {v['scenario_file']} --protocol {protocol}"
                      f"{flags} --check\n")
        if not written:
            out.write("  no invariant violated\n")
        out.flush()
        results.append(result_object(req, space, outcome, seconds, [v for v, _ in written]))
    marks = req.family.search_chart_marks()
    if marks is not None:
        req.out.mkdir(parents=True, exist_ok=True)
        chart = req.out / "explore.svg"
        chart.write_text(picture(results, marks))
        out.write(f"picture: {chart}\n")
    return results


def _config_values(texts: list[str]) -> dict[str, Any]:
    """``--config KEY=VALUE`` -> ``{key: value}`` (values read as YAML scalars; the family validates them)."""
    data = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config wants KEY=VALUE, got {text[:80]!r}")
        try:
            data[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"--config {key}: {value[:80]!r} is not a value") from None
    return data


def refused_flag(family: Family, args: argparse.Namespace) -> str | None:
    """Why a flag given is not this family's: a flag only another family's search takes, an engine
    it does not offer, another family's knob (None: none)."""
    own = {o.name for o in family.search_options()}
    wrong: list[tuple[str, Family]] = []
    for other in FAMILIES.values():
        if other is not family:
            wrong += [(o.flag, other) for o in other.search_options()
                      if o.name not in own and getattr(args, o.name, o.unset) != o.unset]
    engine = choose_engine(args.engine)
    if engine not in family.search_engines():
        wrong += [(f"--engine {engine}", f) for f in FAMILIES.values() if engine in f.search_engines()][:1]
    for text in args.knob:
        name = text.partition("=")[0].strip()
        if name not in family.knob_names():  # (a knob no family has: the family's parse_knobs names it)
            wrong += [(f"--knob {name}", f) for f in FAMILIES.values() if name in f.knob_names()][:1]
    if not wrong:
        return None
    flag, owner = wrong[0]
    return f"{flag} is for {owner.search_owner}; --protocol {args.protocol} is {family.search_kind}"


def cmd_explore(args: argparse.Namespace) -> int:
    family = family_named(ALL_FAMILY) if args.protocol == "all" else family_of_protocol(args.protocol)
    if family is None:  # argparse's choices are every family's protocols
        return fail(f"replemu: error: unknown protocol {args.protocol!r}")
    problem = refused_flag(family, args)
    if problem:
        return fail(f"replemu: error: {problem}")
    options: dict[str, Any] = {}
    for option in family.search_options():
        value = getattr(args, option.name, None)
        if value is None and option.required:
            return fail(f"replemu: error: the following arguments are required: {option.flag}")
        options[option.name] = option.default if value is None else value
    protocols = list(family.variant_names()) if args.protocol == "all" else [args.protocol]
    try:
        knobs = family.parse_knobs([t for t in args.knob if t.partition("=")[0].strip() in family.knob_names()])
        if "config" in options:
            options["config"] = _config_values(options["config"])
        spaces, until = family.search_spaces(protocols, knobs, options)
    except ValueError as exc:  # ConfigError, ExploreError, KnobError, an unknown step kind or invariant
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
    if spaces[0].asked_reductions() and engine != "local":
        return fail("replemu: error: --reduce is for --engine local (the Spark engine searches without reductions)")
    req = Request(family, protocols, spaces, knobs, engine, Path(args.out), max_states=args.max_states, master=args.master,
                  until=until, max_seconds=args.max_seconds,
                  workers=(args.workers or default_workers()) if "workers" in options else 1,
                  memory_keys=None if args.memory is None else max(2, args.memory // KEY_BYTES_IN_MEMORY))
    spark = stop = None
    if engine == "spark":
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
