"""``replemu``: the command line (docs/ has the user guide; ``replemu COMMAND --help``).

    replemu run FILE [FILE...] --protocol VARIANT|all [--json] [--trace] [--check]

(the variants: ``emulator.VARIANT_NAMES`` and ``QUORUM_VARIANT_NAMES``; ``replemu --help`` lists them)

A FILE may also be a bundled scenario's name (``replemu scenarios`` lists them; replemu/bundled.py).

Exit status: 0 the run completed (whatever it found); 1 ``--check`` disagreed with an
``expect`` block; 2 invalid scenario, input or arguments (a one-line message naming the file,
step or argument; nothing is replayed or written); 3 the job itself failed (a Spark query, or a
bug: the message says which; ``REPLEMU_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

import emulator
from emulator import VARIANT_NAMES
from emulator.quorum.variants import QUORUM_KNOB_TABLE, QUORUM_KNOBS, QUORUM_VARIANT_NAMES
from emulator.variants import KNOB_TABLE, KNOBS, KnobError
from streaming.checkpoint import CHANGEABLE_IDENTITY
from streaming.operators import DEFAULT_OPERATOR, OPERATOR_NAMES, STATEFUL_OPERATORS
from streaming.session import SessionError
from streaming.triggers import TRIGGER_HELP

from .cli_common import (  # noqa: F401  (every status)
    DEFAULT_PARTITIONS,
    DEFAULT_PROFILE,
    DEFAULT_SEED,
    EXIT_CHECK_FAILED,
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    fail,
)


class _Parser(argparse.ArgumentParser):
    # Options argparse cannot require because a case of the command does without them (explore's
    # --depth: required for partition protocols, not for quorum ones): shown in the usage without
    # brackets all the same, as a user must give them in the usual case.
    required_in_usage: tuple[str, ...] = ()

    def error(self, message: str) -> None:  # argparse's own exit status is 2 as well
        self.print_usage(sys.stderr)
        print(f"replemu: error: {message}", file=sys.stderr)
        sys.exit(EXIT_INVALID)

    def _unbracket(self, text: str) -> str:
        for shown in self.required_in_usage:
            text = text.replace(f"[{shown}]", shown)
        return text

    def format_usage(self) -> str:
        return self._unbracket(super().format_usage())

    def format_help(self) -> str:
        return self._unbracket(super().format_help())


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


def _registered() -> tuple[str, ...]:
    """The presets of the families registered beside the two of replemu (``emulator.families.register``:
    a plug-in's, a test's toy family), which ``--protocol`` accepts too."""
    from emulator.families import all_protocol_names

    return tuple(p for p in all_protocol_names() if p not in VARIANT_NAMES + QUORUM_VARIANT_NAMES)


def build_parser() -> argparse.ArgumentParser:
    more = _registered()  # the presets of registered families beside replemu's two (once per parser)
    parser = _Parser(prog="replemu", description="Kafka replication emulator: scenarios replayed under the partition "
                     f"protocol variants ({', '.join(VARIANT_NAMES)}) and the metadata-quorum presets "
                     f"({', '.join(QUORUM_VARIANT_NAMES)}). Docs in the source tree: README.md, then docs/ "
                     "(docs/run.md, docs/protocol.md, docs/scenario-format.md, docs/steps.md).")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and which build of the core runs (compiled with mypyc, or pure Python)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="replay scenario files under one or all protocol variants")
    run.add_argument("files", nargs="+", metavar="FILE", help=f"scenario YAML files {NAMES_TOO}")
    run.add_argument("--protocol", default="all", choices=VARIANT_NAMES + QUORUM_VARIANT_NAMES + more + ("all",),
                     help="variant to replay (default: all of the scenario's family; a file naming 'voters' is a "
                          f"metadata-quorum scenario: {', '.join(QUORUM_VARIANT_NAMES)}, docs/quorum.md)")
    run.add_argument("--json", action="store_true", help="print the contract's result object(s) as JSON")
    run.add_argument("--trace", action="store_true", help="add a per-step trace to the JSON")
    run.add_argument("--check", action="store_true", help="compare with each file's expect block; exit 1 on disagreement")
    run.add_argument("--summary", action="store_true", help="human output: verdict lines and the matrix only")
    run.add_argument("--from-dirs", nargs="+", metavar="DIR", help="start from Kafka replica directories (replemu export / real brokers)")
    _add_knob(run)

    exp = sub.add_parser("export", help="write a result's replicas as Kafka log directories")
    exp.add_argument("result", metavar="RESULT.json", help="the JSON of replemu run --json (one result or an array; "
                     "a variant's not_expressible result is skipped)")
    exp.add_argument("--to", required=True, metavar="DIR", help="where the brokers' log directories go "
                     "(DIR/broker-<id>/<topic>-0; DIR/<scenario>-<protocol>/... for several results)")

    ins = sub.add_parser("inspect", help="read Kafka replica directories and find where they diverge")
    ins.add_argument("dirs", nargs="+", metavar="DIR", help="replica directories (<topic>-<partition>, as Kafka writes "
                     "them, or replemu export's DIR), or folders holding them")

    comp = sub.add_parser("compile", help="turn scenario files into event files for the streaming job")
    comp.add_argument("files", nargs="+", metavar="SCENARIO", help=f"scenario YAML files {NAMES_TOO}")
    comp.add_argument("--out", required=True, metavar="DIR", help="where the event files go (replemu stream --input DIR)")
    comp.add_argument("--split", type=_int_between(1, 10_000), default=1, metavar="N", help="split every partition's rows over N files")
    comp.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", help="event file format (default jsonl)")

    stream = sub.add_parser("stream", help="run the Spark Structured Streaming job")
    stream.add_argument("--input", metavar="DIR", help="event files (or use --workload)")
    stream.add_argument("--workload", metavar="PROFILE", help="generated events of a conf/workloads.yaml profile, no input files")
    stream.add_argument("--partitions", type=_partitions, metavar="N", help="with --workload: generated partitions")
    stream.add_argument("--seed", type=_seed, metavar="S", help=f"with --workload: the root seed (default {DEFAULT_SEED}, as "
                        "replemu campaign's)")
    stream.add_argument("--steps-per-batch", type=_positive, default=20, metavar="K", help="with --workload: steps of every partition per micro-batch")
    stream.add_argument("--max-steps", type=_steps, metavar="M",
                        help="with --workload: stop after M steps per partition (with available-now, default: the "
                             "profile's longest partition, its largest 'steps' in conf/workloads.yaml)")
    stream.add_argument("--output", required=True, metavar="DIR", help="where the job's output tables go (read them with "
                        "replemu results, serve or dashboard)")
    stream.add_argument("--checkpoint", required=True, metavar="DIR", help="Spark's checkpoint: the same DIR continues "
                        "the run after a stop (docs/checkpoints.md)")
    stream.add_argument("--protocol", default="all", choices=VARIANT_NAMES + ("all",) + QUORUM_VARIANT_NAMES + more,
                        help="variant (default: all, as replemu run); 'all' runs one query per variant of the input's family "
                             f"(the partition variants; the metadata-quorum presets for compiled quorum scenarios) into "
                             f"OUTPUT/<variant> and CHECKPOINT/<variant>; a metadata-quorum protocol ({', '.join(QUORUM_VARIANT_NAMES)}) "
                             "streams compiled quorum scenarios (docs/quorum.md)")
    stream.add_argument("--trigger", default="available-now", help=TRIGGER_HELP)
    stream.add_argument("--max-files-per-trigger", type=_positive, default=None, metavar="N",
                        help="with --input: read at most N event files per micro-batch (default: all new files)")
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
                             "last compaction (default 256, with --workload 64: the state keeps a window, the outputs keep the history)")
    stream.add_argument("--state-store", choices=("hdfs", "rocksdb"), default=None,
                        help="Spark's state store provider, fixed when the checkpoint is created (default: Spark's, hdfs; "
                             "rocksdb for --operator transformWithState, which runs on nothing else)")
    stream.add_argument("--operator", choices=OPERATOR_NAMES, default=DEFAULT_OPERATOR,
                        help="Spark's stateful operator the state function runs under, fixed when the checkpoint is "
                             "created: " + "; ".join(f"{o.name}: {o.doc}" for o in STATEFUL_OPERATORS)
                             + " (docs/streaming.md)")
    stream.add_argument("--allow-change", action="append", default=[], metavar="FIELD",
                        help="restart a checkpoint although this identity field differs from the run that created it "
                             f"(repeatable; fields: {', '.join(CHANGEABLE_IDENTITY)}); without it a different restart is refused")
    stream.add_argument("--shuffle-partitions", type=_int_between(1, 10_000), default=None, metavar="N",
                        help="state partitions of a new checkpoint (default: the master's cores, e.g. local[4] -> 4); "
                             "fixed for the checkpoint's life, a restart reads it back")
    stream.add_argument("--retain", action="append", default=[], metavar="KIND=BATCHES",
                        help="drop KIND's rows of micro-batches older than the last BATCHES (repeatable; e.g. "
                             "timeline=1000; recorded in OUTPUT/retention.json; kinds replemu results needs are kept)")
    _add_knob(stream)

    compact = sub.add_parser("compact", help="compact a stream output's older micro-batches into ranges (what a "
                             "running stream does itself), without Spark")
    compact.add_argument("output", metavar="OUTPUT_DIR", help="a stream's --output directory (local; no job running in it)")
    compact.add_argument("--keep-recent", type=_int_between(1, 2**62), default=200, metavar="N",
                         help="leave the newest N micro-batches as they are (default 200)")
    compact.add_argument("--retain", action="append", default=[], metavar="KIND=BATCHES",
                         help="also drop KIND's rows of micro-batches older than the last BATCHES (as replemu stream --retain)")

    state = sub.add_parser("state", help="show partitions' state from a stream's checkpoint (Spark's statestore reader)")
    state.add_argument("checkpoint", metavar="CHECKPOINT_DIR", help="a --checkpoint of replemu stream (one variant's: "
                       "CHECKPOINT/<variant> after --protocol all)")
    state.add_argument("--topic", help="only this topic's partitions (a scenario's name, or a workload's topic)")
    state.add_argument("--partition", type=int, metavar="P", help="only partition P (with --topic: of that topic)")
    state.add_argument("--master", default=None, help="Spark master URL that reads the state (default: conf/spark.conf, local[*])")

    ck = sub.add_parser("checkpoint", help="check a stream's checkpoint, or roll it back to its last whole micro-batch "
                                           "(docs/checkpoints.md)")
    ck_sub = ck.add_subparsers(dest="action", required=True, parser_class=_Parser)
    ck_check = ck_sub.add_parser("check", help="read-only: the run identity, the last committed micro-batch and every "
                                               "broken file with its micro-batch; exit 0 when whole, 1 when not")
    ck_check.add_argument("checkpoint", metavar="CHECKPOINT_DIR", help="a --checkpoint of replemu stream (a path or a "
                                                                       "Hadoop URI)")
    ck_check.add_argument("--full", action="store_true", help="decode every state file, not only those a restart reads")
    ck_check.add_argument("--json", action="store_true", help="print the report as JSON")
    ck_repair = ck_sub.add_parser("repair", help="roll the checkpoint back to its last micro-batch whose offsets, commit "
                                                 "and state are whole, moving what it takes away into "
                                                 "CHECKPOINT_DIR.repair-<UTC time>/ (nothing is deleted)")
    ck_repair.add_argument("checkpoint", metavar="CHECKPOINT_DIR", help="a --checkpoint of replemu stream (a path or a "
                                                                        "Hadoop URI); no job may be running on it")
    ck_repair.add_argument("--dry-run", action="store_true", help="say what would move and which batches would run "
                                                                  "again; change nothing")

    dash = sub.add_parser("dashboard", help="write a self-contained HTML dashboard of stream outputs or run results")
    dash.add_argument("inputs", nargs="+", metavar="RUN_DIR_OR_RESULT_JSON",
                      help="stream --output directories (or the parent of --protocol all's) and replemu run --json files")
    dash.add_argument("--output", default="dashboard", metavar="DIR", help="directory for dashboard.html (default ./dashboard)")
    dash.add_argument("--partition", default=None, metavar="TOPIC/P", help="partition (or scenario) whose timeline opens first")

    srv = sub.add_parser("serve", help="serve a local web app over a running or finished stream's outputs")
    srv.add_argument("output", metavar="OUTPUT_DIR", help="a stream's --output directory (or the parent of --protocol all's)")
    srv.add_argument("--port", default="8050", help="TCP port (default 8050; 0 picks a free one)")
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")

    camp = sub.add_parser("campaign", help="run a seeded fault-injection campaign over generated partitions")
    camp.add_argument("--protocol", default="all", choices=VARIANT_NAMES + ("all",) + QUORUM_VARIANT_NAMES + more,
                      help=f"a partition protocol, all, or a metadata-quorum one ({', '.join(QUORUM_VARIANT_NAMES)}: --profile quorum)")
    camp.add_argument("--partitions", type=_partitions, default=DEFAULT_PARTITIONS, metavar="N",
                      help=f"generated partitions (scenarios for a quorum protocol; default {DEFAULT_PARTITIONS})")
    camp.add_argument("--seed", type=_seed, default=DEFAULT_SEED, metavar="S",
                      help=f"the root seed every drawn parameter comes from (default {DEFAULT_SEED})")
    camp.add_argument("--profile", default=None, help=f"a profile of conf/workloads.yaml: clean, {DEFAULT_PROFILE} "
                      f"(default), unclean, kraft, kraft-reassign (opt-in: reassignments); quorum (the default) "
                      f"for a metadata-quorum protocol")
    camp.add_argument("--engine", choices=("spark", "local"), default="spark", help="spark (default) or the core alone")
    camp.add_argument("--out", default="out/campaigns", metavar="DIR", help="where example scenario files go")
    camp.add_argument("--json", action="store_true", help="print the report as JSON (the header goes to stderr)")
    _add_knob(camp)

    shr = sub.add_parser("shrink", help="minimise a scenario that breaks an invariant")
    shr.add_argument("file", nargs="?", metavar="FILE", help=f"a scenario YAML file {NAMES_TOO}")
    shr.add_argument("--from-campaign", metavar="SEED/PROFILE/PARTITION", help="shrink a generated partition")
    shr.add_argument("--protocol", required=True, choices=VARIANT_NAMES + QUORUM_VARIANT_NAMES + more,
                     help=f"a partition protocol, or a metadata-quorum one ({', '.join(QUORUM_VARIANT_NAMES)}) for a quorum FILE")
    shr.add_argument("--invariant", required=True, help="the invariant the shrunk scenario must still break "
                     "(docs/protocol.md §7; docs/quorum.md for a quorum FILE)")
    shr.add_argument("--out", metavar="FILE", help="where to write the shrunk scenario (default: next to the input FILE, "
                     "NAME-shrunk.yaml in the current directory for a bundled scenario's NAME; out/shrunk for --from-campaign)")
    _add_knob(shr)

    exp_ = sub.add_parser("explore", help="search every interleaving of steps up to a depth, breadth-first (docs/explore.md)",
                          description="Exhaustive bounded search: every interleaving of contract steps from a partition's "
                          "first election, breadth-first, each distinct state expanded once, every invariant judged in every "
                          "state. Each violated invariant's shortest path is written as a scenario file with an expect block. "
                          "See docs/explore.md for what the search covers and what it cannot.")
    exp_.add_argument("--protocol", default="all", choices=VARIANT_NAMES + QUORUM_VARIANT_NAMES + more + ("all",),
                      help=f"variant to search (default: all partition variants); {', '.join(QUORUM_VARIANT_NAMES)} search the "
                           "metadata quorum (docs/explore.md \"The metadata quorum\")")
    exp_.add_argument("--replicas", type=_int_between(1, 5), metavar="N", help="replicas 1..N (default 2)")
    exp_.add_argument("--depth", type=_int_between(0, 1000), metavar="D",
                      help="steps after the first election (required for partition protocols; quorum: actions after "
                           "the root, default 1000: until no new state remains)")
    exp_.required_in_usage = ("--depth D",)
    exp_.add_argument("--records", type=_int_between(0, 100), metavar="N",
                      help="records produced in all (default 2; quorum: client appends, default 1)")
    exp_.add_argument("--epochs", type=_int_between(0, 1000), metavar="N",
                      help="highest leader epoch the controller may write; the first election writes 0 (default 2; "
                           "quorum: the highest epoch a server may reach, default 3)")
    exp_.add_argument("--crashes", type=_int_between(0, 100), metavar="N",
                      help="process crashes in all (default 1; quorum: default 0)")
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
    quorum = exp_.add_argument_group(f"metadata quorum ({', '.join(QUORUM_VARIANT_NAMES)}; docs/explore.md)")
    quorum.add_argument("--voters", type=_int_between(1, 8), metavar="N", help="voters 1..N (default 3)")
    quorum.add_argument("--observers", type=_int_between(0, 8), metavar="N",
                        help="observers N+1.. after the voters (default 0)")
    quorum.add_argument("--reconfigs", type=_int_between(0, 100), metavar="N",
                        help="VotersRecords appended by add_voter / remove_voter in all (default 2)")
    quorum.add_argument("--lost-responses", type=_int_between(0, 100), metavar="N",
                        help="fetch responses lost in all (default 0)")
    quorum.add_argument("--disk-losses", type=_int_between(0, 100), metavar="N", help="disk losses in all (default 0)")
    quorum.add_argument("--messages", type=_int_between(0, 100), metavar="N",
                        help="messages an action may leave in flight on one link, delivered or dropped later by their own "
                             "actions (default 0: what an action does not deliver is lost)")
    quorum.add_argument("--stable", action="store_true",
                        help="start from a stable leader (server 1 elected by every voter, three fetch rounds) instead "
                             "of every server just started")
    quorum.add_argument("--returning", type=_int_between(1, 9), metavar="S",
                        help="KIP-996's claim: from a stable leader, only server S's election timeout fires (it was "
                             "partitioned and comes back); StableLeaderNotDisrupted is judged in every state")
    quorum.add_argument("--prefix", metavar="'CODE CODE ...'",
                        help="actions taken after the root before the search starts (the start state given by a path; "
                             "its steps lead every written scenario)")
    quorum.add_argument("--any-round", action="store_true",
                        help="a vote round may reach any set of voters (default: none, a bare majority, or all)")
    _add_knob(exp_)

    sub.add_parser("steps", help="print the table of step kinds (docs/steps.md)")

    scen = sub.add_parser("scenarios", help="list the bundled scenarios, whose names run, compile and shrink accept "
                                            "in place of a file (docs/scenario-format.md)")
    scen.add_argument("--json", action="store_true", help="print name, family, description and file of each as JSON")

    res = sub.add_parser("results", help="read a stream's outputs back as result objects")
    res.add_argument("output", metavar="OUTPUT_DIR", help="a stream's --output directory (one variant's: OUTPUT/<variant> "
                     "after --protocol all)")
    res.add_argument("--json", action="store_true", help="print one replemu run --json result per partition")
    return parser


# The commands whose arguments are scenario files (argparse's dest of each), and what their help says:
# a bundled scenario's name goes where a file does (replemu/bundled.py resolves it).
SCENARIO_ARGUMENTS = {"run": "files", "compile": "files", "shrink": "file"}
NAMES_TOO = ("(or a bundled scenario's name, e.g. s1-kip101-scenario-1: `replemu scenarios` lists them; an existing "
             "file of that name wins)")


def _resolve_scenario_arguments(args: argparse.Namespace) -> str | None:
    """Turn the names of bundled scenarios among a command's scenario arguments into their files
    (``args.scenario_names``: file -> the name given); the error of the first that is neither a
    file nor a name, else None."""
    from .bundled import UnknownScenario, resolve_scenario

    dest = SCENARIO_ARGUMENTS.get(args.command)
    given = getattr(args, dest, None) if dest else None
    if given is None:
        return None
    args.scenario_names = {}
    resolved = []
    for argument in given if isinstance(given, list) else [given]:
        try:
            path = resolve_scenario(argument)
        except UnknownScenario as exc:
            return str(exc)
        if str(path) != argument:
            args.scenario_names[str(path)] = argument
        resolved.append(str(path))
    setattr(args, dest, resolved if isinstance(given, list) else resolved[0])
    return None


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


# Each command's body, ``cmd_<command>(args) -> exit status``, lives with the code it drives: one
# function here per command imports its module (only when the command runs, so ``replemu --help``
# loads no Spark, pandas or Great Expectations) and calls it by name, which grep and a type checker follow.
def _cmd_run(args: argparse.Namespace) -> int:
    from .replay import cmd_run
    return cmd_run(args)


def _cmd_export(args: argparse.Namespace) -> int:
    from .replay import cmd_export
    return cmd_export(args)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .replay import cmd_inspect
    return cmd_inspect(args)


def _cmd_steps(args: argparse.Namespace) -> int:
    from .replay import cmd_steps
    return cmd_steps(args)


def _cmd_compile(args: argparse.Namespace) -> int:
    from .compile import cmd_compile
    return cmd_compile(args)


def _cmd_stream(args: argparse.Namespace) -> int:
    from .stream import cmd_stream
    return cmd_stream(args)


def _cmd_state(args: argparse.Namespace) -> int:
    from .stream import cmd_state
    return cmd_state(args)


def _cmd_results(args: argparse.Namespace) -> int:
    from .stream import cmd_results
    return cmd_results(args)


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    from .stream import cmd_checkpoint
    return cmd_checkpoint(args)


def _cmd_compact(args: argparse.Namespace) -> int:
    from .stream import cmd_compact
    return cmd_compact(args)


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from .dashboard import cmd_dashboard
    return cmd_dashboard(args)


def _cmd_serve(args: argparse.Namespace) -> int:
    from .serve import cmd_serve
    return cmd_serve(args)


def _cmd_campaign(args: argparse.Namespace) -> int:
    from .campaign import cmd_campaign
    return cmd_campaign(args)


def _cmd_shrink(args: argparse.Namespace) -> int:
    from .campaign import cmd_shrink
    return cmd_shrink(args)


def _cmd_explore(args: argparse.Namespace) -> int:
    from .explore import cmd_explore
    return cmd_explore(args)


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from .bundled import cmd_scenarios
    return cmd_scenarios(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _cmd_run, "export": _cmd_export, "inspect": _cmd_inspect, "steps": _cmd_steps,
    "compile": _cmd_compile,
    "stream": _cmd_stream, "state": _cmd_state, "results": _cmd_results, "checkpoint": _cmd_checkpoint, "compact": _cmd_compact,
    "dashboard": _cmd_dashboard, "serve": _cmd_serve,
    "campaign": _cmd_campaign, "shrink": _cmd_shrink,
    "explore": _cmd_explore,
    "scenarios": _cmd_scenarios,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(args, "knob"):
        try:  # the metadata quorum's knobs (docs/quorum.md) apart: only ``replemu run`` of a quorum scenario takes them
            args.quorum_knobs = QUORUM_KNOB_TABLE.parse_assignments([t for t in args.knob if t.partition("=")[0].strip() in QUORUM_KNOBS])
            args.knobs = KNOB_TABLE.parse_assignments([t for t in args.knob if t.partition("=")[0].strip() not in QUORUM_KNOBS])
        except KnobError as exc:
            return fail(f"replemu: error: {exc}")
    problem = _resolve_scenario_arguments(args)
    if problem:
        return fail(f"replemu: error: {problem}")
    try:
        return COMMANDS[args.command](args)
    except (BrokenPipeError, KeyboardInterrupt):
        raise
    except OSError as exc:  # a file the arguments named could not be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        return fail(f"replemu: error: {where}{exc.strerror or exc}")
    except SessionError as exc:  # Spark could not start (no Java, a Connect server that does not answer)
        return fail(f"replemu: {exc}", status=EXIT_FAILED)
    except Exception as exc:  # a bug: one line, not a traceback (REPLEMU_DEBUG=1 shows it)
        if os.environ.get("REPLEMU_DEBUG"):
            raise
        return fail(f"replemu: internal error ({type(exc).__name__}: {str(exc)[:300]}); this is a bug in replemu, "
                    f"rerun with REPLEMU_DEBUG=1 for the traceback", status=EXIT_FAILED)


class _Py4jInterrupt:
    """A filter of the root logger: py4j logs a Ctrl-C that interrupts one of its calls as an error
    with its traceback (``logging.exception("KeyboardInterrupt while sending command.")``), before
    the command says ``replemu: interrupted``; ``REPLEMU_DEBUG=1`` keeps it."""

    WORDS = ("KeyboardInterrupt while sending command",)

    def filter(self, record) -> bool:
        return not str(record.msg).startswith(self.WORDS)


def entry() -> None:
    if not os.environ.get("REPLEMU_DEBUG"):
        import logging

        logging.getLogger().addFilter(_Py4jInterrupt())
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. `replemu run ... | head`
        sys.exit(EXIT_OK)
    except KeyboardInterrupt:
        print("replemu: interrupted", file=sys.stderr)
        sys.exit(130)
