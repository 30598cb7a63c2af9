#!/usr/bin/env python3
"""Same outputs: a tree gives every output an older commit gives (issue 48's proof that a refactor
changes no behaviour).

    python scripts/same_outputs.py --base REV [--tree DIR] [--quick] [--only TEXT] [--keep] [--parallel]

REV (any commit of this repository) is extracted with ``git archive`` into a temporary directory;
DIR (default: the working tree this script is in, uncommitted changes included) is the tree under
test.  The same corpus of commands runs in both, entry by entry, the two sides alternating which
goes first: the same interpreter (``sys.executable``, so the same virtual environment),
``PYTHONPATH=<tree>``, ``REPLEMU_PURE=1`` (both sides run the pure-Python core, so a compiled core
built from other sources cannot make a difference), bytecode cached under the temporary directory,
and the working directory a fresh temporary directory per run, into which the entry's scenario files
are copied from that side's tree (the same relative paths: a file only one tree has is left out
and reported).  Compared, per entry:

* each command's exit status and stdout bytes (stderr too where it is a deterministic message:
  errors, campaign headers);
* every file the commands wrote, byte for byte, except Spark's Parquet files, compared by content:
  each directory's rows (read with pyarrow, sorted, compared as lists) and schema;
* with the run's own paths (working directory, tree) replaced by placeholders, and what is
  wall-clock by nature normalised or left out: the tables ``CLOCK``, ``EXCLUDED`` and
  ``STATE_KEPT`` below say exactly what and why.

It prints one line per entry (``same``, or ``DIFFERENT:`` and the first difference), with the time
each side took, and a summary; exit status 0 when every entry is the same, 1 otherwise, 2 on bad
usage.  ``--quick`` leaves out the entries that start a JVM (streams, the Spark engines of
``campaign`` and ``explore``).  ``--only TEXT`` runs the entries whose name contains TEXT;
``--keep`` keeps the temporary directory (the runs' files) and prints where it is;
``--parallel`` runs an entry's two sides at the same time instead of in turn.  Nothing is written
outside the temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "scripts") not in sys.path:  # loaded as a module by the tests
    sys.path.append(str(ROOT / "scripts"))
from baseline import extract  # noqa: E402 (scripts/baseline.py: git archive | tar -x)

TIMEOUT = 900  # seconds per command
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"  # as the test suite: short runs
SPARK = ("--master", "local[2]", "--no-spark-ui")

# -- what is compared, and what is not ---------------------------------------------------------

# Files left out of the comparison (fnmatch on the path relative to the run's directory).
EXCLUDED: tuple[tuple[str, str], ...] = (
    ("*.crc", "Hadoop's checksum of the file beside it, which is compared itself"),
    ("*/_SUCCESS", "Spark's empty marker of a finished write"),
    ("*replemu.lock", "the lock of a running job: it names the job's pid"),
    ("*/logs/replemu.log", "the job's log: timestamps and the JVM's lines"),
    ("*/gx_results/*", "Great Expectations' result store: files named and filled by run time"),
    ("*/data_docs/*", "GX Data Docs pages, dated and named by run time (the validations table holds "
                      "the same verdicts and is compared)"),
    ("ck/metadata", "Spark's checkpoint metadata: the query's random id"),
    ("ck/*/metadata", "Spark's checkpoint metadata: the query's random id"),
    ("*/checkpoint-*/metadata", "Spark's checkpoint metadata: the query's random id"),
    ("*/offsets/*", "Spark's offset log: each batch's wall-clock timestamp"),
    ("*/commits/*", "Spark's commit log: written by Spark, no replemu output"),
    ("*/sources/*", "Spark's file-source log: each input file's modification time"),
    ("*/state/*", "the state store's other files: RocksDB's SST files and their zips (named by random "
                  "ids), its schema and v2 metadata files (ids); the HDFS store's deltas and snapshots, "
                  "RocksDB's changelogs and the operator and schema metadata (STATE_KEPT) are compared"),
    ("spark-warehouse/*", "Spark's working files"),
    ("metastore_db/*", "Spark's working files"),
    ("derby.log", "Spark's working files"),
)

# Files of a stream's state store that ARE compared, byte for byte: the partitions' state as Spark
# stores it after every micro-batch (what a restart reads back).
STATE_KEPT = re.compile(r"(^|/)state/\d+/(\d+/\d+\.(delta|snapshot|changelog)|_metadata/metadata|\d+/_metadata/schema)$")

# Wall-clock values replaced by a placeholder before comparing: (where, pattern, why); a pattern
# that matches whole lines ("(?m)^...\n") removes them.
CLOCK: tuple[tuple[str, str, str], ...] = (
    ("explore stdout", r'"seconds": [0-9.e+-]+', "the search's wall time"),
    ("explore stdout/stderr", r"in [0-9.]+ s( \([0-9,]+/s\))?", "the search's wall time and rate"),
    ("explore stdout/stderr", r"(?m)^\S+ depth \d+: [0-9,]+ of [0-9,]+ states of depth \d+ expanded \(\d+%\)\n",
     "the heartbeat within a long level: a line every 10 s"),
    ("stream stdout", r"local-[0-9]+", "Spark's application id (a start time)"),
    ("stream stdout", r"[0-9.]+ s, state [0-9]+ KiB", "a micro-batch's wall time, and the state store's memory "
                                                       "as Spark measures it (RocksDB's varies run to run)"),
    ("progress.jsonl", "only batchId, numInputRows, the state operators' row counts and the sources' "
                       "end offsets and row counts are kept", "Spark's progress report: ids, timestamps, "
                       "durations and rates"),
    ("dashboard.html", r'"timestamp":"[^"]*"|"duration_s":[0-9.]+|"state_bytes":[0-9]+|"version":"[0-9a-f]+"',
     "a stream micro-batch's start time, duration and state store memory (from progress.jsonl), and "
     "the digest of the output directories' signatures (inode and modification time: the web app's "
     "cache key)"),
)
EXPLORE_CLOCK = [re.compile(pattern) for where, pattern, _ in CLOCK if where.startswith("explore")]
STREAM_CLOCK = [re.compile(pattern) for where, pattern, _ in CLOCK if where.startswith("stream")]
DASHBOARD_CLOCK = next(re.compile(pattern) for where, pattern, _ in CLOCK if where == "dashboard.html")


def excluded(rel: str) -> str | None:
    """Why the file at ``rel`` (relative to the run's directory) is not compared, or None."""
    if STATE_KEPT.search(rel):
        return None
    for pattern, why in EXCLUDED:
        if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase("/" + rel, pattern):
            return why
    return None


def progress_projection(text: str) -> str:
    """The lines of a stream's progress.jsonl reduced to what replemu decides (rows, batches)."""
    out = []
    for line in text.splitlines():
        try:
            p = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        kept = {"batchId": p.get("batchId"), "numInputRows": p.get("numInputRows"),
                "stateOperators": [{k: op.get(k) for k in ("operatorName", "numRowsTotal", "numRowsUpdated",
                                                            "numRowsRemoved", "numShufflePartitions")}
                                   for op in p.get("stateOperators", [])],
                "sources": [{k: s.get(k) for k in ("endOffset", "numInputRows")} for s in p.get("sources", [])]}
        out.append(json.dumps(kept, sort_keys=True))
    return "\n".join(out)


@dataclass
class Rows:
    """A Parquet directory written by Spark, by content: the schema of each file and every row."""
    schemas: list[str]
    rows: list[tuple]
    names: list[str] = field(default_factory=list)  # the columns (of the first file)


def spark_written(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        return (pq.ParquetFile(path).metadata.created_by or "").startswith("parquet-mr")
    except Exception:  # not Parquet after all: compared by its bytes
        return False


def read_rows(paths: list[Path]) -> Rows:
    import pyarrow.parquet as pq

    schemas, rows, first = set(), [], []
    for path in paths:
        table = pq.read_table(path)
        schemas.add(", ".join(f"{f.name}: {f.type}" for f in table.schema))
        names = table.column_names
        first = first or names
        rows.extend(tuple(r[n] for n in names) for r in table.to_pylist())
    return Rows(sorted(schemas), sorted(rows, key=repr), first)


class Normaliser:
    """Replaces the paths of one run (its directory, its tree) by placeholders."""

    def __init__(self, cwd: Path, tree: Path, work: Path):
        pairs = [(cwd, "<CWD>"), (tree, "<TREE>"), (work, "<WORK>")]
        self.pairs = [(str(p).encode(), name.encode()) for p, name in pairs]
        self.pairs += [(str(p.resolve()).encode(), name.encode()) for p, name in pairs if p.resolve() != p]

    def __call__(self, data: bytes) -> bytes:
        for path, name in self.pairs:
            data = data.replace(path, name)
        return data


def clocked(data: bytes, patterns: list[re.Pattern]) -> bytes:
    text = data.decode("utf-8", "replace")
    for pattern in patterns:
        text = pattern.sub("" if pattern.pattern.startswith("(?m)^") else "<CLOCK>", text)
    return text.encode()


# -- the corpus --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cmd:
    """One command of an entry: ``python -m replemu ARGV`` (``python ARGV`` with ``python``)."""
    argv: tuple[str, ...]
    save: str | None = None  # stdout also goes to this file of the run's directory (a later command's input)
    stderr: bool = False     # compare stderr too (a deterministic message)
    clock: str = ""          # "explore" or "stream": the wall-clock normalisers of CLOCK for its output
    python: bool = False


@dataclass
class Entry:
    engine: str
    name: str
    commands: list[Cmd]
    inputs: list[str] = field(default_factory=list)       # files of the tree copied into the run's directory
    writes: dict[str, str] = field(default_factory=dict)  # files the entry brings itself
    spark: bool = False                                   # starts a JVM: left out by --quick

    @property
    def title(self) -> str:
        return f"{self.engine}: {self.name}"


def cmd(*argv: str, **kw) -> Cmd:
    return Cmd(tuple(argv), **kw)


# Scenario files each tree ships, by family (a file naming `voters` is a metadata-quorum scenario).
SCENARIO_GROUPS = ("replemu/scenarios/*.yaml", "replemu/scenarios/quorum/*.yaml", "conf/scenarios/*.yaml",
                   "conf/scenarios/quorum/*.yaml", "docs/examples/*.yaml", "tests/kafka/*.yaml",
                   "tests/kafka/quorum/*.yaml", "tests/data/*.yaml", "tests/data/*/*.yaml")
QUORUM_FILE = re.compile(rb"^voters\s*:", re.M)
PARTITION_PROTOCOLS = ("hw", "kip101", "kip279", "kip320", "kip903", "kip966")
QUORUM_PROTOCOLS = ("kraft595", "kraft853", "kraft996")
QUORUM_OFF = "reconfig_requires_leader_epoch_commit=false"

API_PROBE = '''\
import json, replemu
out = {}
out["s1 hw"] = replemu.run("s1-kip101-scenario-1", "hw", trace=True)
out["s2 kip966 knob"] = replemu.run("s2-kip101-scenario-2", "kip966", knobs={"unclean_recovery": "manual"})
out["thesis off"] = replemu.run("thesis-membership-change", "kraft853",
                                knobs={"reconfig_requires_leader_epoch_commit": False}, trace=True)
story = replemu.scenario({"name": "two-round-hw", "replicas": [1, 2], "steps": [
    {"elect": {"leader": 1}}, {"produce": {"value": "a"}}, {"fetch": {"replica": 2}},
    {"fetch": {"replica": 2, "response": "lost"}}, {"crash": {"replica": 2}}, {"restart": {"replica": 2}},
    {"leader_and_isr": {"replica": 2}}, {"crash": {"replica": 1}}, {"elect": {"leader": 2}}]})
out["story kip101"] = replemu.run(story, "kip101")
out["story logs"] = replemu.final_logs(out["story kip101"])
out["trace frame"] = replemu.trace_frame(replemu.run(story, "hw", trace=True)).to_csv()
out["bundled"] = replemu.bundled_scenarios()
search = replemu.explore("hw", replicas=2, depth=6, records=1, epochs=1, reduce="all", out="explore")
search.pop("seconds", None)
out["explore"] = search
out["campaign"] = replemu.campaign(seed=7, partitions=8, protocols=("hw", "kip320", "kip966"), out="campaign")
print(json.dumps(out, indent=1, sort_keys=True, default=repr))
'''

BAD_FILES = {
    "bad/replica.yaml": "name: bad-replica\nreplicas: [1, 2]\nsteps:\n- elect: {leader: 1}\n- fetch: {replica: 3}\n",
    "bad/kind.yaml": "name: bad-kind\nreplicas: [1, 2]\nsteps:\n- elect: {leader: 1}\n- teleport: {replica: 2}\n",
    "bad/argument.yaml": "name: bad-argument\nreplicas: [1, 2]\nsteps:\n- elect: {leader: 1}\n"
                         "- produce: {value: a, acks: most}\n",
    "bad/quorum-server.yaml": "name: bad-quorum\nvoters: [1, 2, 3]\nsteps:\n- election_timeout: {server: 1}\n"
                              "- crash: {server: 9}\n",
    "bad/quorum-kind.yaml": "name: bad-quorum-kind\nvoters: [1, 2, 3]\nsteps:\n- elect: {leader: 1}\n",
    "bad/duplicate.yaml": "name: dup\nname: dup2\nreplicas: [1, 2]\nsteps:\n- elect: {leader: 1}\n",
}


# refusals also run in a process of their own (by their second word)
OWN_PROCESS = ("bad/replica.yaml", "bad/quorum-kind.yaml", "--from-campaign", "--workload")


def cli_probe(commands: list[list[str]]) -> str:
    """A script that runs ``python -m replemu ARGV`` for each ARGV in its one process (runpy, as ``-m``
    does) and prints each command's exit status, stdout and stderr: many short commands, one start."""
    return f'''import contextlib, io, runpy, sys
for argv in {commands!r}:
    out, err, status = io.StringIO(), io.StringIO(), 0
    sys.argv = ["replemu", *argv]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("replemu", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            status = exc.code
    print("$ replemu", *argv, "-> exit status", status)
    print(out.getvalue())
    print(err.getvalue(), file=sys.stderr)
'''


def scenario_files(tree: Path) -> dict[str, list[str]]:
    """Each group's files in ``tree`` (relative paths), groups that are the same directory once."""
    seen, groups = set(), {}
    for pattern in SCENARIO_GROUPS:
        files = sorted(p for p in tree.glob(pattern) if p.is_file())
        real = {p.resolve() for p in files}
        if not files or (real and real <= seen):
            continue
        seen |= real
        groups[pattern] = [p.relative_to(tree).as_posix() for p in files]
    return groups


def build_corpus(base: Path, tree: Path, quick: bool) -> tuple[list[Entry], list[str]]:
    """The entries, over the scenario files both trees ship, and notes on the files left out."""
    base_groups, tree_groups = scenario_files(base), scenario_files(tree)
    notes = []
    groups: dict[str, tuple[list[str], list[str]]] = {}  # pattern -> (partition files, quorum files)
    for pattern in sorted(set(base_groups) | set(tree_groups), key=SCENARIO_GROUPS.index):
        in_base, in_tree = set(base_groups.get(pattern, [])), set(tree_groups.get(pattern, []))
        for only, side in ((in_base - in_tree, "base"), (in_tree - in_base, "tree")):
            notes += [f"{f}: only in the {side}, skipped" for f in sorted(only)]
        both = sorted(in_base & in_tree)
        quorum = [f for f in both if QUORUM_FILE.search((tree / f).read_bytes())]
        partition = [f for f in both if f not in quorum]
        groups[pattern] = (partition, quorum)

    entries: list[Entry] = []

    def add(engine: str, name: str, commands: list[Cmd], inputs=(), writes=None, spark=False) -> None:
        entries.append(Entry(engine, name, commands, list(inputs), dict(writes or {}), spark))

    # -- run: every scenario file, every mode (one command per family and mode: the first difference
    # names the file and variant)
    all_partition = [f for partition, _ in groups.values() for f in partition]
    all_quorum = [f for _, quorum in groups.values() for f in quorum]
    for files, family in ((all_partition, "partition"), (all_quorum, "quorum")):
        if not files:
            continue
        where = f"{len(files)} {family} scenario files"
        add("run", f"--json --protocol all, {where}", [cmd("run", *files, "--protocol", "all", "--json")], files)
        add("run", f"human output, {where}", [cmd("run", *files, "--protocol", "all")], files)
        add("run", f"--summary, {where}", [cmd("run", *files, "--protocol", "all", "--summary")], files)
        add("run", f"--trace --json, {where}", [cmd("run", *files, "--protocol", "all", "--trace", "--json")], files)
        add("run", f"--check, {where}", [cmd("run", *files, "--check", "--summary", stderr=True)], files)
    if all_quorum:
        add("run", f"--json --trace per quorum protocol, {len(all_quorum)} quorum scenario files",
            [cmd("run", *all_quorum, "--protocol", p, "--json", "--trace") for p in QUORUM_PROTOCOLS], all_quorum)
    bundled_p = groups.get("replemu/scenarios/*.yaml", ([], []))[0]
    docs_p = groups.get("docs/examples/*.yaml", ([], []))[0]
    bundled_q = groups.get("replemu/scenarios/quorum/*.yaml", ([], []))[1]
    small = bundled_p + docs_p
    if small:
        add("run", "--json --trace per partition protocol, bundled and docs/examples",
            [cmd("run", *small, "--protocol", p, "--json", "--trace", stderr=True) for p in PARTITION_PROTOCOLS], small)
        add("run", "--knob, bundled and docs/examples", [
            cmd("run", *small, "--protocol", "kip320", "--knob", "reset_remote_leo_on_reelection=true", "--json", "--trace"),
            cmd("run", *small, "--protocol", "kip966", "--knob", "unclean_recovery=last_known_leader",
                "--knob", "strict_min_isr_hw=false", "--json"),
            cmd("run", *small, "--protocol", "hw", "--knob", "trunc_rule=kip279", "--knob", "fencing=true"),
            cmd("run", *small, "--protocol", "all", "--knob", "halt_on_out_of_range=false", "--summary")], small)
    if bundled_q:
        add("run", "--knob, bundled quorum scenarios", [
            cmd("run", *bundled_q, "--protocol", "kraft853", "--knob", QUORUM_OFF, "--json", "--trace"),
            cmd("run", *bundled_q, "--protocol", "kraft996", "--knob", "pre_vote=false"),
            cmd("run", *bundled_q, "--protocol", "kraft595", "--knob", "dynamic_voters=true", "--json")], bundled_q)
    add("run", "bundled scenarios by name", [
        cmd("run", "s1-kip101-scenario-1", "seed-2-divergence-lagging-replica-first", "--protocol", "kip101"),
        cmd("run", "thesis-membership-change", "--protocol", "kraft853", "--json")])
    if bundled_p:
        s1 = next((f for f in bundled_p if "s1-kip101" in f), bundled_p[0])
        add("run", "export, inspect and --from-dirs", [
            cmd("run", s1, "--protocol", "all", "--json", save="results.json"),
            cmd("export", "results.json", "--to", "dirs"),
            cmd("inspect", *[f"dirs/{Path(s1).stem}-{p}" for p in PARTITION_PROTOCOLS]),
            cmd("run", s1, "--protocol", "all", "--from-dirs", f"dirs/{Path(s1).stem}-hw", "--json", stderr=True)], [s1])

    # -- dashboard over run results (the stream's dashboards are in the stream entries)
    if small:
        add("dashboard", "run --json --trace results, partition family", [
            cmd("run", *small, "--protocol", "all", "--json", "--trace", save="all.json"),
            cmd("run", small[0], "--protocol", "kip101", "--json", save="one.json"),
            cmd("dashboard", "all.json", "one.json", "--output", "dash")], small)
    if all_quorum:
        q = all_quorum[: 12]
        add("dashboard", "run --json --trace results, quorum family", [
            cmd("run", *q, "--protocol", "kraft853", "--json", "--trace", save="on.json"),
            cmd("run", *q, "--protocol", "kraft853", "--knob", QUORUM_OFF, "--json", "--trace", save="off.json"),
            cmd("run", *q, "--protocol", "kraft595", "--json", save="plain.json"),
            cmd("dashboard", "on.json", "off.json", "plain.json", "--output", "dash")], q)

    # -- campaign (local engine): every partition profile, the quorum presets
    for seed, profile in ((3, "clean"), (3, "hard"), (11, "hard"), (3, "unclean"), (5, "kraft"), (5, "kraft-reassign")):
        add("campaign", f"--engine local --seed {seed} --profile {profile} --protocol all --json", [
            cmd("campaign", "--engine", "local", "--partitions", "40", "--seed", str(seed), "--profile", profile,
                "--protocol", "all", "--json", "--out", "camp", stderr=True)])
    add("campaign", "human output, --knob", [
        cmd("campaign", "--engine", "local", "--partitions", "30", "--seed", "4", "--profile", "hard", "--protocol", "all",
            "--out", "camp", stderr=True),
        cmd("campaign", "--engine", "local", "--partitions", "30", "--seed", "4", "--profile", "hard", "--protocol", "kip320",
            "--knob", "reset_remote_leo_on_reelection=true", "--json", "--out", "knob", stderr=True)])
    for protocol in QUORUM_PROTOCOLS:
        add("campaign", f"--protocol {protocol} (quorum) --json, two seeds", [
            cmd("campaign", "--engine", "local", "--partitions", "40", "--seed", str(seed), "--protocol", protocol,
                "--json", "--out", f"camp{seed}", stderr=True) for seed in (3, 8)])
    add("campaign", "quorum human output, --knob", [
        cmd("campaign", "--engine", "local", "--partitions", "30", "--seed", "2", "--protocol", "kraft853",
            "--knob", QUORUM_OFF, "--out", "camp", stderr=True)])

    # -- shrink: both families, from a campaign, from a file, a bundled name, with knobs
    add("shrink", "--from-campaign, partition profiles", [
        cmd("shrink", "--from-campaign", "3/hard/7", "--protocol", "hw", "--invariant", "StrongIsr",
            "--out", "hard.yaml", stderr=True),
        cmd("shrink", "--from-campaign", "11/hard/28", "--protocol", "hw", "--invariant", "NoCommittedDataLoss",
            "--out", "loss.yaml", stderr=True),
        cmd("shrink", "--from-campaign", "3/unclean/1", "--protocol", "hw", "--invariant", "EventualConvergence",
            "--out", "unclean.yaml", stderr=True),
        cmd("shrink", "--from-campaign", "5/kraft/4", "--protocol", "kip320", "--invariant", "UncleanExclusion",
            "--out", "kraft.yaml", stderr=True),
        cmd("shrink", "--from-campaign", "5/kraft/5", "--protocol", "kip966", "--invariant", "StrongIsr",
            "--out", "elr.yaml", stderr=True),
        cmd("run", "loss.yaml", "--protocol", "hw", "--check")])
    add("shrink", "a bundled name (default --out), a campaign's file", [
        cmd("shrink", "s1-kip101-scenario-1", "--protocol", "hw", "--invariant", "NoCommittedDataLoss", stderr=True),
        cmd("campaign", "--engine", "local", "--partitions", "20", "--seed", "3", "--profile", "hard",
            "--protocol", "hw", "--json", "--out", "camp"),
        cmd("shrink", "camp/campaign-3-hard-p13.yaml", "--protocol", "hw", "--invariant", "LeaderCandidateCompleteness",
            "--out", "p13.yaml", stderr=True),
        cmd("run", "p13.yaml", "--check")])
    if docs_p:
        zombie = next((f for f in docs_p if "kip320-zombie" in f), None)
        if zombie:
            add("shrink", "--knob (partition)", [
                cmd("shrink", zombie, "--protocol", "kip320", "--invariant", "StrongIsr",
                    "--out", "zombie.yaml", stderr=True),
                cmd("shrink", zombie, "--protocol", "kip320", "--invariant", "StrongIsr",
                    "--knob", "isr_shrink_exempts_leo_equal=false", "--out", "knob.yaml", stderr=True),
                cmd("shrink", "--from-campaign", "5/kraft/5", "--protocol", "kip903", "--invariant", "StrongIsr",
                    "--knob", "strict_min_isr_hw=true", "--out", "strict.yaml", stderr=True),
                cmd("run", "strict.yaml", "--protocol", "kip903", "--check")], [zombie])
    add("shrink", "quorum: a campaign's file, a bundled name with --knob", [
        cmd("campaign", "--engine", "local", "--partitions", "30", "--seed", "3", "--protocol", "kraft595",
            "--json", "--out", "camp"),
        cmd("shrink", "camp/campaign-3-quorum-kraft595-p18.yaml", "--protocol", "kraft595", "--invariant",
            "ElectionSafety", "--out", "q18.yaml", stderr=True),
        cmd("run", "q18.yaml", "--protocol", "kraft595", "--check"),
        cmd("shrink", "thesis-membership-change", "--protocol", "kraft853", "--invariant", "LeaderCompleteness",
            "--knob", QUORUM_OFF, "--out", "thesis.yaml", stderr=True),
        cmd("run", "thesis.yaml", "--protocol", "kraft853", "--check")])

    # -- explore (local engine): both families
    ex = ("explore", "--engine", "local", "--json")
    add("explore", "--protocol all --replicas 2 --depth 4", [cmd(*ex, "--protocol", "all", "--replicas", "2",
                                                                  "--depth", "4", "--out", "x", clock="explore")])
    add("explore", "hw --replicas 2 --depth 5 (violations, scenario files)", [
        cmd(*ex, "--protocol", "hw", "--replicas", "2", "--depth", "5", "--out", "x", clock="explore"),
        cmd("run", "x/hw/StrongIsr.yaml", "--protocol", "hw", "--check")])
    add("explore", "kip903 --until NoCommittedDataLoss, kip966 power crashes and knobs", [
        cmd(*ex, "--protocol", "kip903", "--replicas", "2", "--depth", "8", "--until", "NoCommittedDataLoss",
            "--out", "x", clock="explore"),
        cmd(*ex, "--protocol", "kip966", "--replicas", "2", "--depth", "5", "--power-crashes", "1",
            "--knob", "strict_min_isr_hw=false", "--config", "min_insync_replicas=2", "--out", "y", clock="explore")])
    add("explore", "kip320 --replicas 3 --reduce all --workers 2, --reduce sleep", [
        cmd(*ex, "--protocol", "kip320", "--replicas", "3", "--depth", "4", "--records", "1", "--reduce", "all",
            "--workers", "2", "--out", "x", clock="explore"),
        cmd(*ex, "--protocol", "kip101", "--replicas", "2", "--depth", "5", "--reduce", "sleep",
            "--steps", "elect,produce,fetch,crash,restart,leader_and_isr", "--out", "y", clock="explore")])
    add("explore", "human output, --max-states stop, then resumed", [
        cmd("explore", "--engine", "local", "--protocol", "kip279", "--replicas", "2", "--depth", "5",
            "--max-states", "300", "--out", "x", clock="explore"),
        cmd("explore", "--engine", "local", "--protocol", "kip279", "--replicas", "2", "--depth", "5",
            "--out", "x", clock="explore")])
    add("explore", "quorum kraft853: exhausted (3 voters, 1 observer), thesis bug from a prefix", [
        cmd(*ex, "--protocol", "kraft853", "--voters", "3", "--observers", "1", "--stable", "--epochs", "1",
            "--records", "0", "--reconfigs", "1", "--out", "x", clock="explore"),
        cmd(*ex, "--protocol", "kraft853", "--knob", QUORUM_OFF, "--voters", "4", "--stable", "--epochs", "3",
            "--records", "0", "--reconfigs", "2", "--steps", "election_timeout,fetch,remove_voter",
            "--prefix", "K14 E3124 K31", "--until", "LeaderCompleteness,ElectionSafety,Durability",
            "--out", "y", clock="explore"),
        cmd("run", "y/kraft853/LeaderCompleteness.yaml", "--protocol", "kraft853", "--check")])
    add("explore", "quorum: a returning server (kraft853, kraft996), kraft595 disk losses", [
        cmd(*ex, "--protocol", "kraft853", "--voters", "3", "--returning", "3", "--epochs", "3", "--records", "2",
            "--reconfigs", "0", "--until", "StableLeaderNotDisrupted", "--out", "x", clock="explore"),
        cmd(*ex, "--protocol", "kraft996", "--voters", "3", "--returning", "3", "--epochs", "3", "--records", "1",
            "--reconfigs", "0", "--out", "y", clock="explore"),
        cmd(*ex, "--protocol", "kraft595", "--voters", "3", "--epochs", "2", "--records", "1", "--crashes", "1",
            "--disk-losses", "1", "--depth", "4", "--out", "z", clock="explore"),
        cmd("run", "z/kraft595/ElectionSafety.yaml", "--protocol", "kraft595", "--check"),
        cmd("explore", "--protocol", "kraft996", "--voters", "2", "--observers", "1", "--epochs", "2",
            "--records", "1", "--messages", "1", "--depth", "5", "--out", "w", clock="explore")])

    # -- compile: scenario files to event files
    if all_partition:
        add("compile", f"partition scenarios ({len(all_partition)} files): jsonl, --split 3, parquet", [
            cmd("compile", *all_partition, "--out", "jsonl", stderr=True),
            cmd("compile", *all_partition, "--out", "split", "--split", "3", stderr=True),
            cmd("compile", *all_partition, "--out", "parquet", "--format", "parquet", stderr=True)], all_partition)
    if all_quorum:
        add("compile", f"quorum scenarios ({len(all_quorum)} files): jsonl, --split 2, parquet", [
            cmd("compile", *all_quorum, "--out", "jsonl", stderr=True),
            cmd("compile", *all_quorum, "--out", "split", "--split", "2", stderr=True),
            cmd("compile", *all_quorum, "--out", "parquet", "--format", "parquet", stderr=True)], all_quorum)

    # -- the CLI's own outputs and its refusals
    helps = ["", "run", "export", "inspect", "compile", "stream", "compact", "state", "checkpoint", "dashboard",
             "serve", "campaign", "shrink", "explore", "steps", "scenarios", "results"]
    texts = [[*([h] if h else []), "--help"] for h in helps] + [["--version"], ["steps"], ["scenarios"],
                                                                 ["scenarios", "--json"]]
    add("cli", "--help of every command, --version, steps, scenarios (one process)",
        [cmd("cli_probe.py", python=True, stderr=True)], writes={"cli_probe.py": cli_probe(texts)})
    refusals = [["run", f] for f in BAD_FILES] + [
        ["run", "bad/quorum-server.yaml", "--protocol", "kip320"],
        ["run", "s1-kip101-scenario-1", "--knob", "fencing=maybe"],
        ["run", "s1-kip101-scenario-1", "--knob", "pre_vote=true"],
        ["run", "thesis-membership-change", "--protocol", "kip320"],
        ["run", "thesis-membership-change", "--knob", "fencing=true"],
        ["run", "s1-kip101"],
        ["shrink", "--from-campaign", "3/quorum/18", "--protocol", "kraft595", "--invariant", "ElectionSafety"],
        ["shrink", "s1-kip101-scenario-1", "--protocol", "kip101", "--invariant", "NoCommittedDataLoss"],
        ["shrink", "s1-kip101-scenario-1", "--protocol", "hw", "--invariant", "Nonsense"],
        ["explore", "--protocol", "kraft853", "--replicas", "2"],
        ["explore", "--protocol", "hw", "--depth", "2", "--voters", "3"],
        ["campaign", "--protocol", "kraft853", "--profile", "hard", "--engine", "local"],
        ["campaign", "--protocol", "hw", "--profile", "quorum", "--engine", "local"],
        ["compile", "s1-kip101-scenario-1", "thesis-membership-change", "--out", "ev"],
        ["stream", "--workload", "hard", "--partitions", "2", "--protocol", "kraft853", "--output", "o",
         "--checkpoint", "c"],
        ["stream", "--workload", "hard", "--partitions", "2", "--protocol", "hw", "--knob", "pre_vote=true",
         "--output", "o", "--checkpoint", "c"],
    ]
    add("cli", "refusals: bad scenarios, knobs and flags of the other family (one process, stderr compared)",
        [cmd("cli_probe.py", python=True, stderr=True)], writes={**BAD_FILES, "cli_probe.py": cli_probe(refusals)})
    add("cli", "refusals, each in its own process (exit status and stderr)",
        [cmd(*argv, stderr=True) for argv in refusals if argv[1] in OWN_PROCESS], writes=BAD_FILES)
    add("api", "replemu.run, scenario, trace_frame, final_logs, bundled_scenarios, explore, campaign",
        [cmd("api_probe.py", python=True, stderr=True)], writes={"api_probe.py": API_PROBE})

    # -- Spark: streams (compiled partition and quorum events, a workload), campaign and explore engines
    if not quick:
        stream = ("stream", *SPARK, "--shuffle-partitions", "2", "--output", "out", "--checkpoint", "ck")
        after = [cmd("results", "out"), cmd("results", "out", "--json"), cmd("dashboard", "out", "--output", "dash")]
        if all_partition:
            add("stream", f"compiled partition scenarios ({len(all_partition)}), kip903, 2 micro-batches", [
                cmd("compile", *all_partition, "--out", "events", "--split", "2"),
                cmd(*stream, "--input", "events", "--protocol", "kip903", "--max-files-per-trigger", "1",
                    clock="stream"), *after], all_partition, spark=True)
        if all_quorum:
            add("stream", f"compiled quorum scenarios ({len(all_quorum)}), kraft853 --knob, 3 micro-batches", [
                cmd("compile", *all_quorum, "--out", "events", "--split", "3"),
                cmd(*stream, "--input", "events", "--protocol", "kraft853", "--knob", QUORUM_OFF,
                    "--max-files-per-trigger", "1", clock="stream"), *after], all_quorum, spark=True)
        add("stream", "--workload kraft, kip966, transformWithState, 4 micro-batches", [
            cmd(*stream, "--workload", "kraft", "--partitions", "12", "--seed", "5", "--steps-per-batch", "15",
                "--max-steps", "60", "--protocol", "kip966", "--operator", "transformWithState", clock="stream"),
            *after], spark=True)
        add("campaign", "--engine spark --profile hard --protocol kip320", [
            cmd("campaign", "--engine", "spark", "--partitions", "8", "--seed", "3", "--profile", "hard",
                "--protocol", "kip320", "--json", "--out", "camp")], spark=True)
        add("explore", "--engine spark hw --replicas 2 --depth 5", [
            cmd("explore", "--engine", "spark", "--master", "local[2]", "--protocol", "hw", "--replicas", "2",
                "--depth", "5", "--json", "--out", "x", clock="explore")], spark=True)
    return entries, notes


# -- running an entry in a tree -----------------------------------------------------------------

@dataclass
class Outcome:
    commands: list[tuple[str, object, bytes, bytes | None]]  # (command, exit status, stdout, stderr or None)
    files: dict[str, object]  # path -> bytes, or Rows for a directory of Spark's Parquet files
    seconds: float
    cpu: float = 0.0  # CPU seconds of the commands and the descendants they waited for


def environment(tree: Path, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REPLEMU_", "PYSPARK_", "SPARK_")) and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONPATH=str(tree), REPLEMU_PURE="1", REPLEMU_JVM_OPTIONS=JVM_OPTIONS,
               PYTHONPYCACHEPREFIX=str(work / "pycache"), TZ="UTC", COLUMNS="100")
    return env


def run_entry(entry: Entry, tree: Path, work: Path, keep: bool) -> Outcome:
    cwd = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    for rel in entry.inputs:
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / rel, cwd / rel)
    for rel, text in entry.writes.items():
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        (cwd / rel).write_text(text)
    normalise = Normaliser(cwd, tree, work)
    env = environment(tree, work)
    started, cpu, results, saved = time.monotonic(), 0.0, [], set()
    for c in entry.commands:
        argv = [sys.executable, *c.argv] if c.python else [sys.executable, "-m", "replemu", *c.argv]
        status, stdout, stderr, seconds = execute(argv, cwd, env)
        cpu += seconds
        if c.save:
            (cwd / c.save).write_bytes(stdout)
            saved.add(c.save)
        stdout = normalise(stdout)
        stderr = normalise(stderr)
        if c.clock:
            patterns = EXPLORE_CLOCK if c.clock == "explore" else STREAM_CLOCK
            stdout, stderr = clocked(stdout, patterns), clocked(stderr, patterns)
        results.append((" ".join(("python", *c.argv) if c.python else ("replemu", *c.argv)), status, stdout,
                        stderr if c.stderr else None))
    seconds = time.monotonic() - started
    files = collect(cwd, set(entry.inputs) | set(entry.writes) | saved, normalise)
    if not keep:
        shutil.rmtree(cwd, ignore_errors=True)
    return Outcome(results, files, seconds, cpu)


RUNNING: set[int] = set()  # process groups of the commands running now (killed if this script is stopped)


def execute(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[object, bytes, bytes, float]:
    """Run one command in its own process group: (exit status, stdout, stderr, CPU seconds of it and
    the descendants it waited for).  Past TIMEOUT its whole group is killed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                process_group=0)
        RUNNING.add(proc.pid)
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(TIMEOUT, kill)
        timer.start()
        try:
            _, wait_status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
            RUNNING.discard(proc.pid)
        proc.returncode = os.waitstatus_to_exitcode(wait_status)  # reaped here: Popen must not wait again
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left running (a JVM it did not wait for)
        out.seek(0)
        err.seek(0)
        status: object = f"killed after {TIMEOUT} s" if expired.is_set() else proc.returncode
        return status, out.read(), err.read(), usage.ru_utime + usage.ru_stime


def collect(cwd: Path, skip: set[str], normalise: Normaliser) -> dict[str, object]:
    """Every file the commands wrote under ``cwd``, in the form it is compared in."""
    files: dict[str, object] = {}
    spark_dirs: dict[str, list[Path]] = {}
    for path in sorted(cwd.rglob("*")):
        rel = path.relative_to(cwd).as_posix()
        if not path.is_file() or path.is_symlink() or rel in skip or excluded(rel):
            continue
        if rel.endswith(".parquet") and spark_written(path):
            spark_dirs.setdefault(path.parent.relative_to(cwd).as_posix(), []).append(path)
            continue
        data = normalise(path.read_bytes())
        if path.name == "progress.jsonl":
            data = progress_projection(data.decode("utf-8", "replace")).encode()
        elif path.name == "dashboard.html":
            data = DASHBOARD_CLOCK.sub("<CLOCK>", data.decode("utf-8", "replace")).encode()
        files[rel] = data
    for rel, paths in spark_dirs.items():
        files[f"{rel}/*.parquet"] = read_rows(paths)
    return files


# -- comparing two outcomes ---------------------------------------------------------------------

def short(value: object, width: int = 70) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def json_difference(a: object, b: object, path: str = "") -> str | None:
    """Where two JSON values first differ (a path like ``[3].final.replicas.2.hw``), or None."""
    if type(a) is not type(b):
        return f"{path or '.'}: {short(a, 40)} | {short(b, 40)}"
    if isinstance(a, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in b or key not in a:
                return f"{path}.{key}: only in the {'base' if key in a else 'tree'}"
            found = json_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        if list(a) != list(b):
            return f"{path or '.'}: keys in another order"
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = json_difference(x, y, f"{path}[{i}]")
            if found:
                if not path and isinstance(x, dict) and "scenario" in x:
                    found += f" (scenario {x.get('scenario')}, {x.get('protocol')})"
                return found
        if len(a) != len(b):
            return f"{path or '.'}: {len(a)} items | {len(b)}"
        return None
    return None if a == b else f"{path or '.'}: {short(a, 40)} | {short(b, 40)}"


def text_difference(a: bytes, b: bytes) -> str | None:
    """The first line where two outputs differ (JSON: the first differing value), or None."""
    if a == b:
        return None
    try:
        found = json_difference(json.loads(a), json.loads(b))
        if found:
            return found
    except ValueError:
        pass
    try:
        la, lb = a.decode().splitlines(), b.decode().splitlines()
    except UnicodeDecodeError:
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return f"binary, bytes differ from offset {at} ({len(a)} | {len(b)} bytes)"
    for i, (x, y) in enumerate(zip(la, lb), 1):
        if x != y:
            col = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            lo = max(0, col - 25)
            return f"line {i}: {x[lo:lo + 60]!r} | {y[lo:lo + 60]!r}"
    if len(la) != len(lb):
        return f"{len(la)} lines | {len(lb)} lines"
    return f"bytes differ (line ends or encoding; {len(a)} | {len(b)} bytes)"


ROW_KEYS = ("topic", "partition", "seq", "replica", "idx", "depth", "invariant")  # named with a row's difference


def rows_difference(a: Rows, b: Rows) -> str | None:
    if a.schemas != b.schemas:
        return f"schema {short(a.schemas, 60)} | {short(b.schemas, 60)}"
    for i, (x, y) in enumerate(zip(a.rows, b.rows)):
        if x != y:
            j = next(j for j, (p, q) in enumerate(zip(x, y)) if p != q)
            names = a.names if len(a.names) == len(x) else [f"column {k}" for k in range(len(x))]
            where = ", ".join(f"{n}={v!r}" for n, v in zip(names, x) if n in ROW_KEYS)
            found = f"row {i} (sorted) {names[j]}: {short(repr(x[j]), 40)} | {short(repr(y[j]), 40)}"
            return found + (f" ({short(where, 80)})" if where else "")
    if len(a.rows) != len(b.rows):
        return f"{len(a.rows)} rows | {len(b.rows)} rows"
    return None


def difference(base: Outcome, tree: Outcome) -> str | None:
    """The first difference between the base's outcome of an entry and the tree's, or None."""
    for (label, sa, oa, ea), (_, sb, ob, eb) in zip(base.commands, tree.commands):
        where = short(label, 60)
        if sa != sb:
            return f"`{where}`: exit status {sa} | {sb}"
        found = text_difference(oa, ob)
        if found:
            return f"`{where}` stdout {found}"
        if ea is not None and eb is not None:
            found = text_difference(ea, eb)
            if found:
                return f"`{where}` stderr {found}"
    only_base, only_tree = sorted(set(base.files) - set(tree.files)), sorted(set(tree.files) - set(base.files))
    if only_base or only_tree:
        return f"file {(only_base or only_tree)[0]} only in the {'base' if only_base else 'tree'}" + (
            f" (and {len(only_base) + len(only_tree) - 1} more)" if len(only_base) + len(only_tree) > 1 else "")
    for rel in sorted(base.files):
        a, b = base.files[rel], tree.files[rel]
        if isinstance(a, Rows) or isinstance(b, Rows):
            found = rows_difference(a, b) if isinstance(a, Rows) and isinstance(b, Rows) else "Parquet | not"
        else:
            found = text_difference(a, b)
        if found:
            return f"{rel}: {found}"
    return None


# -- main ---------------------------------------------------------------------------------------

def git(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True)


COPY_IGNORED = (".git", "__pycache__", ".venv", "*.so", "_compiled_from.txt", ".mypy_cache", ".pytest_cache",
                ".ruff_cache", ".hypothesis", "*.egg-info")
COPY_IGNORED_AT_TOP = ("build", "dist", "out")  # .gitignore's /build/, /dist/, /out/


def copy_tree(source: Path, into: Path) -> None:
    """The tree under test as it is on disk, minus what git ignores of it (builds, caches), into a
    directory whose path is as long as the base's: outputs that name a file of the tree (a bundled
    scenario's path in a shrunk file's description) then wrap the same way on both sides."""
    ignored = shutil.ignore_patterns(*COPY_IGNORED)

    def ignore(folder: str, names: list[str]) -> set[str]:
        found = set(ignored(folder, names))
        if Path(folder) == source:
            found |= set(COPY_IGNORED_AT_TOP) & set(names)
        return found

    shutil.copytree(source, into, symlinks=True, ignore=ignore)


def check_tree(name: str, tree: Path, work: Path) -> None:
    """The packages import from ``tree``, on the pure-Python core; else exit 2."""
    code = ("import emulator, replemu, scenario_io, streaming; "
            "print(emulator.BUILD); print(emulator.__file__, replemu.__file__, scenario_io.__file__, streaming.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=work, env=environment(tree, work), capture_output=True,
                          text=True)
    if done.returncode:
        print(f"same_outputs: the {name} ({tree}) does not import:\n{done.stderr[-2000:]}", file=sys.stderr)
        raise SystemExit(2)
    build, files = done.stdout.splitlines()[:2]
    if not all(Path(f).resolve().is_relative_to(tree.resolve()) for f in files.split()):
        print(f"same_outputs: the {name}'s packages do not import from {tree}: {files}", file=sys.stderr)
        raise SystemExit(2)
    if build != "pure Python":
        print(f"same_outputs: the {name} runs the {build} core, not pure Python", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, metavar="REV", help="the commit whose outputs are the reference")
    parser.add_argument("--tree", type=Path, default=ROOT, metavar="DIR",
                        help="the tree under test (default: the repository this script is in, as it is on disk)")
    parser.add_argument("--quick", action="store_true", help="leave out the entries that start a JVM")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the entries whose name contains TEXT (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and say where it is")
    parser.add_argument("--parallel", action="store_true",
                        help="run the two sides of an entry at the same time (by default they take turns, "
                             "alternating which goes first)")
    args = parser.parse_args(argv)

    source = args.tree.resolve()
    if not (source / "replemu" / "__init__.py").is_file():
        parser.error(f"--tree {args.tree}: not a replemu source tree (no replemu/__init__.py)")
    commit = git("rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}")
    if commit.returncode:
        parser.error(f"--base {args.base}: not a commit of {ROOT}")
    sha = commit.stdout.strip()

    work = Path(tempfile.mkdtemp(prefix="replemu-same-outputs-"))
    status = 2
    try:
        base, tree = work / "base", work / "tree"
        extract(sha, base, who="same_outputs", byte_compile=False)  # bytecode goes to PYTHONPYCACHEPREFIX
        copy_tree(source, tree)
        (work / "runs").mkdir()
        check_tree("base", base, work)
        check_tree("tree", tree, work)
        entries, notes = build_corpus(base, tree, args.quick)
        if args.only:
            entries = [e for e in entries if any(t in e.title for t in args.only)]
        print(f"same_outputs: base {args.base} ({sha[:12]}) against the tree {source}, both copied under {work}",
              flush=True)
        print(f"  {len(entries)} entries" + (" (--quick: no JVM)" if args.quick else "")
              + f"; python {sys.executable}, REPLEMU_PURE=1", flush=True)
        for note in notes:
            print(f"  {note}", flush=True)
        started, differences, engines, cpu_total = time.monotonic(), [], {}, 0.0
        width = len(str(len(entries)))
        for i, entry in enumerate(entries, 1):
            print(f"[{i:>{width}}/{len(entries)}] {entry.title} ... ", end="", flush=True)
            sides = [("base", base), ("tree", tree)]
            if i % 2 == 0:  # alternate which side runs first
                sides.reverse()
            if args.parallel:
                with ThreadPoolExecutor(2) as pool:
                    running = {name: pool.submit(run_entry, entry, root, work / "runs", args.keep)
                               for name, root in sides}
                    outcomes = {name: future.result() for name, future in running.items()}
            else:
                outcomes = {name: run_entry(entry, root, work / "runs", args.keep) for name, root in sides}
            found = difference(outcomes["base"], outcomes["tree"])
            b, t = outcomes["base"], outcomes["tree"]
            times = f"(base {b.seconds:.1f} s, tree {t.seconds:.1f} s; CPU {b.cpu:.1f} s | {t.cpu:.1f} s)"
            cpu_total += b.cpu + t.cpu
            print(f"{'same' if found is None else 'DIFFERENT: ' + found}  {times}", flush=True)
            engines.setdefault(entry.engine, [0, 0])[found is not None] += 1
            if found is not None:
                differences.append(entry.title)
        total = time.monotonic() - started
        counts = ", ".join(f"{engine} {sum(n)}" for engine, n in engines.items())
        print(f"summary: {len(entries)} entries ({counts}): {len(entries) - len(differences)} same, "
              f"{len(differences)} different; {len(notes)} files in one tree only; {total:.0f} s "
              f"({cpu_total:.0f} CPU s)", flush=True)
        for title in differences:
            print(f"  DIFFERENT: {title}")
        status = 1 if differences else 0
    finally:
        for group in list(RUNNING):  # stopped (Ctrl-C): the commands still running go too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        if args.keep:
            print(f"same_outputs: the runs are kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("same_outputs: stopped", file=sys.stderr)
        sys.exit(130)
