"""``replemu``: the command line (docs/ has the user guide; ``replemu COMMAND --help``).

    replemu run FILE [FILE...] --protocol hw|kip101|kip279|kip320|all [--json] [--trace] [--check]

Exit status: 0 the run completed (whatever it found); 1 ``--check`` disagreed with an
``expect`` block; 2 invalid scenario, input or arguments (a one-line message naming the file,
step or argument; nothing is replayed or written); 3 the job itself failed (a Spark query, or a
bug: the message says which; ``REPLEMU_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import emulator
from emulator import VARIANT_NAMES, ScenarioError, dumps, run_scenario
from emulator.bounds import short_list
from emulator.variants import KNOBS, KnobError, parse_knob_assignments
from scenario_io.yaml_files import load_scenario

from streaming.checkpoint import CHANGEABLE_IDENTITY
from streaming.storage import is_uri, join
from streaming.triggers import TRIGGER_HELP

from . import report

EXIT_OK, EXIT_CHECK_FAILED, EXIT_INVALID, EXIT_FAILED = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit status is 2 as well
        self.print_usage(sys.stderr)
        print(f"replemu: error: {message}", file=sys.stderr)
        sys.exit(EXIT_INVALID)


def _add_knob(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                        help="set a protocol knob on top of the variant's preset (repeatable; wins over a scenario's "
                             f"config.knobs); knobs: {', '.join(KNOBS)} (docs/protocol.md)")


class _Version(argparse.Action):
    """``--version``: the version and which build of the core runs (looked up only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("replemu")
        except PackageNotFoundError:
            number = "(not installed)"
        why = f" ({emulator.BUILD_REASON})" if emulator.BUILD_REASON else ""
        print(f"replemu {number}, core: {emulator.BUILD}{why}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="replemu", description="Kafka replication emulator (HW truncation, KIP-101, KIP-279, KIP-320). "
                     "Docs: docs/ in the source tree (README.md, docs/protocol.md, docs/scenario-format.md, docs/steps.md).")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and which build of the core runs (compiled with mypyc, or pure Python)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="replay scenario files under one or all protocol variants")
    run.add_argument("files", nargs="+", metavar="FILE", help="scenario YAML files")
    run.add_argument("--protocol", default="all", choices=VARIANT_NAMES + ("all",), help="variant to replay (default: all)")
    run.add_argument("--json", action="store_true", help="print the contract's result object(s) as JSON")
    run.add_argument("--trace", action="store_true", help="add a per-step trace to the JSON")
    run.add_argument("--check", action="store_true", help="compare with each file's expect block; exit 1 on disagreement")
    run.add_argument("--summary", action="store_true", help="human output: verdict lines and the matrix only")
    run.add_argument("--from-dirs", nargs="+", metavar="DIR", help="start from Kafka replica directories (replemu export / real brokers)")
    _add_knob(run)

    exp = sub.add_parser("export", help="write a result's replicas as Kafka log directories")
    exp.add_argument("result", metavar="RESULT.json")
    exp.add_argument("--to", required=True, metavar="DIR")

    ins = sub.add_parser("inspect", help="read Kafka replica directories and find where they diverge")
    ins.add_argument("dirs", nargs="+", metavar="DIR")

    comp = sub.add_parser("compile", help="turn scenario files into event files for the streaming job")
    comp.add_argument("files", nargs="+", metavar="SCENARIO")
    comp.add_argument("--out", required=True, metavar="DIR")
    comp.add_argument("--split", type=_int_between(1, 10_000), default=1, metavar="N", help="split every partition's rows over N files")
    comp.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")

    stream = sub.add_parser("stream", help="run the Spark Structured Streaming job")
    stream.add_argument("--input", metavar="DIR", help="event files (or use --workload)")
    stream.add_argument("--workload", metavar="PROFILE", help="generated events of a conf/workloads.yaml profile, no input files")
    stream.add_argument("--partitions", type=_partitions, metavar="N", help="with --workload: generated partitions")
    stream.add_argument("--seed", type=_seed, metavar="S", help="with --workload: the root seed")
    stream.add_argument("--steps-per-batch", type=_positive, default=20, metavar="K", help="with --workload: steps of every partition per micro-batch")
    stream.add_argument("--max-steps", type=_steps, metavar="M", help="with --workload: stop after M steps per partition (needed by available-now)")
    stream.add_argument("--output", required=True, metavar="DIR")
    stream.add_argument("--checkpoint", required=True, metavar="DIR")
    stream.add_argument("--protocol", required=True, choices=VARIANT_NAMES + ("all",),
                        help="variant; 'all' runs one query per variant into OUTPUT/<variant> and CHECKPOINT/<variant>")
    stream.add_argument("--trigger", default="available-now", help=TRIGGER_HELP)
    stream.add_argument("--max-files-per-trigger", type=_positive, default=None, metavar="N")
    stream.add_argument("--master", default=None, help="Spark master URL (default: conf/spark.conf, local[*]); "
                        "local-cluster[2,1,1024] runs two executor JVMs on this machine (docs/cluster.md)")
    stream.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                        help="run the job through a Spark Connect server instead of a driver here (docs/cluster.md: "
                             "paths are the server's, and the server's Python workers must import replemu)")
    stream.add_argument("--no-spark-ui", action="store_true",
                        help="no Spark web UI (by default it runs, on 127.0.0.1 for local masters; its URL is printed at start)")
    stream.add_argument("--gap-timeout-ms", type=_millis, default=60000,
                        help="how long a partition waits for a missing sequence number before reporting it")
    stream.add_argument("--compact-min-records", type=_positive, default=None, metavar="N",
                        help="compact a partition's unchangeable log prefix after a step once it holds N records beyond the "
                             "last compaction (default 256: the state keeps a window, the outputs keep the history)")
    stream.add_argument("--state-store", choices=("hdfs", "rocksdb"), default=None,
                        help="Spark's state store provider, fixed when the checkpoint is created (default: Spark's, hdfs)")
    stream.add_argument("--allow-change", action="append", default=[], metavar="FIELD",
                        help="restart a checkpoint although this identity field differs from the run that created it "
                             f"(repeatable; fields: {', '.join(CHANGEABLE_IDENTITY)}); without it a different restart is refused")
    stream.add_argument("--shuffle-partitions", type=_int_between(1, 10_000), default=None, metavar="N",
                        help="state partitions of a new checkpoint (default: the master's cores, e.g. local[4] -> 4); "
                             "fixed for the checkpoint's life, a restart reads it back")
    _add_knob(stream)

    state = sub.add_parser("state", help="show partitions' state from a stream's checkpoint (Spark's statestore reader)")
    state.add_argument("checkpoint", metavar="CHECKPOINT_DIR")
    state.add_argument("--topic")
    state.add_argument("--partition", type=int)
    state.add_argument("--master", default=None)

    dash = sub.add_parser("dashboard", help="write a self-contained HTML dashboard of stream outputs or run results")
    dash.add_argument("inputs", nargs="+", metavar="RUN_DIR_OR_RESULT_JSON")
    dash.add_argument("--output", default="dashboard", metavar="DIR", help="directory for dashboard.html (default ./dashboard)")
    dash.add_argument("--partition", default=None, metavar="TOPIC/P", help="partition (or scenario) whose timeline opens first")

    srv = sub.add_parser("serve", help="serve a local web app over a running or finished stream's outputs")
    srv.add_argument("output", metavar="OUTPUT_DIR", help="a stream's --output directory (or the parent of --protocol all's)")
    srv.add_argument("--port", default="8050", help="TCP port (default 8050; 0 picks a free one)")
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")

    camp = sub.add_parser("campaign", help="run a seeded fault-injection campaign over generated partitions")
    camp.add_argument("--protocol", default="all", choices=VARIANT_NAMES + ("all",))
    camp.add_argument("--partitions", type=_partitions, required=True, metavar="N")
    camp.add_argument("--seed", type=_seed, required=True, metavar="S")
    camp.add_argument("--profile", required=True, help="a profile of conf/workloads.yaml: clean, hard, unclean, kraft")
    camp.add_argument("--engine", choices=("spark", "local"), default="spark", help="spark (default) or the core alone")
    camp.add_argument("--out", default="out/campaigns", metavar="DIR", help="where example scenario files go")
    camp.add_argument("--json", action="store_true")
    _add_knob(camp)

    shr = sub.add_parser("shrink", help="minimise a scenario that breaks an invariant")
    shr.add_argument("file", nargs="?", metavar="FILE")
    shr.add_argument("--from-campaign", metavar="SEED/PROFILE/PARTITION", help="shrink a generated partition")
    shr.add_argument("--protocol", required=True, choices=VARIANT_NAMES)
    shr.add_argument("--invariant", required=True)
    shr.add_argument("--out", metavar="FILE", help="where to write the shrunk scenario (default: next to the input / out/shrunk)")
    _add_knob(shr)

    exp_ = sub.add_parser("explore", help="search every interleaving of steps up to a depth, breadth-first (docs/explore.md)",
                          description="Exhaustive bounded search: every interleaving of contract steps from a partition's "
                          "first election, breadth-first, each distinct state expanded once, every invariant judged in every "
                          "state. Each violated invariant's shortest path is written as a scenario file with an expect block. "
                          "See docs/explore.md for what the search covers and what it cannot.")
    exp_.add_argument("--protocol", default="all", choices=VARIANT_NAMES + ("all",), help="variant to search (default: all)")
    exp_.add_argument("--replicas", type=_int_between(1, 5), default=2, metavar="N", help="replicas 1..N (default 2)")
    exp_.add_argument("--depth", type=_int_between(0, 1000), required=True, metavar="D", help="steps after the first election")
    exp_.add_argument("--records", type=_int_between(0, 100), default=2, metavar="N", help="records produced in all (default 2)")
    exp_.add_argument("--epochs", type=_int_between(0, 1000), default=2, metavar="N",
                      help="highest leader epoch the controller may write; the first election writes 0 (default 2)")
    exp_.add_argument("--crashes", type=_int_between(0, 100), default=1, metavar="N", help="process crashes in all (default 1)")
    exp_.add_argument("--power-crashes", type=_int_between(0, 100), default=0, metavar="N",
                      help="power losses in all (default 0; they lose unflushed records: KIP-966's case)")
    exp_.add_argument("--steps", metavar="KIND,...", help="narrow the step alphabet (default: every step kind but tick)")
    exp_.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                      help="partition config (repeatable): min_insync_replicas, unclean_leader_election, acks, "
                           "hw_checkpoint, log_flush, replica_lag_time_max_ms, alter_partition (docs/scenario-format.md)")
    exp_.add_argument("--engine", choices=("auto", "local", "spark"), default="auto",
                      help="local: this machine's cores (--workers), levels checkpointed under --out, the visited set on disk "
                           "past --memory; spark: levels as DataFrames on a Spark cluster (--master); both resume by rerunning "
                           "the same command; auto (default): local")
    exp_.add_argument("--master", help="Spark master for --engine spark (default: conf/spark.conf, local[*])")
    exp_.add_argument("--workers", type=_int_between(1, 256), metavar="N",
                      help="processes expanding each level of the local engine (default: one per core); "
                           "the same counts and paths with any number")
    exp_.add_argument("--reduce", default="none", metavar="none|all|sleep,symmetry",
                      help="reductions that keep every verdict (docs/explore.md): sleep (sleep sets over steps that "
                           "commute: fewer transitions, the same states and paths), symmetry (states equal up to a renaming "
                           "of the replicas are one; ZooKeeper variants only); default none (every state, every transition)")
    exp_.add_argument("--memory", type=_size, metavar="SIZE",
                      help="memory the local engine's visited set may use, e.g. 512M or 4G (about "
                           "100 bytes a state); the rest lives in sorted runs on disk under --out (default: all in memory)")
    exp_.add_argument("--max-states", type=_positive, metavar="N", help="stop (incomplete) once this many distinct states are found")
    exp_.add_argument("--max-seconds", type=_positive, metavar="S", help="stop (incomplete) after this long; "
                      "the result's depth is the deepest level completed")
    exp_.add_argument("--until", metavar="INVARIANT,...", help="stop after the first depth where one of these invariants breaks")
    exp_.add_argument("--out", default="out/explore", metavar="DIR",
                      help="where the scenario files (DIR/PROTOCOL/INVARIANT.yaml) and the levels of the search go "
                           "(DIR/PROTOCOL/local or /spark: rerun the same command to resume; default out/explore)")
    exp_.add_argument("--json", action="store_true", help="print the result object (progress goes to stderr)")
    _add_knob(exp_)

    sub.add_parser("steps", help="print the table of step kinds (docs/steps.md)")

    res = sub.add_parser("results", help="read a stream's outputs back as result objects")
    res.add_argument("output", metavar="OUTPUT_DIR")
    res.add_argument("--json", action="store_true")
    return parser


def _int_between(low: int, high: int):
    """An argparse type: an integer from ``low`` to ``high`` (a typo of 10**30 partitions is refused, not run)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text[:40]} is out of range ({low} to {high:,})")
        return value

    parse.__name__ = "integer"
    return parse


_positive = _int_between(1, 2**31 - 1)
_partitions = _int_between(1, 1_000_000)
_seed = _int_between(-(2**63), 2**63 - 1)
_millis = _int_between(1, 2**62)
_steps = _int_between(1, 2**62)


def _size(text: str) -> int:
    """``512M``, ``4G``, ``64K`` or plain bytes -> bytes (argparse turns a ValueError into a usage error)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = units.get(t[-1:], 1)
    number = t[:-1] if t[-1:] in units else t
    try:
        value = int(float(number) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 4G)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a size must be positive, got {text!r}")
    return value


def _fail(message: str, status: int = EXIT_INVALID) -> int:
    """Report bad input (or, with ``status`` 3, a failed job) on stderr; the command exits with ``status``."""
    print(message, file=sys.stderr)
    return status


def _output_problem(path, flag: str, file: bool = False) -> str | None:
    """Why ``path`` (a directory, or with ``file`` a file) cannot be written; None when it can."""
    from pathlib import Path

    from streaming.checkpoint import directory_problem

    if file:
        if Path(path).is_dir():
            return f"{flag} {path}: is a directory, give a file path"
        return directory_problem(Path(path).parent, flag)
    return directory_problem(path, flag)


def cmd_compile(args: argparse.Namespace) -> int:
    from .compile import compile_scenarios

    problem = _output_problem(args.out, "--out")
    if problem:
        return _fail(f"replemu: error: {problem}")

    try:
        paths = compile_scenarios(args.files, args.out, split=args.split, fmt=args.format)
    except ScenarioError as exc:
        return _fail(f"replemu: invalid scenario: {exc}")
    print(f"wrote {len(paths)} event files for {len(args.files)} scenarios to {args.out}")
    return EXIT_OK


def _input_problem(path: str | None, drains: bool) -> str | None:
    """Why ``--input`` cannot be read by the job; None when it can."""
    from pathlib import Path

    if path is None:
        return "give --input DIR or --workload PROFILE"
    if is_uri(path):
        return None  # a Hadoop filesystem: Spark reads it (and says so when it cannot)
    p = Path(path)
    if not p.is_dir():
        return f"--input {path}: {'is not a directory' if p.exists() else 'does not exist'} (or give --workload)"
    if not os.access(p, os.R_OK | os.X_OK):
        return f"--input {path}: not readable"
    if drains and not any(not c.name.startswith((".", "_")) and c.is_file() for c in p.iterdir()):
        return (f"--input {path}: holds no event files (names starting with . or _ are ignored), so a run that "
                f"drains its input has nothing to do; write files with replemu compile, or use --trigger processing-time=… to wait for them")
    return None


def cmd_stream(args: argparse.Namespace) -> int:
    from scenario_io.profiles import load_profiles
    from streaming.checkpoint import CheckpointError, claim_run, run_identity
    from streaming.session import master_problem, remote_problem, remote_unreachable
    from streaming.triggers import TriggerError, parse_trigger
    from streaming.workload_source import workload_options

    # Everything is checked before Spark starts: a typo costs no JVM.
    try:
        trigger = parse_trigger(args.trigger)
    except TriggerError as exc:
        return _fail(f"replemu: error: {exc}")
    if args.master is not None and master_problem(args.master):
        return _fail(f"replemu: error: {master_problem(args.master)}")
    if args.remote is not None and remote_problem(args.remote):
        return _fail(f"replemu: error: {remote_problem(args.remote)}")
    if args.remote is not None and args.master is not None:
        return _fail("replemu: error: give --master (a driver here) or --remote (a Spark Connect server), not both")
    if "PYSPARK_GATEWAY_PORT" in os.environ and (args.master or args.remote):
        return _fail("replemu: error: under spark-submit the master is spark-submit's --master: drop replemu's "
                     f"{'--master' if args.master else '--remote'}")
    if args.protocol == "all" and not trigger.drains:
        return _fail("replemu: error: --protocol all runs the variants one after the other, so under a processing-time "
                     "trigger, which never ends, only the first would run; start one stream per variant (each with its "
                     "own --output and --checkpoint), or use --trigger available-now")
    workload = None
    if args.workload:
        if args.input or args.partitions is None or args.seed is None:
            return _fail("replemu: error: --workload needs --partitions and --seed, and no --input")
        profiles = load_profiles()
        if args.workload not in profiles:
            return _fail(f"replemu: error: unknown profile {args.workload[:80]!r} (known: {', '.join(profiles)})")
        if trigger.drains and args.max_steps is None:
            return _fail("replemu: error: a workload stream with --trigger available-now/once needs --max-steps")
        workload = workload_options(profiles[args.workload], args.seed, args.partitions, args.steps_per_batch, args.max_steps)
    else:
        for flag in ("partitions", "seed", "max_steps"):
            if getattr(args, flag) is not None:
                return _fail(f"replemu: error: --{flag.replace('_', '-')} goes with --workload")
        problem = _input_problem(args.input, trigger.drains)
        if problem:
            return _fail(f"replemu: error: {problem}")

    def claim(spark=None):
        """Lock the checkpoint and output, check the identity (CheckpointError when refused), say what runs."""
        args.shuffle_partitions = _shuffle_partitions(args, spark)
        identity = run_identity(protocol=args.protocol, knobs=args.knobs, input_dir=None if workload else args.input,
                                workload=workload, shuffle_partitions=args.shuffle_partitions,
                                state_store=args.state_store, compact_min_records=args.compact_min_records,
                                gap_timeout_ms=args.gap_timeout_ms)
        held = claim_run(args.checkpoint, args.output, identity, tuple(args.allow_change), spark=spark)
        for note in held.notes:
            print(f"replemu stream: {note}", flush=True)
        print(f"replemu stream: {args.shuffle_partitions} state partitions (spark.sql.shuffle.partitions, fixed for the "
              f"checkpoint's life)", flush=True)
        if workload is not None:
            print(f"workload: seed {args.seed}, profile {args.workload}, {args.partitions} partitions, "
                  f"{args.steps_per_batch} steps per partition per batch, max {args.max_steps or 'unbounded'}", flush=True)
        return held

    if args.remote is not None and remote_unreachable(args.remote):  # before the checkpoint is touched
        return _fail(f"replemu: {remote_unreachable(args.remote)}", status=EXIT_FAILED)
    if is_uri(args.checkpoint) or is_uri(args.output):  # a Hadoop filesystem: reached through the driver's JVM
        return _run_stream_queries(args, trigger, workload, claim=claim)
    try:
        held = claim()  # plain paths: checked and locked before Spark starts
    except CheckpointError as exc:
        return _fail(f"replemu: error: {exc}")
    with held:
        return _run_stream_queries(args, trigger, workload)


def _shuffle_partitions(args: argparse.Namespace, spark=None) -> int:
    """The checkpoint's state partitions: as recorded when it was created (a different
    --shuffle-partitions is then refused by the identity check), else --shuffle-partitions, else
    the cores of the master."""
    from streaming.checkpoint import CheckpointError, read_identity
    from streaming.session import master_cores, read_spark_conf
    from streaming.storage import StoreError, open_store

    try:
        doc = read_identity(open_store(args.checkpoint, spark))
    except StoreError as exc:
        raise CheckpointError(str(exc)) from None
    recorded = doc["identity"].get("shuffle_partitions") if doc else None
    if args.shuffle_partitions is not None or recorded is not None:
        return args.shuffle_partitions if args.shuffle_partitions is not None else int(recorded)
    if getattr(args, "remote", None) or "PYSPARK_GATEWAY_PORT" in os.environ:
        where = "through Spark Connect" if getattr(args, "remote", None) else "under spark-submit"
        raise CheckpointError(f"--checkpoint {args.checkpoint} is new and its number of state partitions is fixed for its "
                              f"life: give --shuffle-partitions N when starting it {where} (about 2-3x the cluster's cores)")
    master = args.master or read_spark_conf().get("spark.master", "local[*]")
    cores = master_cores(master)
    if cores is None:
        raise CheckpointError(f"--checkpoint {args.checkpoint} is new and its number of state partitions is fixed for its "
                              f"life: give --shuffle-partitions N for --master {master} (about 2-3x the cluster's cores)")
    return cores


def _graceful_stop():
    """SIGINT (Ctrl-C) or SIGTERM: finish the running micro-batch, then stop; a second one stops now.

    Returns the event the job watches and a function restoring the previous handlers."""
    import signal
    import threading

    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(f"replemu stream: {signal.Signals(signum).name}: stopping after the running micro-batch "
              f"(send it again to stop at once)", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    return stop, lambda: [signal.signal(sig, handler) for sig, handler in previous.items()]


def _run_stream_queries(args: argparse.Namespace, trigger, workload, claim=None) -> int:
    """Run the query (one per variant for --protocol all); ``claim`` (checkpoint or output on a
    Hadoop filesystem) locks them once Spark runs."""
    from expectations.suites import ExpectationsObserver
    from streaming.job import run_stream
    from streaming.session import SessionError, build_spark, describe_session

    protocols = list(VARIANT_NAMES) if args.protocol == "all" else [args.protocol]
    try:
        spark = build_spark(args.master, ui=not args.no_spark_ui, remote=args.remote)
    except SessionError as exc:
        return _fail(f"replemu: {exc}", status=EXIT_FAILED)
    print(f"replemu stream: {describe_session(spark)}", flush=True)
    stop, restore = _graceful_stop()
    held = None
    try:
        if claim is not None:
            from streaming.checkpoint import CheckpointError

            try:
                held = claim(spark)
            except CheckpointError as exc:
                return _fail(f"replemu: error: {exc}")
        for protocol in protocols:
            if stop.is_set():
                break
            output = join(args.output, protocol) if args.protocol == "all" else args.output
            checkpoint = join(args.checkpoint, protocol) if args.protocol == "all" else args.checkpoint
            print(f"replemu stream: {args.input or 'workload'} -> {output} (checkpoint {checkpoint}), protocol {protocol}", flush=True)
            try:
                stats = run_stream(args.input, output, checkpoint, protocol, trigger=trigger, workload=workload,
                                   max_files_per_trigger=args.max_files_per_trigger, gap_timeout_ms=args.gap_timeout_ms,
                                   spark=spark, compact_min_records=args.compact_min_records, observer=ExpectationsObserver(),
                                   knobs=args.knobs, state_store=args.state_store, stop=stop,
                                   shuffle_partitions=args.shuffle_partitions)
            except Exception as exc:  # the query failed: Spark's error, first lines only
                if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j", "grpc"):
                    raise
                text = str(exc).strip().splitlines()
                return _fail(f"replemu: the streaming query failed (protocol {protocol}): {text[0][:300] if text else type(exc).__name__}\n"
                             f"the checkpoint {checkpoint} holds every committed micro-batch; fix the cause and restart the same "
                             f"command to continue", status=EXIT_FAILED)
            print(f"{len(stats)} micro-batches; outputs under {output}/{{timeline,log,summary,violations,losses,errors,quarantine}}; "
                  f"read them with: replemu results {output}", flush=True)
            if stop.is_set():
                print(f"stopped: every committed micro-batch is in the checkpoint {args.checkpoint}; "
                      f"continue with the same command", flush=True)
    finally:
        if held is not None:
            held.release()
        restore()
        spark.stop()
    return EXIT_OK


def checkpoint_problem(path: str) -> str | None:
    """Why ``path`` is not a stream checkpoint with a committed micro-batch (None when it is)."""
    from pathlib import Path

    if is_uri(path):
        return None  # a Hadoop filesystem: Spark's statestore reader says what is wrong with it
    p = Path(path)
    if not p.is_dir():
        return f"{path}: {'is not a directory' if p.exists() else 'does not exist'}; give a --checkpoint directory of replemu stream"
    if not (p / "offsets").is_dir():
        per_variant = sorted(c.name for c in p.iterdir() if (c / "offsets").is_dir()) if os.access(p, os.R_OK | os.X_OK) else []
        if per_variant:
            return f"{path}: holds one checkpoint per variant ({', '.join(per_variant)}); give one of them, e.g. {p / per_variant[0]}"
        return f"{path}: not a stream checkpoint (no offsets/); give a --checkpoint directory of replemu stream"
    commits = p / "commits"
    if not commits.is_dir() or not any(c.name.isdigit() for c in commits.iterdir()):
        return f"{path}: the stream has not committed a micro-batch yet, so there is no state to show"
    return None


def cmd_state(args: argparse.Namespace) -> int:
    problem = checkpoint_problem(args.checkpoint)
    if problem:
        return _fail(f"replemu: error: {problem}")
    if args.master is not None:
        from streaming.session import master_problem

        if master_problem(args.master):
            return _fail(f"replemu: error: {master_problem(args.master)}")
    from streaming.job import read_partition_states
    from streaming.session import build_spark

    spark = build_spark(args.master)
    try:
        every = read_partition_states(spark, args.checkpoint)
    finally:
        spark.stop()
    states = [s for s in every if (args.topic is None or s["topic"] == args.topic) and (args.partition is None or s["partition"] == args.partition)]
    if not states and (args.topic is not None or args.partition is not None):
        known = [f"{s['topic']}/{s['partition']}" for s in every]
        return _fail(f"replemu: error: no partition matches --topic {args.topic} --partition {args.partition} "
                     f"in {args.checkpoint} (it holds {len(known)}: {short_list(known)})")
    print(dumps(states))
    return EXIT_OK


def cmd_dashboard(args: argparse.Namespace) -> int:
    from .dashboard import DashboardError, write_dashboard

    problem = _output_problem(args.output, "--output")
    if problem:
        return _fail(f"replemu: error: {problem}")
    try:
        page = write_dashboard(args.inputs, args.output, chosen=args.partition)
    except DashboardError as exc:
        return _fail(f"replemu: error: {exc}")
    print(f"wrote {page}")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import ServeError, serve

    try:
        port = int(args.port)
    except ValueError:
        return _fail(f"replemu: error: --port {args.port[:40]!r}: not an integer")
    try:
        return serve(args.output, host=args.host, port=port)
    except ServeError as exc:
        return _fail(f"replemu: error: {exc}")


def cmd_campaign(args: argparse.Namespace) -> int:
    from scenario_io.profiles import load_profiles

    from .campaign import describe_campaign, run_campaign

    profiles = load_profiles()
    if args.profile not in profiles:
        return _fail(f"replemu: error: unknown profile {args.profile[:80]!r} (known: {', '.join(profiles)})")
    problem = _output_problem(args.out, "--out")
    if problem:
        return _fail(f"replemu: error: {problem}")
    protocols = list(VARIANT_NAMES) if args.protocol == "all" else [args.protocol]
    header = describe_campaign(args.seed, profiles[args.profile], args.partitions, protocols, args.engine, args.knobs)
    print("\n".join(header), file=sys.stderr if args.json else sys.stdout, flush=True)
    report = run_campaign(args.seed, args.profile, args.partitions, protocols, args.out, engine=args.engine, knobs=args.knobs)
    if args.json:
        print(dumps(report))
        return EXIT_OK
    for protocol, r in report["protocols"].items():
        found = ", ".join(f"{k} {v}" for k, v in r["violations"].items()) or "no invariant violated"
        print(f"{protocol:7} {r['partitions']} partitions, {r['steps']} steps: {found}")
        for e in r["examples"]:
            print(f"        {e['invariant']} at step {e['step']} of partition {e['partition']}: "
                  f"replemu run {e['scenario_file']} --protocol {protocol}")
    return EXIT_OK


def cmd_shrink(args: argparse.Namespace) -> int:
    from pathlib import Path

    from emulator.invariants import INVARIANT_NAMES
    from emulator.workload import generate_scenario
    from scenario_io.profiles import load_profiles
    from scenario_io.yaml_files import scenario_document, write_scenario

    from .campaign import shrink

    if args.invariant not in INVARIANT_NAMES:
        return _fail(f"replemu: error: unknown invariant {args.invariant!r} (known: {', '.join(INVARIANT_NAMES)})")
    if (args.file is None) == (args.from_campaign is None):
        return _fail("replemu: error: give a scenario FILE or --from-campaign SEED/PROFILE/PARTITION")
    problem = _output_problem(args.out, "--out", file=True) if args.out else None
    if problem:
        return _fail(f"replemu: error: {problem}")
    try:
        if args.file:
            scenario = load_scenario(args.file)
            target = Path(args.out or Path(args.file).with_name(f"{Path(args.file).stem}-shrunk.yaml"))
        else:
            seed, profile, partition = args.from_campaign.split("/")
            scenario = generate_scenario(int(seed), int(partition), load_profiles()[profile])
            target = Path(args.out or f"out/shrunk/campaign-{seed}-{profile}-p{partition}-{args.protocol}-{args.invariant}.yaml")
    except ScenarioError as exc:
        return _fail(f"replemu: invalid scenario: {exc}")
    except (ValueError, KeyError) as exc:
        return _fail(f"replemu: error: --from-campaign wants SEED/PROFILE/PARTITION: {exc}")
    if args.knobs:  # the shrunk file carries them, so it replays with plain `replemu run --check`
        from dataclasses import replace

        scenario = replace(scenario, config=replace(scenario.config, knobs=tuple(sorted({**dict(scenario.config.knobs), **args.knobs}.items()))))
    try:
        small = shrink(scenario, args.protocol, args.invariant, log=lambda m: print(m, file=sys.stderr))
    except ValueError as exc:
        return _fail(f"replemu: error: {exc}")
    # The expectation lists everything the shrunk scenario breaks (``--check`` is exact over the
    # verdict invariants, which may break alongside the one asked for).
    from scenario_io.kafka_logs import seeder_for

    found = [v["invariant"] for v in run_scenario(small, args.protocol, prepare=seeder_for(small.initial_state))["violations"]]
    doc = scenario_document(
        small, f"{args.invariant} under {args.protocol}, shrunk from {scenario.source} ({len(scenario.steps)} steps)",
        expect={args.protocol: {"violations": found}},
    )
    doc["name"] = f"{scenario.name}-shrunk"
    write_scenario(doc, target)
    print(f"{len(scenario.steps)} -> {len(small.steps)} steps; wrote {target}; replay: replemu run {target} --protocol {args.protocol}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    import json

    from emulator.result import ResultFormatError, check_result_document
    from scenario_io.kafka_logs import export_result

    try:
        data = json.loads(open(args.result, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        return _fail(f"replemu: error: {args.result}: not a readable result JSON file ({exc})")
    try:
        results = check_result_document(data, args.result)
    except ResultFormatError as exc:
        return _fail(f"replemu: error: {exc}")
    from pathlib import Path

    problem = _output_problem(args.to, "--to")
    if problem:
        return _fail(f"replemu: error: {problem}")
    for r in results:
        target = Path(args.to) if len(results) == 1 else Path(args.to) / f"{r['scenario']}-{r['protocol']}"
        for d in export_result(r, target):
            print(f"wrote {d}")
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    """Every replica as Kafka's log recovery would load it, its findings under it, then where
    the replicas diverge.  Findings are results (exit 0); a path that is not a readable replica
    directory is an error (exit 2, one line)."""
    from scenario_io.kafka_logs import (HW_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, ReplicaDirError, divergence,
                                        find_replica_dirs, read_replica_dir, truncation_outcomes)

    try:
        reps = [read_replica_dir(d, recover=True) for root in args.dirs for d in find_replica_dirs(root)]
    except ReplicaDirError as exc:
        return _fail(f"replemu: error: {exc}")
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


def cmd_results(args: argparse.Namespace) -> int:
    from streaming.results import ResultsError, read_results, summary_text

    try:
        if args.json:
            print(dumps(read_results(args.output)))
        else:
            print(summary_text(args.output))
    except ResultsError as exc:
        return _fail(f"replemu: error: {exc}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    try:
        scenarios = [load_scenario(path) for path in args.files]  # validate everything first
        initial: list = [None] * len(scenarios)  # seeders of replica files, read once, checked against the replicas
        if args.from_dirs or any(s.initial_state for s in scenarios):
            from emulator import Replay, variant_named
            from scenario_io.kafka_logs import seeder_for

            for i, s in enumerate(scenarios):
                try:
                    initial[i] = seeder_for(s.initial_state, args.from_dirs)
                    if initial[i]:
                        initial[i](Replay(s.replicas, s.config, variant_named("kip320")))  # checks the broker ids
                except ScenarioError:
                    raise
                except ValueError as exc:  # ReplicaDirError
                    return _fail(f"replemu: invalid initial state of {s.source}: {exc}")
    except ScenarioError as exc:
        return _fail(f"replemu: invalid scenario: {exc}")
    protocols = list(VARIANT_NAMES) if args.protocol == "all" else [args.protocol]
    human = not args.json
    results, failures = [], []
    for scenario, files in zip(scenarios, initial):
        for protocol in protocols:
            wants_trace = args.check and "at_step" in (scenario.expect.get(protocol) or {})
            result = run_scenario(scenario, protocol, trace=args.trace or wants_trace or (human and not args.summary),
                                  prepare=files, knobs=args.knobs)
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
    import json
    from pathlib import Path

    from emulator.explore import Bounds, Reduction
    from emulator.invariants import INVARIANT_NAMES
    from emulator.levels import WorkDirError

    from .explore import KEY_BYTES_IN_MEMORY, Request, choose_engine, default_workers, explore, parse_alphabet

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
        return _fail(f"replemu: error: {exc}")
    problem = _output_problem(args.out, "--out")
    if problem:
        return _fail(f"replemu: error: {problem}")
    engine = choose_engine(args.engine)
    if args.master and engine != "spark":
        return _fail("replemu: error: --master needs --engine spark")
    if args.workers and engine != "local":
        return _fail("replemu: error: --workers is for --engine local (Spark uses its executors)")
    if args.memory and engine != "local":
        return _fail("replemu: error: --memory is for --engine local (Spark keeps its visited set on disk)")
    if reduce.names and engine != "local":
        return _fail("replemu: error: --reduce is for --engine local (the Spark engine searches without reductions)")
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
        return _fail(f"replemu: error: {exc}")
    finally:
        if spark is not None:
            if stop.is_set():  # let the cancelled tasks wind down: stopping under them makes the JVM print errors
                import time

                tracker, waited = spark.sparkContext.statusTracker(), 0.0
                while (tracker.getActiveJobsIds() or tracker.getActiveStageIds()) and waited < 15:
                    time.sleep(0.25)
                    waited += 0.25
                time.sleep(1)
            spark.stop()
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else {"format": 1, "protocol": "all", "runs": results}, indent=1))
    return EXIT_OK


def cmd_steps(args: argparse.Namespace) -> int:
    from emulator.steps import steps_markdown

    print(steps_markdown(), end="")
    return EXIT_OK


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
    if hasattr(args, "knob"):
        try:
            args.knobs = parse_knob_assignments(args.knob)
        except KnobError as exc:
            return _fail(f"replemu: error: {exc}")
    commands = {"run": cmd_run, "compile": cmd_compile, "stream": cmd_stream, "state": cmd_state, "results": cmd_results,
                "dashboard": cmd_dashboard, "serve": cmd_serve, "campaign": cmd_campaign, "shrink": cmd_shrink, "export": cmd_export,
                "inspect": cmd_inspect, "steps": cmd_steps, "explore": cmd_explore}
    try:
        return commands[args.command](args)
    except (BrokenPipeError, KeyboardInterrupt):
        raise
    except OSError as exc:  # a file the arguments named could not be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"replemu: error: {where}{exc.strerror or exc}")
    except Exception as exc:  # a bug: one line, not a traceback (REPLEMU_DEBUG=1 shows it)
        if os.environ.get("REPLEMU_DEBUG"):
            raise
        return _fail(f"replemu: internal error ({type(exc).__name__}: {str(exc)[:300]}); this is a bug in replemu, "
                     f"rerun with REPLEMU_DEBUG=1 for the traceback", status=EXIT_FAILED)


def entry() -> None:
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `replemu run ... | head`
        sys.exit(EXIT_OK)
    except KeyboardInterrupt:
        print("replemu: interrupted", file=sys.stderr)
        sys.exit(130)
