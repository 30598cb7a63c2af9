"""``replemu stream``, ``replemu state`` and ``replemu results``: the Spark Structured Streaming
job as a command (docs/cluster.md).

The job itself is the ``streaming`` package (``streaming.job.run_stream``: the query, its sink
and its checkpoint); this module is the application around it: every argument checked before
Spark starts (a typo costs no JVM), the checkpoint and output claimed and their identity
checked, one query per variant for ``--protocol all``, SIGINT/SIGTERM finishing the running
micro-batch, and Spark's failures told in one line.  ``state`` reads partitions' state back
from a checkpoint, ``results`` a stream's outputs.  Spark is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

from emulator import dumps
from emulator.bounds import short_list
from emulator.families import family_named, family_of_protocol
from emulator.family import Family
from emulator.partition_family import PARTITION
from emulator.quorum.family import QUORUM
from streaming.progress import counted
from streaming.storage import is_uri, join

from .cli_common import EXIT_FAILED, EXIT_OK, fail


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


def stream_family(args: argparse.Namespace) -> Family:
    """The protocol family the stream runs: ``--protocol``'s; for ``all``, the input's (the
    metadata quorum's for compiled quorum scenarios, ``args.quorum_all``), else the partition family."""
    if args.protocol != "all":
        family = family_of_protocol(args.protocol)
        if family is None:
            raise ValueError(f"unknown protocol {args.protocol!r}")
        return family
    return QUORUM if getattr(args, "quorum_all", False) else PARTITION


def _family_problem(args: argparse.Namespace) -> str | None:
    """A metadata-quorum protocol takes quorum knobs only and no workload, a partition protocol
    partition knobs only (docs/quorum.md "Streaming"); for a quorum protocol ``args.knobs``
    becomes the quorum knobs (what the job and the checkpoint's identity see)."""
    quorum_knobs = getattr(args, "quorum_knobs", None) or {}
    family = stream_family(args)
    if family is QUORUM:
        if args.knobs:
            which = (f"--protocol {args.protocol} is a {family.title} protocol" if args.protocol != "all" else
                     f"--input {args.input} holds {family.title} events (--protocol all: every {family.name} preset)")
            return f"--knob {next(iter(args.knobs))} is a {PARTITION.title} knob; {which} (its knobs: {family.docs})"
        args.knobs = dict(quorum_knobs)
    elif quorum_knobs:
        return (f"--knob {next(iter(quorum_knobs))} is a {QUORUM.title} knob; --protocol {args.protocol} is a "
                f"{family.title} protocol ({QUORUM.name} protocols: {', '.join(QUORUM.variant_names())})")
    if args.workload and not family.stream_ticks:
        return (f"--workload generates {PARTITION.title} events; --protocol {args.protocol} streams compiled "
                f"{family.title} scenarios (replemu compile FILE --out DIR, then --input DIR)")
    return None


def _input_family_problem(path: str, protocol: str) -> str | None:
    """Why ``--input``'s events cannot run under ``protocol``: events of another family (told by
    the first header row, ``streaming.files.input_family``); ``all`` is every variant of the
    input's family, as for ``replemu run``."""
    if is_uri(path) or protocol == "all":
        return None  # a URI is read by Spark only: a header of the other family is quarantined there
    from streaming.files import input_family

    name, where = input_family(path)
    wanted = family_of_protocol(protocol)
    if name is None or wanted is None or name == wanted.name:
        return None
    found = family_named(name)
    return (f"--input {path}: {where} holds {found.title} events (a {found.stream_header_type!r} header row); "
            f"--protocol {protocol} is a {wanted.title} protocol: stream them with a {found.title} protocol "
            f"({', '.join(found.variant_names())}, all)")


def _input_family(path: str) -> str | None:
    from streaming.files import input_family

    return input_family(path)[0]


def all_protocols(args: argparse.Namespace) -> list[str]:
    """The variants a stream runs: ``--protocol``'s, or for ``all`` every one of the input's family."""
    if args.protocol != "all":
        return [args.protocol]
    return list(stream_family(args).variant_names())


def cmd_stream(args: argparse.Namespace) -> int:
    from scenario_io.profiles import load_profiles
    from streaming.checkpoint import CheckpointError, claim_run, run_identity
    from streaming.session import master_problem, remote_problem, remote_unreachable
    from streaming.triggers import TriggerError, parse_trigger
    from streaming.workload_source import WorkloadSpec

    # Everything is checked before Spark starts: a typo costs no JVM.
    try:
        trigger = parse_trigger(args.trigger)
    except TriggerError as exc:
        return fail(f"replemu: error: {exc}")
    from streaming.compaction import parse_retain

    try:
        args.retention = parse_retain(args.retain)
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    # --protocol all: every variant of the input's family (the metadata quorum's presets for
    # compiled quorum scenarios), as replemu run does for a file
    args.quorum_all = (args.protocol == "all" and bool(args.input) and not args.workload and not is_uri(args.input)
                       and _input_family(args.input) == "quorum")
    problem = _family_problem(args)
    if problem:
        return fail(f"replemu: error: {problem}")
    from streaming.processor import stream_protocol

    try:  # --protocol and --knob as the job runs them: (family, variant, knobs), once per variant
        streams = [stream_protocol(protocol, args.knobs) for protocol in all_protocols(args)]
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    from streaming.operators import state_store_for

    try:  # the operator's state store: transformWithState runs on RocksDB only
        args.state_store = state_store_for(args.operator, args.state_store)
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    if args.master is not None and master_problem(args.master):
        return fail(f"replemu: error: {master_problem(args.master)}")
    if args.remote is not None and remote_problem(args.remote):
        return fail(f"replemu: error: {remote_problem(args.remote)}")
    if args.remote is not None and args.master is not None:
        return fail("replemu: error: give --master (a driver here) or --remote (a Spark Connect server), not both")
    if "PYSPARK_GATEWAY_PORT" in os.environ and (args.master or args.remote):
        return fail("replemu: error: under spark-submit the master is spark-submit's --master: drop replemu's "
                    f"{'--master' if args.master else '--remote'}")
    if args.protocol == "all" and not trigger.drains:
        return fail("replemu: error: --protocol all runs the variants one after the other, so under a processing-time "
                    "trigger, which never ends, only the first would run; start one stream per variant (each with its "
                    "own --output and --checkpoint), or use --trigger available-now")
    workload = None
    if args.workload:
        from .cli_common import DEFAULT_SEED

        if args.input or args.partitions is None:
            return fail("replemu: error: --workload needs --partitions, and no --input")
        profiles = load_profiles()
        if args.workload not in profiles:
            return fail(f"replemu: error: unknown profile {args.workload[:80]!r} (known: {', '.join(profiles)})")
        if args.seed is None:
            args.seed = DEFAULT_SEED
        if trigger.drains and args.max_steps is None:  # the profile's longest partition, as a campaign draws it
            args.max_steps = profiles[args.workload].steps[1]
        workload = WorkloadSpec.of(profiles[args.workload], args.seed, args.partitions, args.steps_per_batch, args.max_steps)
    else:
        for flag in ("partitions", "seed", "max_steps"):
            if getattr(args, flag) is not None:
                return fail(f"replemu: error: --{flag.replace('_', '-')} goes with --workload")
        problem = _input_problem(args.input, trigger.drains) or _input_family_problem(args.input, args.protocol)
        if problem:
            return fail(f"replemu: error: {problem}")

    def claim(spark=None):
        """Lock the checkpoint and output, check the identity (CheckpointError when refused), say what runs."""
        args.shuffle_partitions = _shuffle_partitions(args, spark)
        identity = run_identity(protocol=args.protocol, knobs=args.knobs, input_dir=None if workload else args.input,
                                workload=workload, shuffle_partitions=args.shuffle_partitions,
                                state_store=args.state_store, compact_min_records=args.compact_min_records,
                                gap_timeout_ms=args.gap_timeout_ms, operator=args.operator)
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
        return fail(f"replemu: {remote_unreachable(args.remote)}", status=EXIT_FAILED)
    if is_uri(args.checkpoint) or is_uri(args.output):  # a Hadoop filesystem: reached through the driver's JVM
        return _run_stream_queries(args, streams, trigger, workload, claim=claim)
    try:
        held = claim()  # plain paths: checked and locked before Spark starts
    except CheckpointError as exc:
        return fail(f"replemu: error: {exc}")
    with held:
        return _run_stream_queries(args, streams, trigger, workload)


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


class _Stop(threading.Event):
    """Set by the first Ctrl-C; ``at_once`` by the second."""

    at_once = False


def _graceful_stop():
    """SIGINT (Ctrl-C) or SIGTERM: finish the running micro-batch, then stop; a second one stops now.

    Returns the event the job watches and a function restoring the previous handlers."""
    import signal

    stop = _Stop()

    def on_signal(signum, frame) -> None:
        if stop.is_set():
            stop.at_once = True  # what py4j makes of the interrupt (a Py4JError) is this, not a failure
            raise KeyboardInterrupt
        stop.set()
        print(f"replemu stream: {signal.Signals(signum).name}: stopping after the running micro-batch "
              f"(send it again to stop at once)", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    return stop, lambda: [signal.signal(sig, handler) for sig, handler in previous.items()]


def _import_aside(*modules: str) -> None:
    """Import ``modules`` in a thread of their own: Great Expectations takes seconds to import,
    which this process would otherwise spend after Spark started, waiting on nothing else.  While
    Spark starts, this process waits on the JVM, so the import costs no wall time.  A failed
    import is not reported here: the first use imports again and reports it."""
    import importlib
    import threading

    import pandas  # noqa: F401 - what both threads use is imported here first: the thread imports only
    import pyarrow  # noqa: F401   modules of its own, so no import waits on one the other holds

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the import where the module is used tells
                return

    threading.Thread(target=load, name="replemu-import-aside", daemon=True).start()


def _written_kinds(output: str, spark) -> str:
    """``{timeline,log,summary,...}``: the output kinds the run wrote (a kind with no row, such as an
    empty quarantine, has no folder); every kind when the output cannot be listed from here (a
    path on a Spark Connect server)."""
    from streaming.schemas import OUTPUT_KINDS
    from streaming.storage import open_store

    try:
        present = set(open_store(output, spark).list())
    except Exception:  # noqa: BLE001  (a listing is only for this line)
        present = set()
    kinds = [k for k in OUTPUT_KINDS if k in present] or list(OUTPUT_KINDS)
    return "{" + ",".join(kinds) + "}" if len(kinds) > 1 else kinds[0]


def _run_stream_queries(args: argparse.Namespace, streams: list, trigger, workload, claim=None) -> int:
    """Run the query (one per variant for --protocol all: ``streams``, each a
    ``streaming.processor.StreamProtocol``); ``claim`` (checkpoint or output on a Hadoop
    filesystem) locks them once Spark runs."""
    import warnings

    from expectations.suites import ExpectationsObserver
    from streaming import jvm_output
    from streaming.job import run_stream
    from streaming.session import SessionError, build_spark, describe_session, stop_session

    _import_aside("great_expectations.expectations", "great_expectations.data_context")  # while the JVM starts
    debug = bool(os.environ.get("REPLEMU_DEBUG"))
    shown = warnings.showwarning
    jvm_output.hold_until_log(echo=debug)  # the JVM's chatter goes to the log, once the run is claimed
    try:
        spark = build_spark(args.master, ui=not args.no_spark_ui, remote=args.remote)
    except SessionError as exc:
        jvm_output.log_to(None)
        return fail(f"replemu: {exc}", status=EXIT_FAILED)
    print(f"replemu stream: {describe_session(spark)}", flush=True)
    stop, restore = _graceful_stop()
    held = None
    try:
        if claim is not None:
            from streaming.checkpoint import CheckpointError

            try:
                held = claim(spark)
            except CheckpointError as exc:
                jvm_output.log_to(None)
                return fail(f"replemu: error: {exc}")
        log = jvm_output.LogFile(log_path(args.output))
        jvm_output.log_to(log, echo=debug)
        if not debug:  # pyspark's warnings (a Connect listener it could not remove...) belong with the traces
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: log.write(
                warnings.formatwarning(message, category, filename, lineno, line))
        for resolved in streams:
            if stop.is_set():
                break
            protocol = resolved.name
            output = join(args.output, protocol) if args.protocol == "all" else args.output
            checkpoint = join(args.checkpoint, protocol) if args.protocol == "all" else args.checkpoint
            print(f"replemu stream: {args.input or 'workload'} -> {output} (checkpoint {checkpoint}), protocol {protocol}", flush=True)
            try:
                stats = run_stream(args.input, output, checkpoint, resolved, trigger=trigger, workload=workload,
                                   max_files_per_trigger=args.max_files_per_trigger, gap_timeout_ms=args.gap_timeout_ms,
                                   spark=spark, compact_min_records=args.compact_min_records,
                                   observer=ExpectationsObserver(family=resolved.family.name), state_store=args.state_store, stop=stop,
                                   shuffle_partitions=args.shuffle_partitions, operator=args.operator,
                                   **({"retention": args.retention} if args.retention else {}))
            except Exception as exc:  # the query failed: one line for the cause, every trace in the log
                if stop.at_once:  # a second Ctrl-C, interrupting a py4j call
                    raise KeyboardInterrupt from None
                if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j", "grpc") and not isinstance(exc, OSError):
                    raise
                from streaming.failures import explain, failure_text

                text = failure_text(exc)
                log.write(f"replemu: the streaming query failed (protocol {protocol}):\n{text}\n")
                if debug:
                    print(text, file=sys.stderr)
                lines = explain(text if not isinstance(exc, OSError) else exc).lines(
                    protocol, checkpoint, output, None if log.lost else str(log.path))
                if log.lost:  # the output's disk is full: the traces go where there is room
                    import tempfile

                    spare = jvm_output.LogFile(Path(tempfile.gettempdir()) / "replemu-logs" / f"failed-{os.getpid()}.log")
                    spare.write(f"replemu: the streaming query failed (protocol {protocol}):\n{text}\n")
                    lines.append(f"replemu: the log {log.path} could not be written; every trace is in "
                                 f"{spare.path if not spare.lost else 'no file either (REPLEMU_DEBUG=1 prints them)'}")
                return fail("\n".join(lines), status=EXIT_FAILED)
            print(f"{counted(len(stats), 'micro-batch', 'micro-batches')}; outputs under {output}/{_written_kinds(output, spark)}; "
                  f"read them with: replemu results {output}", flush=True)
            if stop.is_set():
                print(f"stopped: every committed micro-batch is in the checkpoint {args.checkpoint}; "
                      f"continue with the same command", flush=True)
    finally:
        if held is not None:
            held.release()
        restore()
        stop_session(spark)
        warnings.showwarning = shown
        jvm_output.log_to(None)  # what the JVM says from here on (nothing, normally) goes to the terminal
    return EXIT_OK


LOG_FILE = "replemu.log"


def log_path(output: str):
    """The job's log: ``OUTPUT/logs/replemu.log`` (rotated: ``.1`` … ``.3``); for an output on a
    Hadoop filesystem, a local folder named after it under the temporary directory."""
    import re
    import tempfile
    from pathlib import Path

    if is_uri(output):
        return Path(tempfile.gettempdir()) / "replemu-logs" / re.sub(r"[^A-Za-z0-9._-]+", "_", output) / LOG_FILE
    return Path(output) / "logs" / LOG_FILE


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
        return fail(f"replemu: error: {problem}")
    if args.master is not None:
        from streaming.session import master_problem

        if master_problem(args.master):
            return fail(f"replemu: error: {master_problem(args.master)}")
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
        return fail(f"replemu: error: no partition matches --topic {args.topic} --partition {args.partition} "
                    f"in {args.checkpoint} (it holds {len(known)}: {short_list(known)})")
    print(dumps(states))
    return EXIT_OK


def cmd_results(args: argparse.Namespace) -> int:
    from streaming.results import ResultsError, read_results, summary_text

    try:
        if args.json:
            print(dumps(read_results(args.output)))
        else:
            print(summary_text(args.output))
    except ResultsError as exc:
        return fail(f"replemu: error: {exc}")
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    """``replemu compact OUTPUT``: what a running stream does after each micro-batch
    (``streaming.compaction``), with pyarrow, for an output no job is writing (its lock is taken)."""
    from streaming.checkpoint import CheckpointError, lock_directory
    from streaming.compaction import (
        CompactionPolicy,
        compaction_text,
        file_count,
        maybe_compact,
        parse_retain,
    )
    from streaming.output_layout import LayoutError, all_units
    from streaming.results import local_output_problem
    from streaming.storage import LocalStore

    try:
        policy = CompactionPolicy(keep_recent=args.keep_recent, retain=parse_retain(args.retain))
    except ValueError as exc:
        return fail(f"replemu: error: {exc}")
    if local_output_problem(args.output):
        return fail(f"replemu: error: {local_output_problem(args.output)}")
    out = Path(args.output)
    if not (out / "run.json").is_file():
        return fail(f"replemu: error: {out}: not a replemu stream output directory (no run.json)")
    store = LocalStore(out)
    try:
        newest = max((u.last for kind in store.list() for u in all_units(store, kind)), default=None)
    except LayoutError as exc:
        return fail(f"replemu: error: {exc}")
    if newest is None:
        print(f"{out}: no micro-batches")
        return EXIT_OK
    try:
        claim = lock_directory(out, "output directory")
    except CheckpointError as exc:
        return fail(f"replemu: error: {exc}")
    try:
        before = file_count(out)
        report = maybe_compact(store, None, newest, policy)
        after = file_count(out)
    except LayoutError as exc:
        return fail(f"replemu: error: {exc}")
    finally:
        claim.release()
    print(f"{out}: newest micro-batch {newest}; {compaction_text(report)}; files {before['files']:,} -> {after['files']:,}, "
          f"directories {before['dirs']:,} -> {after['dirs']:,}")
    return EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    """``replemu checkpoint check CK`` (exit 0 whole, 1 not) and ``replemu checkpoint repair CK``
    (exit 0 whole afterwards, 1 when a problem is left that a roll-back cannot mend): see
    streaming/checkpoint_check.py.  A local path is read without Spark; a Hadoop URI through the
    driver's JVM."""
    import json

    from streaming.checkpoint import CheckpointError
    from streaming.checkpoint_check import (
        apply_repair,
        format_plan,
        format_report,
        inspect_checkpoint,
        plan_repair,
        report_dict,
        utc_stamp,
    )
    from streaming.storage import StoreError, open_store

    from .cli_common import EXIT_CHECK_FAILED

    if not is_uri(args.checkpoint):
        from pathlib import Path

        p = Path(args.checkpoint)
        if not p.is_dir():
            return fail(f"replemu: error: {p}: {'is not a directory' if p.exists() else 'does not exist'}; give a "
                        f"--checkpoint directory of replemu stream")
        if not any((p / name).exists() for name in ("offsets", "commits", "metadata", "state")):
            per_variant = sorted(c.name for c in p.iterdir() if (c / "offsets").is_dir())
            if per_variant:
                return fail(f"replemu: error: {p}: holds one checkpoint per variant ({', '.join(per_variant)}); give "
                            f"one of them, e.g. {p / per_variant[0]}")
            return fail(f"replemu: error: {p}: not a stream checkpoint (no offsets/, commits/, metadata or state/)")
    spark = None
    try:
        if is_uri(args.checkpoint):
            from streaming.session import build_spark

            spark = build_spark(None)
        store = open_store(args.checkpoint, spark)
        try:
            report = inspect_checkpoint(store, full=getattr(args, "full", False))
        except StoreError as exc:
            return fail(f"replemu: error: {exc}")
        if args.action == "check":
            print(json.dumps(report_dict(report), indent=2) if args.json else format_report(report), end="\n" if args.json else "")
            return EXIT_OK if report.whole else EXIT_CHECK_FAILED
        plan = plan_repair(report)
        if not plan.changes or args.dry_run:
            print(format_plan(plan), end="")
            return EXIT_OK if not plan.unrepaired else EXIT_CHECK_FAILED
        try:
            folder = apply_repair(plan, store, utc_stamp())
        except CheckpointError as exc:
            return fail(f"replemu: error: {exc}")
        print(format_plan(plan, folder, done=True), end="")
        return EXIT_OK if not plan.unrepaired else EXIT_CHECK_FAILED
    finally:
        if spark is not None:
            spark.stop()
