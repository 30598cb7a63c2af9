"""Hostile inputs for ``replemu``: scenario files and command lines that try to break it.

Two families, both deterministic (from a seed) and usable as Hypothesis strategies:

* **Scenario files** (``Case``): mutations of the bundled scenarios (``replemu/scenarios/*.yaml``,
  ``docs/examples/*.yaml``) and files made from scratch.  Every case carries a ``label`` (which
  generator, which seed file, what it did), the bytes of the file, and an ``expected`` class:

  - ``valid``   the file is a valid scenario: ``replemu run FILE --protocol all --json`` must
                replay it (exit 0, or 1 under ``--check``);
  - ``invalid`` the contract (docs/scenario-format.md) says it is not a scenario: exit 2 with a
                one-line message naming the file;
  - ``either``  genuinely debatable (the ``note`` says why): replayed, or cleanly refused (exit 2
                with a one-line message naming the file).

  Whatever the class, no case may crash (traceback, exit status other than 0/1/2) or hang.

* **Command lines** (``CliCase``, the list ``CLI_CASES``; ``cli_fixtures`` makes the files they
  name): bad arguments for every command, each expected to exit 2 with a message (its last
  line short, naming the bad path or value) and no traceback; ``spark`` marks the ones that
  would start Spark if the arguments were not checked first (they must fail fast).

``make_case(generator, seed, n)`` builds one case; ``generate(seed, count)`` a repeatable batch
(the issue's own examples, ``issue_examples()``, first; then round-robin over the generators, so
every kind is exercised); ``case_strategy()`` the same as a Hypothesis strategy;
``judge_scenario_run`` / ``judge_cli_run`` classify an outcome (clean, traceback, hang/timeout,
silently accepted, other).  ``scripts/fuzz.py`` re-measures the whole table; ``tests/test_fuzz.py`` runs a
small budget of it in-process.

This module knows the contract from the docs, not from the product's code: it imports nothing
of ``emulator``/``replemu`` (so it keeps working while they change, and cannot agree with a bug).
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from emulator import VARIANT_NAMES

ROOT = Path(__file__).resolve().parent.parent
SEED_GLOBS = ("replemu/scenarios/*.yaml", "docs/examples/*.yaml")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

VALID, INVALID, EITHER = "valid", "invalid", "either"
CLASSES = (VALID, INVALID, EITHER)

VARIANTS = ("hw", "kip101", "kip279", "kip320")  # the variants hostile expect blocks name (a fixed corpus)
INVARIANTS_SAMPLE = ("NoCommittedDataLoss", "StrongIsr", "EventualConvergence", "EpochMonotonicity")
TOP_KEYS = ("name", "description", "topic", "partition", "replicas", "config", "steps", "expect", "initial_state")
REQUIRED_TOP = ("name", "replicas", "steps")
EXPECT_KEYS = ("violations", "losses", "replicas", "controller", "at_step")
REPLICA_FIELDS = ("alive", "halted", "role", "leader_epoch", "leo", "hw", "log", "epoch_cache", "remote_leo")
CONTROLLER_FIELDS = ("leader", "epoch", "isr", "elr", "last_known_elr", "fenced")
LOSS_FIELDS = ("offset", "value", "acked", "allowed", "step")

# docs/steps.md: every argument of every step kind; a trailing "!" marks a required argument.
STEP_ARGS: dict[str, dict[str, str]] = {
    "elect": {"leader": "replica", "epoch": "epoch", "isr": "replica_list", "to": "replica_list", "unclean": "bool"},
    "leader_and_isr": {"replica": "replica!", "epoch": "epoch"},
    "produce": {"value": "string", "values": "string_list", "acks": "acks", "replica": "replica"},
    "fetch": {"replica": "replica!", "max_records": "count", "response": "choice:delivered,lost"},
    "shrink_isr": {"replica": "replica!"},
    "controller_remove": {"replica": "replica!"},
    "checkpoint_hw": {"replica": "replica"},
    "flush": {"replica": "replica!", "offset": "offset"},
    "crash": {"replica": "replica!", "mode": "choice:process,power"},
    "restart": {"replica": "replica!", "fenced": "bool"},
    "tick": {"ms": "millis!"},
    "shutdown": {"replica": "replica!"},
    "fence": {"replica": "replica!"},
    "unfence": {"replica": "replica!"},
    "alter_partition": {"replica": "replica!"},
    "log_info": {"replica": "replica!"},
    "lag_metadata": {"replica": "replica!"},
}
STEP_KINDS = tuple(STEP_ARGS)
# docs/scenario-format.md §1: config keys and their types.
CONFIG_TYPES = {
    "min_insync_replicas": "min_isr", "unclean_leader_election": "bool", "acks": "acks",
    "hw_checkpoint": "choice:every_step,explicit", "log_flush": "choice:every_step,explicit",
    "replica_lag_time_max_ms": "millis", "alter_partition": "choice:every_step,explicit", "knobs": "knobs",
}
# Integer types and their ranges (Kafka: epochs and counts int32, offsets and times int64).
INT_RANGES = {"epoch": (0, INT32_MAX), "count": (0, INT32_MAX), "offset": (0, INT64_MAX), "millis": (0, INT64_MAX),
              "partition": (0, INT32_MAX), "replica_id": (0, INT32_MAX)}
ACKS_OK = ("all", "-1", "1", "0", -1, 1, 0)
NAME_RE = re.compile(r"^[a-z0-9._-]+$")

# The numbers of the issue, and their neighbours.
HOSTILE_NUMBERS: tuple[Any, ...] = (
    10**30, -10**30, -1, 2**31, 2**31 - 1, 2**32, 2**63, 2**63 - 1, 2**64, -(2**63), 1e308, -1e308,
    float("nan"), float("inf"), float("-inf"), 1.0, 0.5, -0.0, True, False, 0, 1, "1", "0x10", "1e3", None,
)
WRONG_TYPES: tuple[Any, ...] = ("x", "1", "", 1.5, True, False, 7, [1], ["a"], [], {"a": 1}, {}, None, b"\x00bin")


# -- the case --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    label: str  # "<generator>/<seed file>: <what it did>"
    generator: str
    expected: str  # valid | invalid | either
    data: bytes  # the file's contents
    note: str = ""  # why a case is "either"

    def write(self, directory: Path, name: str = "hostile-case.yaml") -> Path:
        path = Path(directory) / name
        path.write_bytes(self.data)
        return path


class Pairs(list):
    """A mapping written as its (key, value) pairs, in order: duplicates allowed."""


@dataclass(frozen=True)
class Tagged:
    """A node written with an explicit tag: ``Tagged("!foo", "x")``, ``Tagged("tag:yaml.org,2002:int", "0x1")``."""

    tag: str
    value: Any


def _represent_tagged(dumper: yaml.SafeDumper, t: Tagged):
    if isinstance(t.value, dict):
        return dumper.represent_mapping(t.tag, t.value)
    if isinstance(t.value, list):
        return dumper.represent_sequence(t.tag, t.value)
    return dumper.represent_scalar(t.tag, str(t.value))


# libyaml's emitter when PyYAML has it (the big cases are slow to write in pure Python).
_Dumper = type("_Dumper", (getattr(yaml, "CSafeDumper", yaml.SafeDumper),), {})  # type: ignore[misc]
_Dumper.add_representer(Pairs, lambda d, p: d.represent_mapping("tag:yaml.org,2002:map", list(p)))
_Dumper.add_representer(Tagged, _represent_tagged)


def dump(doc: Any, flow: bool | None = None, width: int = 120) -> str:
    """YAML text of ``doc`` (key order kept; shared objects become anchors and aliases)."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=flow, width=width)


def _b(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


# -- the seeds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    name: str  # file stem
    raw: bytes
    doc: dict


_SEEDS: dict[str, Seed] | None = None


def seeds() -> dict[str, Seed]:
    global _SEEDS
    if _SEEDS is None:
        found = {}
        for pattern in SEED_GLOBS:
            for p in sorted(ROOT.glob(pattern)):
                raw = p.read_bytes()
                found[p.stem] = Seed(p.stem, raw, yaml.safe_load(raw))
        if not found:
            raise RuntimeError(f"no seed scenarios under {ROOT} ({', '.join(SEED_GLOBS)})")
        _SEEDS = found
    return _SEEDS


def seed_names() -> list[str]:
    return list(seeds())


# -- document helpers ------------------------------------------------------------------------

Path_ = tuple  # a path into a document: keys and list indices


def get_at(doc: Any, path: Path_) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def set_at(doc: Any, path: Path_, value: Any) -> None:
    """Set ``doc[path] = value``, creating missing mappings on the way."""
    node = doc
    for k in path[:-1]:
        if isinstance(node, dict) and (k not in node or not isinstance(node[k], (dict, list))):
            node[k] = {}
        node = node[k]
    node[path[-1]] = value


def del_at(doc: Any, path: Path_) -> None:
    del get_at(doc, path[:-1])[path[-1]]


def show_path(path: Path_) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) and not isinstance(k, bool) else (f".{k}" if out else str(k))
    return out


def short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def step_kind(step: Any) -> str | None:
    return next(iter(step)) if isinstance(step, dict) and len(step) == 1 else None


def step_args(step: dict) -> dict:
    kind = step_kind(step)
    if step[kind] is None:
        step[kind] = {}
    return step[kind]


def replicas_of(doc: dict) -> list[int]:
    return list(doc.get("replicas") or [])


def referenced_replicas(doc: dict) -> set:
    """Replica ids the steps and the expect block name."""
    used: set = set()
    for step in doc.get("steps") or []:
        kind = step_kind(step)
        args = step.get(kind) or {} if kind else {}
        for name, t in STEP_ARGS.get(kind, {}).items():
            if name in args and t.startswith("replica_list"):
                used.update(args[name] or [])
            elif name in args and t.startswith("replica"):
                used.add(args[name])
    for block in (doc.get("expect") or {}).values():
        if isinstance(block, dict):
            used.update((block.get("replicas") or {}).keys())
            ctl = block.get("controller") or {}
            if ctl.get("leader") is not None:
                used.add(ctl["leader"])
            used.update(ctl.get("isr") or [])
    return used


def rename_replica(doc: dict, old: Any, new: Any) -> None:
    """Rename replica ``old`` to ``new`` everywhere: the list, step arguments, expect keys and values."""
    doc["replicas"] = [new if r == old and type(r) is type(old) else r for r in doc["replicas"]]
    for step in doc.get("steps") or []:
        kind = step_kind(step)
        args = step.get(kind) if kind else None
        if not isinstance(args, dict):
            continue
        for name, t in STEP_ARGS.get(kind, {}).items():
            if name not in args:
                continue
            if t.startswith("replica_list"):
                args[name] = [new if x == old else x for x in args[name]]
            elif t.startswith("replica") and args[name] == old:
                args[name] = new

    def fix_state(state: dict) -> None:
        reps = state.get("replicas")
        if isinstance(reps, dict):
            state["replicas"] = {(new if k == old else k): v for k, v in reps.items()}
            for fields in state["replicas"].values():
                rl = fields.get("remote_leo") if isinstance(fields, dict) else None
                if isinstance(rl, dict):
                    fields["remote_leo"] = {(str(new) if str(k) == str(old) else k): v for k, v in rl.items()}
        ctl = state.get("controller")
        if isinstance(ctl, dict):
            if ctl.get("leader") == old:
                ctl["leader"] = new
            if isinstance(ctl.get("isr"), list):
                ctl["isr"] = [new if x == old else x for x in ctl["isr"]]

    for block in (doc.get("expect") or {}).values():
        if isinstance(block, dict):
            fix_state(block)
            for state in (block.get("at_step") or {}).values():
                if isinstance(state, dict):
                    fix_state(state)


def unknown_replica(doc: dict, rng: random.Random) -> int:
    reps = set(replicas_of(doc))
    return rng.choice([r for r in (0, 4, 7, 99, 1000, INT32_MAX, max(reps) + 1) if r not in reps])


def random_string(rng: random.Random, n: int, alphabet: str = string.ascii_lowercase + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def random_valid_step(rng: random.Random, reps: list[int]) -> dict:
    """A step that passes validation (its outcome may be an error answer, which is recorded)."""
    kind = rng.choice(STEP_KINDS)
    r = rng.choice(reps)
    if kind == "elect":
        args: dict = {}
        if rng.random() < 0.6:
            args["leader"] = r
        if rng.random() < 0.4:
            isr = sorted(set(rng.sample(reps, rng.randint(1, len(reps)))) | ({r} if "leader" in args else set()))
            args["isr"] = isr
        if rng.random() < 0.3:
            args["to"] = rng.sample(reps, rng.randint(1, len(reps)))
        if rng.random() < 0.3:
            args["epoch"] = rng.randint(0, 12)
        if rng.random() < 0.2:
            args["unclean"] = rng.random() < 0.5
        return {kind: args}
    if kind == "produce":
        args = {"value": random_string(rng, 3)} if rng.random() < 0.7 else {"values": [random_string(rng, 2) for _ in range(rng.randint(1, 4))]}
        if rng.random() < 0.3:
            args["acks"] = rng.choice(["all", 1, 0, -1, "1", "-1"])
        if rng.random() < 0.2:
            args["replica"] = r
        return {kind: args}
    if kind == "fetch":
        args = {"replica": r}
        if rng.random() < 0.2:
            args["max_records"] = rng.randint(0, 3)
        if rng.random() < 0.2:
            args["response"] = rng.choice(["delivered", "lost"])
        return {kind: args}
    if kind == "leader_and_isr":
        return {kind: {"replica": r, **({"epoch": rng.randint(0, 8)} if rng.random() < 0.3 else {})}}
    if kind == "checkpoint_hw":
        return {kind: {"replica": r} if rng.random() < 0.7 else {}}
    if kind == "flush":
        return {kind: {"replica": r, **({"offset": rng.randint(0, 6)} if rng.random() < 0.5 else {})}}
    if kind == "crash":
        return {kind: {"replica": r, **({"mode": rng.choice(["process", "power"])} if rng.random() < 0.5 else {})}}
    if kind == "tick":
        return {kind: {"ms": rng.choice([0, 1, 5000, 10000, 10001, 30000])}}
    return {kind: {"replica": r}}


# -- judging a value against a type (the contract, from the docs) ------------------------------


def judge(t: str, value: Any, doc: dict, required: bool = False, ctx: dict | None = None) -> tuple[str, str]:
    """The class of a document whose slot of type ``t`` holds ``value`` (everything else valid);
    the second item is the note for an ``either``."""
    ctx = ctx or {}
    if t.endswith("!"):
        t, required = t[:-1], True
    if value is None:
        if required:
            return INVALID, ""
        return EITHER, "null for an optional key: absent, or a wrong type"
    reps = replicas_of(doc)
    if t == "replica":
        if not (is_int(value) and value in reps):
            return INVALID, ""
        if ctx.get("isr") is not None and value not in ctx["isr"]:
            return INVALID, ""
        return VALID, ""
    if t == "replica_list":
        ok = isinstance(value, list) and all(is_int(x) and x in reps for x in value) and len(set(value)) == len(value)
        if ok and ctx.get("is_isr"):
            ok = bool(value) and (ctx.get("leader") is None or ctx["leader"] in value)
        return (VALID if ok else INVALID), ""
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        if not is_int(value) or not lo <= value <= hi:
            return INVALID, ""
        if t == "epoch" and value > INT32_MAX - 16:
            return EITHER, "an epoch at the int32 limit: a later election or controller_remove bumps it past int32"
        if t == "millis" and value > INT64_MAX // 2 and ctx.get("ticks", 0) > 1:
            return EITHER, "emulated time summed over several ticks passes int64"
        return VALID, ""
    if t == "min_isr":
        return (VALID if is_int(value) and 1 <= value <= len(reps) else INVALID), ""
    if t == "bool":
        return (VALID if isinstance(value, bool) else INVALID), ""
    if t in ("string", "description"):
        return (VALID if isinstance(value, str) else INVALID), ""
    if t == "topic":
        if not isinstance(value, str):
            return INVALID, ""
        if value == "" or not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", value):
            return EITHER, "the contract says topic is a string; Kafka forbids this topic name"
        return VALID, ""
    if t == "name":
        if not (isinstance(value, str) and NAME_RE.match(value)):
            return INVALID, ""
        return (VALID if len(value) <= 249 else EITHER), "a very long name: the contract sets no limit"
    if t == "string_list":
        return (VALID if isinstance(value, list) and value and all(isinstance(x, str) for x in value) else INVALID), ""
    if t == "acks":
        ok = not isinstance(value, (bool, float)) and any(value == a and type(value) is type(a) for a in ACKS_OK)
        return (VALID if ok else INVALID), ""
    if t.startswith("choice:"):
        return (VALID if isinstance(value, str) and value in t[7:].split(",") else INVALID), ""
    if t == "knobs":
        return (VALID if value == {} else INVALID), ""
    raise AssertionError(t)


def step_slots(doc: dict) -> list[tuple[Path_, str, dict]]:
    """(path, type, context) of every argument position of every step, present or not."""
    out = []
    for i, step in enumerate(doc.get("steps") or []):
        kind = step_kind(step)
        if kind not in STEP_ARGS or not isinstance(step[kind], (dict, type(None))):
            continue
        args = step[kind] or {}
        for name, t in STEP_ARGS[kind].items():
            if kind == "produce" and name in ("value", "values") and name not in args:
                continue  # adding the other one is a different error (exactly one of them)
            ctx: dict = {}
            if kind == "elect":
                if name == "leader":
                    ctx["isr"] = args.get("isr")
                if name == "isr":
                    ctx.update(is_isr=True, leader=args.get("leader"))
            out.append((("steps", i, kind, name), t, ctx))
    return out


# -- the generators --------------------------------------------------------------------------


@dataclass
class G:
    """What a generator works on: its random source and a private copy of the seed."""

    rng: random.Random
    seed: Seed
    n: int = 0  # the case number (most generators draw from ``rng`` instead)
    doc: dict = field(init=False)

    def __post_init__(self) -> None:
        self.doc = copy.deepcopy(self.seed.doc)

    def choice(self, xs):
        return self.rng.choice(list(xs))


# A generator returns (detail, expected, data[, note]); data is a document (dumped here),
# YAML text or bytes.
Result = tuple
GENERATORS: dict[str, Callable[[G], Result]] = {}


def generator(name: str):
    def register(fn):
        GENERATORS[name] = fn
        return fn
    return register


# .. valid files ..


@generator("seed-as-is")
def _seed_as_is(g: G) -> Result:
    if g.rng.random() < 0.5:
        return "the bundled file, byte for byte", VALID, g.seed.raw
    style = g.choice([None, False, True])
    return f"re-dumped (flow style {style})", VALID, dump(g.doc, flow=style)


@generator("drop-optional")
def _drop_optional(g: G) -> Result:
    paths = [(k,) for k in ("description", "topic", "partition", "config", "expect") if k in g.doc]
    for v, block in (g.doc.get("expect") or {}).items():
        paths.append(("expect", v))
        paths += [("expect", v, k) for k in block]
    path = g.choice(paths)
    del_at(g.doc, path)
    return f"dropped {show_path(path)}", VALID, g.doc


@generator("reshape-steps")
def _reshape_steps(g: G) -> Result:
    """Shuffle, duplicate or drop steps: still valid (outcomes are recorded, not raised)."""
    steps = g.doc["steps"]
    how = g.choice(["shuffle", "duplicate", "drop", "reverse"])
    if how == "shuffle":
        g.rng.shuffle(steps)
    elif how == "reverse":
        steps.reverse()
    elif how == "duplicate":
        for _ in range(g.rng.randint(1, 5)):
            i = g.rng.randrange(len(steps))
            steps.insert(i, copy.deepcopy(steps[i]))
    else:
        keep = sorted(g.rng.sample(range(len(steps)), g.rng.randint(1, len(steps))))
        g.doc["steps"] = [steps[i] for i in keep]
    return f"steps {dict(shuffle='shuffled', reverse='reversed', duplicate='duplicated', drop='dropped')[how]}", VALID, g.doc


@generator("random-valid-steps")
def _random_valid_steps(g: G) -> Result:
    reps = replicas_of(g.doc)
    n = g.rng.randint(1, 60)
    for _ in range(n):
        g.doc["steps"].insert(g.rng.randint(0, len(g.doc["steps"])), random_valid_step(g.rng, reps))
    return f"{n} random valid steps inserted", VALID, g.doc


@generator("rename-replicas")
def _rename_replicas(g: G) -> Result:
    """Replica ids renamed consistently, to ids at the edges of the allowed range."""
    reps = replicas_of(g.doc)
    pool = [x for x in (0, 5, 1000, 65535, INT32_MAX - 1, INT32_MAX) if x not in reps]
    old = g.choice(reps)
    new = g.choice(pool)
    rename_replica(g.doc, old, new)
    return f"replica {old} renamed to {new} everywhere", VALID, g.doc


@generator("boundary-numbers")
def _boundary_numbers(g: G) -> Result:
    """Numbers at the top of their documented range (int32 / int64), each in a valid position."""
    reps = replicas_of(g.doc)
    r = g.choice(reps)
    which = g.choice(["partition", "flush.offset", "fetch.max_records", "tick.ms", "lag", "min_isr", "zero-tick"])
    if which == "partition":
        g.doc["partition"] = INT32_MAX
    elif which == "flush.offset":
        g.doc["steps"].append({"flush": {"replica": r, "offset": INT64_MAX}})
    elif which == "fetch.max_records":
        g.doc["steps"].append({"fetch": {"replica": r, "max_records": INT32_MAX}})
    elif which == "tick.ms":
        g.doc["steps"].append({"tick": {"ms": INT64_MAX}})
    elif which == "zero-tick":
        g.doc["steps"].append({"tick": {"ms": 0}})
    elif which == "lag":
        g.doc.setdefault("config", {})["replica_lag_time_max_ms"] = INT64_MAX
        g.doc["steps"].append({"tick": {"ms": INT32_MAX}})
    else:
        g.doc.setdefault("config", {})["min_insync_replicas"] = len(reps)
    return f"{which} at the top of its range", VALID, g.doc


@generator("unicode-strings")
def _unicode_strings(g: G) -> Result:
    samples = ["naïve ☃ 🚀", "\u202eevil", "a\tb", "\x00nul", "\x01\x7f", "line\nbreak", "'quotes\"", "\\", "  spaced  ",
               "\ufeffbom", "日本語", "z" * 5000, "- not: a list", "*alias", "&anchor", "!tag", "%", "@", "`", "#", "null", "~",
               "true", "0x10", "1e3", ".nan", "---", "..."]
    where = g.choice(["description", "value", "values", "topic"])
    text = g.choice(samples)
    if where == "description":
        g.doc["description"] = text
    elif where == "topic":
        g.doc["topic"] = text
        ok, note = judge("topic", text, g.doc)
        return f"topic {short(text)}", ok, g.doc, note
    else:
        produce = [s for s in g.doc["steps"] if step_kind(s) == "produce"]
        if not produce:
            g.doc["steps"].append({"produce": {"value": "x"}})
            produce = g.doc["steps"][-1:]
        args = step_args(g.choice(produce))
        args.pop("value", None), args.pop("values", None)
        args[where] = text if where == "value" else [text, text + "2"]
    return f"{where} = {short(text)}", VALID, g.doc


@generator("yaml-features")
def _yaml_features(g: G) -> Result:
    """Legitimate YAML that a hand-written file may use: anchors, comments, markers, line ends."""
    how = g.choice(["small-aliases", "comments", "doc-markers", "crlf", "cr", "canonical", "str-tag", "int-tag",
                    "yaml-directive", "quoted-keys", "explicit-keys"])
    text = dump(g.doc)
    if how == "small-aliases":
        reps = g.doc["replicas"]  # the same list object: written as &id / *id
        g.doc["steps"].append({"elect": {"leader": reps[0], "isr": reps}})
        fetch = {"replica": reps[-1]}
        g.doc["steps"] += [{"fetch": fetch}, {"fetch": fetch}]
        text = dump(g.doc)
        assert "&id" in text
    elif how == "comments":
        text = "# a comment\n" + "".join(line + "  # trailing\n" if line and not line.endswith(("|", ">", ":", "-")) else line + "\n"
                                         for line in dump(g.doc, flow=False).splitlines())
        text += "# end\n"
    elif how == "doc-markers":
        text = "---\n" + text + "...\n"
    elif how == "crlf":
        text = text.replace("\n", "\r\n")
    elif how == "cr":
        text = text.replace("\n", "\r")
    elif how == "canonical":
        text = yaml.dump(g.doc, Dumper=_Dumper, canonical=True, sort_keys=False, allow_unicode=True)
    elif how == "str-tag":
        text = text.replace(f"name: {g.doc['name']}", f"name: !!str {g.doc['name']}", 1)
    elif how == "int-tag":
        text = re.sub(r"replica: (\d+)", r'replica: !!int "\1"', text, count=1)
    elif how == "yaml-directive":
        text = "%YAML 1.1\n---\n" + text
    elif how == "quoted-keys":
        text = re.sub(r"^(\w+):", r'"\1":', text, flags=re.M)
    else:
        text = re.sub(r"^(name|replicas):", r"? \1\n:", text, flags=re.M)
    return f"YAML feature: {how}", VALID, text


@generator("merge-keys")
def _merge_keys(g: G) -> Result:
    r = g.choice(replicas_of(g.doc))
    text = dump(g.doc).rstrip("\n")
    base = f"- crash: &base {{replica: {r}}}\n- restart: {{<<: *base}}\n"
    text = text.replace("steps:\n", "steps:\n" + base, 1) if "steps:\n" in text else None
    if text is None:
        g.doc["steps"] += [{"crash": {"replica": r}}, {"restart": {"replica": r}}]
        return "(no block steps) plain crash/restart", VALID, g.doc
    return "a step's arguments built with a YAML 1.1 merge key (<<)", EITHER, text + "\n", \
        "merge keys are YAML 1.1, not 1.2: a loader may support them or refuse them cleanly"


@generator("huge-valid")
def _huge_valid(g: G) -> Result:
    reps = replicas_of(g.doc)
    how = g.choice(["steps", "values", "description", "value", "64-replicas"])
    if how == "64-replicas":
        reps = list(range(64))
        steps: list = [{"elect": {}}]
        for k in range(2):
            steps.append({"produce": {"values": [f"m{k}-{i}" for i in range(5)]}})
            steps += [{"fetch": {"replica": i}} for i in range(1, 64)]
        steps += [{"crash": {"replica": 0}}, {"elect": {}}] + [{"fetch": {"replica": i}} for i in range(2, 64)]
        return "64 replicas (the most allowed), ~190 steps", VALID, {"name": "most-replicas", "replicas": reps, "steps": steps}
    if how == "steps":
        g.doc["steps"] += [random_valid_step(g.rng, reps) for _ in range(3000)]
    elif how == "values":
        g.doc["steps"].append({"produce": {"values": [f"v{i}" for i in range(20000)]}})
    elif how == "description":
        g.doc["description"] = random_string(g.rng, 400_000, string.ascii_letters + " ")
    else:
        g.doc["steps"].append({"produce": {"value": "x" * 1_000_000}})
    return f"huge but valid: {how}", VALID, g.doc


# .. debatable files ..


@generator("huge-lists")
def _huge_lists(g: G) -> Result:
    how = g.choice(["replicas", "name", "violations-dup", "losses"])
    if how == "replicas":  # refused now (at most 64): kept here, where it was debatable
        n = g.choice([65, 1000])
        doc = {"name": "many-replicas", "replicas": list(range(n)),
               "steps": [{"elect": {}}, {"produce": {"value": "x"}}] + [{"fetch": {"replica": i}} for i in range(1, n)]}
        return f"{n} replicas, a fetch from each (the contract allows 64)", INVALID, doc
    if how == "name":
        g.doc["name"] = "n" * 100_000
        return "a 100,000-character name", EITHER, g.doc, "the contract sets no length limit on names"
    block = g.doc.setdefault("expect", {}).setdefault(g.choice(VARIANTS), {})
    if how == "violations-dup":
        block["violations"] = ["StrongIsr"] * 20_000
        return "expect violations: StrongIsr x 20,000", EITHER, g.doc, "repeated known names: duplicates may be refused"
    block["losses"] = [{"offset": i} for i in range(10_000)]
    return "expect losses: 10,000 entries", EITHER, g.doc, "well-typed but absurd: replay or refuse, never hang"


@generator("null-optional")
def _null_optional(g: G) -> Result:
    slots = [((k,), {"config": "config", "expect": "expect"}.get(k, "x")) for k in ("description", "topic", "partition", "config", "expect")]
    slots += [(p, t) for p, t, _ in step_slots(g.doc) if not t.endswith("!")]
    path, _ = g.choice(slots)
    set_at(g.doc, path, None)  # for produce's only record argument, null means no records: invalid
    expected = INVALID if path[-1] in ("value", "values") else EITHER
    return f"{show_path(path)}: null", expected, g.doc, "null for an optional key: the same as absent, or a wrong type"


@generator("encodings")
def _encodings(g: G) -> Result:
    text = dump(g.doc)
    how = g.choice(["utf8-bom", "utf16-le-bom", "utf16-be-bom", "utf32-bom", "bom-mid-value", "tab-separator"])
    note = "YAML allows a byte order mark (and UTF-16/32); the contract says UTF-8: accept or refuse cleanly"
    if how == "utf8-bom":
        return "UTF-8 byte order mark", EITHER, b"\xef\xbb\xbf" + _b(text), note
    if how == "utf16-le-bom":
        return "UTF-16-LE with BOM", EITHER, b"\xff\xfe" + text.encode("utf-16-le"), note
    if how == "utf16-be-bom":
        return "UTF-16-BE with BOM", EITHER, b"\xfe\xff" + text.encode("utf-16-be"), note
    if how == "utf32-bom":
        return "UTF-32 with BOM", EITHER, text.encode("utf-32"), note
    if how == "bom-mid-value":
        g.doc["description"] = "a\ufeffb"
        return "a U+FEFF inside a string", VALID, g.doc
    return "a tab as the separator after a colon", EITHER, re.sub(r"^name: ", "name:\t", text, flags=re.M), \
        "YAML 1.2 allows tabs as separation, PyYAML does not"


@generator("expect-debatable")
def _expect_debatable(g: G) -> Result:
    reps = replicas_of(g.doc)
    v = g.choice(VARIANTS)
    how = g.choice(["null-block", "null-expect", "string-replica-key", "leader-unknown", "negative-offset", "huge-leo",
                    "null-violations", "empty-steps", "steps-null-args"])
    note = "debatable: the contract does not say"
    if how == "null-block":
        g.doc.setdefault("expect", {})[v] = None
    elif how == "null-expect":
        g.doc["expect"] = None
    elif how == "string-replica-key":
        g.doc.setdefault("expect", {}).setdefault(v, {})["replicas"] = {str(reps[0]): {"alive": True}}
        note = "a replica id written as a string key ('1'), as result JSON writes it"
    elif how == "leader-unknown":
        g.doc.setdefault("expect", {}).setdefault(v, {})["controller"] = {"leader": unknown_replica(g.doc, g.rng)}
        note = "a controller leader that is no replica: the expectation can never hold"
    elif how == "negative-offset":
        g.doc.setdefault("expect", {}).setdefault(v, {})["losses"] = [{"offset": -1}]
        note = "a well-typed loss offset that can never occur"
    elif how == "huge-leo":
        g.doc.setdefault("expect", {}).setdefault(v, {})["replicas"] = {reps[0]: {"leo": 10**30}}
        note = "an expected LEO beyond int64: range-checked or just never equal"
    elif how == "null-violations":
        g.doc.setdefault("expect", {}).setdefault(v, {})["violations"] = None
    elif how == "empty-steps":
        g.doc["steps"] = []
        g.doc.pop("expect", None)
        note = "steps is required; an empty list replays nothing"
    else:
        g.doc["steps"].append({g.choice(["elect", "checkpoint_hw"]): None})
        note = "`- elect:` (null arguments) for a step whose arguments are all optional"
    return f"{how} ({v})", EITHER, g.doc, note


# .. invalid files: structure ..


@generator("delete-required")
def _delete_required(g: G) -> Result:
    key = g.choice(REQUIRED_TOP)
    del g.doc[key]
    return f"no {key}", INVALID, g.doc


def _mappings(doc: Any, path: Path_ = ()) -> Iterator[Path_]:
    if isinstance(doc, dict):
        if doc:
            yield path
        for k, v in doc.items():
            yield from _mappings(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _mappings(v, path + (i,))


def _mangle(rng: random.Random, key: Any) -> Any:
    if not isinstance(key, str) or not key:
        return rng.choice([f"{key}x", f"r{key}", -7 if is_int(key) else "?"])
    how = rng.choice(["typo", "upper", "suffix", "space", "plural", "dash"])
    if how == "typo" and len(key) > 1:
        i = rng.randrange(len(key))
        return key[:i] + key[i + 1:]
    if how == "upper":
        return key[0].upper() + key[1:]
    if how == "space":
        return key + " "
    if how == "plural":
        return key + "s" if not key.endswith("s") else key[:-1] + "z"
    if how == "dash":
        return key.replace("_", "-") if "_" in key else key + "-"
    return key + "_x"


def _known_keys_at(doc: dict, path: Path_) -> set:
    """Keys that would be valid at the mapping ``path`` (so a mangled key is really unknown)."""
    if path == ():
        return set(TOP_KEYS)
    if path == ("config",):
        return set(CONFIG_TYPES)
    if len(path) == 2 and path[0] == "steps":
        return set(STEP_KINDS)
    if len(path) == 3 and path[0] == "steps":
        return set(STEP_ARGS.get(path[2], {}))
    if path == ("expect",):
        return set(VARIANTS)
    if len(path) == 2 and path[0] == "expect":
        return set(EXPECT_KEYS)
    return set(REPLICA_FIELDS) | set(CONTROLLER_FIELDS) | set(LOSS_FIELDS) | set(replicas_of(doc)) | {str(r) for r in replicas_of(doc)}


def _renamed(d: dict, old: Any, new: Any) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


@generator("rename-key")
def _rename_key(g: G) -> Result:
    paths = [p for p in _mappings(g.doc) if "remote_leo" not in p and "knobs" not in p]
    path = g.choice(paths)
    node = get_at(g.doc, path)
    key = g.choice(node)
    known = _known_keys_at(g.doc, path)
    new = _mangle(g.rng, key)
    while new in known or new in node:
        new = f"{new}_"
    if path:
        set_at(g.doc, path, _renamed(node, key, new))
    else:
        g.doc = _renamed(node, key, new)
    return f"key {show_path(path + (key,))} renamed to {short(new)}", INVALID, g.doc


@generator("delete-key")
def _delete_key(g: G) -> Result:
    paths = [p for p in _mappings(g.doc) if "remote_leo" not in p]
    path = g.choice(paths)
    node = get_at(g.doc, path)
    key = g.choice(node)
    del node[key]
    expected = VALID
    if path == () and key in REQUIRED_TOP:
        expected = INVALID
    elif len(path) == 2 and path[0] == "steps":
        expected = INVALID  # the step becomes {}: no type
    elif len(path) == 3 and path[0] == "steps":
        t = STEP_ARGS.get(path[2], {}).get(key, "")
        if t.endswith("!") or (path[2] == "produce" and key in ("value", "values")):
            expected = INVALID
    return f"deleted {show_path(path + (key,))}", expected, g.doc


def _with_duplicate(doc: Any, path: Path_, key: Any, value: Any) -> Any:
    """The document with the mapping at ``path`` written with ``key`` a second time."""
    if not path:
        pairs = Pairs(doc.items())
        pairs.insert(_index_of(pairs, key) + 1, (key, value))
        return pairs
    node = get_at(doc, path)
    pairs = Pairs(node.items())
    pairs.append((key, value))
    set_at(doc, path, pairs)
    return doc


def _index_of(pairs: list, key: Any) -> int:
    return next(i for i, (k, _) in enumerate(pairs) if k == key)


@generator("duplicate-key")
def _duplicate_key(g: G) -> Result:
    paths = list(_mappings(g.doc))
    path = g.choice(paths)
    node = get_at(g.doc, path)
    key = g.choice(node)
    how = g.choice(["same", "different", "empty-last"])
    value = copy.deepcopy(node[key])
    if how == "different":
        value = {"x": 1} if not isinstance(node[key], dict) else "other"
    elif how == "empty-last":
        value = type(node[key])() if isinstance(node[key], (list, dict, str)) else 0
    doc = _with_duplicate(g.doc, path, key, value)
    return f"key {show_path(path + (key,))} given twice ({how} value)", INVALID, doc


@generator("duplicate-key-text")
def _duplicate_key_text(g: G) -> Result:
    """Duplicates that differ only in how the key is written (equal once constructed)."""
    reps = replicas_of(g.doc)
    how = g.choice(["quoted-name", "hex-replica-key", "tagged-int-key", "step-kind-twice", "steps-twice"])
    text = dump(g.doc)
    if how == "quoted-name":
        text = text.replace("name: ", "'name': other\nname: ", 1)
    elif how == "hex-replica-key":
        v = g.choice(VARIANTS)
        doc = _without_expect(g.doc)
        text = dump(doc) + f"expect:\n  {v}:\n    replicas:\n      {reps[0]}: {{alive: true}}\n      {hex(reps[0])}: {{alive: false}}\n"
    elif how == "tagged-int-key":
        v = g.choice(VARIANTS)
        doc = _without_expect(g.doc)
        text = dump(doc) + f"expect:\n  {v}:\n    replicas:\n      {reps[0]}: {{alive: true}}\n      !!int '{reps[0]}': {{alive: false}}\n"
    elif how == "step-kind-twice":
        r = g.choice(reps)
        text = text.replace("steps:\n", f"steps:\n- {{fetch: {{replica: {r}}}, fetch: {{replica: {r}, response: lost}}}}\n", 1)
    else:
        text += "steps: []\n"
    return f"duplicate key: {how}", INVALID, text


def _without_expect(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc.pop("expect", None)
    return doc


@generator("unknown-key")
def _unknown_key(g: G) -> Result:
    reps = replicas_of(g.doc)
    where = g.choice(["top", "config", "step", "expect", "expect-variant", "replica-field", "controller-field", "loss-field", "at-step"])
    v = g.choice(VARIANTS)
    key = g.choice(["extra", "Name", "comment", "x-custom", "", "steps ", "replica_id", 1, None, True])
    if where == "top":
        g.doc[key] = 1
    elif where == "config":
        g.doc.setdefault("config", {})[key] = 1
    elif where == "step":
        step = g.choice(g.doc["steps"])
        step_args(step)[key] = 1
    elif where == "expect":
        g.doc.setdefault("expect", {})[key if key not in VARIANTS else "x"] = {}
    elif where == "expect-variant":
        g.doc.setdefault("expect", {}).setdefault(v, {})[key] = []
    elif where == "replica-field":
        g.doc.setdefault("expect", {}).setdefault(v, {}).setdefault("replicas", {})[reps[0]] = {key if key != "" else "lag": 1}
    elif where == "controller-field":
        g.doc.setdefault("expect", {}).setdefault(v, {})["controller"] = {g.choice(["leaders", "Leader", "zk_version", "isr "]): 1}
    elif where == "loss-field":
        g.doc.setdefault("expect", {}).setdefault(v, {})["losses"] = [{"offset": 0, g.choice(["lost", "offsets", "epoch"]): 1}]
    else:
        g.doc.setdefault("expect", {}).setdefault(v, {})["at_step"] = {1: {g.choice(["violations", "replica", "losses"]): {}}}
    return f"unknown key {short(key)} in {where}", INVALID, g.doc


@generator("unknown-step-kind")
def _unknown_step_kind(g: G) -> Result:
    kind = g.choice(["electt", "Produce", "produce ", "leader-and-isr", "reassign", "delete", "", 0, None, True, "fetch\u200b"])
    i = g.rng.randrange(len(g.doc["steps"]))
    g.doc["steps"][i] = {kind: {"replica": g.choice(replicas_of(g.doc))}}
    return f"step {i + 1} has unknown type {short(kind)}", INVALID, g.doc


@generator("step-shape")
def _step_shape(g: G) -> Result:
    r = g.choice(replicas_of(g.doc))
    shapes = [
        ("a bare string", "fetch"), ("a list", ["fetch", {"replica": r}]), ("null", None), ("an int", 3),
        ("an empty mapping", {}), ("two types", {"fetch": {"replica": r}, "crash": {"replica": r}}),
        ("list arguments", {"fetch": [r]}), ("scalar arguments", {"fetch": r}), ("string arguments", {"crash": "power"}),
        ("missing required", {"fetch": {}}), ("null required args", {"tick": None}), ("nested step", {"fetch": {"fetch": {"replica": r}}}),
    ]
    what, step = g.choice(shapes)
    i = g.rng.randrange(len(g.doc["steps"]) + 1)
    g.doc["steps"].insert(i, step)
    return f"step {i + 1} is {what}", INVALID, g.doc


@generator("step-rules")
def _step_rules(g: G) -> Result:
    """Cross-argument rules of docs/steps.md."""
    reps = replicas_of(g.doc)
    a, b = reps[0], reps[-1]
    bad = g.choice([
        ("produce value and values", {"produce": {"value": "a", "values": ["b"]}}),
        ("produce without records", {"produce": {"acks": 1}}),
        ("produce empty values", {"produce": {"values": []}}),
        ("produce int values", {"produce": {"values": [1, 2]}}),
        ("elect empty isr", {"elect": {"leader": a, "isr": []}}),
        ("elect leader outside isr", {"elect": {"leader": a, "isr": [b]}} if a != b else {"elect": {"leader": a, "isr": [99]}}),
        ("elect isr twice", {"elect": {"isr": [a, a]}}),
        ("elect to twice", {"elect": {"to": [b, b]}}),
        ("acks 2", {"produce": {"value": "a", "acks": 2}}),
        ("acks all-caps", {"produce": {"value": "a", "acks": "ALL"}}),
        ("acks float", {"produce": {"value": "a", "acks": 1.0}}),
        ("acks -1.0", {"produce": {"value": "a", "acks": -1.0}}),
        ("acks bool", {"produce": {"value": "a", "acks": True}}),
        ("crash mode hard", {"crash": {"replica": a, "mode": "hard"}}),
        ("fetch response maybe", {"fetch": {"replica": a, "response": "maybe"}}),
        ("fetch response bool", {"fetch": {"replica": a, "response": True}}),
        ("unclean string", {"elect": {"unclean": "true"}}),
        ("unclean int", {"elect": {"unclean": 1}}),
        ("isr bools", {"elect": {"isr": [True]}}),
        ("isr floats", {"elect": {"isr": [float(a)]}}),
        ("isr strings", {"elect": {"isr": [str(a)]}}),
        ("replica float", {"fetch": {"replica": float(a)}}),
        ("replica bool", {"fetch": {"replica": True}}),
        ("replica string", {"fetch": {"replica": str(a)}}),
    ])
    g.doc["steps"].insert(g.rng.randint(0, len(g.doc["steps"])), bad[1])
    return bad[0], INVALID, g.doc


@generator("unknown-replica")
def _unknown_replica(g: G) -> Result:
    x = unknown_replica(g.doc, g.rng)
    slots = [(p, t) for p, t, _ in step_slots(g.doc) if t.startswith("replica")]
    path, t = g.choice(slots)
    set_at(g.doc, path, [x] if t.startswith("replica_list") else x)
    return f"{show_path(path)} names replica {x}", INVALID, g.doc


@generator("replicas-list")
def _replicas_list(g: G) -> Result:
    reps = replicas_of(g.doc)
    how = g.choice(["empty", "duplicate", "negative", "huge", "string", "nested", "bool", "float", "drop-referenced",
                    "drop-unreferenced", "mapping", "scalar", "null"])
    expected = INVALID
    if how == "empty":
        g.doc["replicas"] = []
    elif how == "duplicate":
        g.doc["replicas"] = reps + [reps[0]]
    elif how == "negative":
        g.doc["replicas"] = reps + [-1]
    elif how == "huge":
        g.doc["replicas"] = reps + [10**30]
    elif how == "string":
        g.doc["replicas"] = [str(r) for r in reps]
    elif how == "nested":
        g.doc["replicas"] = [reps]
    elif how == "bool":
        g.doc["replicas"] = reps + [True] if 1 not in reps else [True] + reps
    elif how == "float":
        g.doc["replicas"] = [float(r) for r in reps]
    elif how in ("drop-referenced", "drop-unreferenced"):
        used = referenced_replicas(g.doc)
        pool = [r for r in reps if (r in used) == (how == "drop-referenced")]
        if not pool or len(reps) == 1:
            g.doc["replicas"] = []
            return "replicas emptied", INVALID, g.doc
        r = g.choice(pool)
        g.doc["replicas"] = [x for x in reps if x != r]
        mis = (g.doc.get("config") or {}).get("min_insync_replicas", 1)
        expected = INVALID if (how == "drop-referenced" or mis > len(g.doc["replicas"])) else VALID
        how = f"{how} {r}"
    elif how == "mapping":
        g.doc["replicas"] = {r: r for r in reps}
    elif how == "scalar":
        g.doc["replicas"] = ",".join(map(str, reps))
    else:
        g.doc["replicas"] = None
    return f"replicas: {how}", expected, g.doc


@generator("wrong-type")
def _wrong_type(g: G) -> Result:
    slots: list[tuple[Path_, str, dict]] = [(("name",), "name!", {}), (("description",), "description", {}),
                                            (("topic",), "topic", {}), (("partition",), "partition", {})]
    slots += [(("config", k), t, {}) for k, t in CONFIG_TYPES.items()]
    slots += step_slots(g.doc)
    slots += [(("replicas",), "replicas", {}), (("steps",), "steps", {}), (("config",), "config", {}), (("expect",), "expect", {})]
    path, t, ctx = g.choice(slots)
    value = copy.deepcopy(g.choice(WRONG_TYPES + (g.choice([date_value(), Tagged("tag:yaml.org,2002:binary", "AAEC")]),)))
    set_at(g.doc, path, value)
    if t in ("replicas", "steps", "config", "expect"):
        expected, note = _judge_container(t, value)
    else:
        ticks = sum(1 for s in g.doc["steps"] if step_kind(s) == "tick")
        expected, note = judge(t, _loaded(value), g.doc, ctx={**ctx, "ticks": ticks})
    return f"{show_path(path)} = {short(value)}", expected, g.doc, note


def date_value():
    import datetime
    return datetime.date(2020, 1, 1)


def _loaded(value: Any) -> Any:
    """The value as the YAML loader will give it back."""
    if isinstance(value, Tagged):
        return b"binary"
    return value


def _judge_container(t: str, value: Any) -> tuple[str, str]:
    if value is None:
        if t in ("config", "expect"):
            return EITHER, "null for an optional mapping: absent, or a wrong type"
        return INVALID, ""
    if t in ("config", "expect") and value == {}:
        return VALID, ""
    if t == "steps" and value == []:
        return EITHER, "steps is required; an empty list replays nothing"
    return INVALID, ""


def _issue_examples() -> list[tuple[str, Callable[[G], Any]]]:
    """What the issue reports, one case each: (what, edit of the document -> text or None)."""

    def step(kind: str, **args):
        def edit(g: G):
            r = replicas_of(g.doc)[-1]
            full = {"replica": r, **args} if kind in ("flush", "fetch", "leader_and_isr") else dict(args)
            g.doc["steps"].append({kind: full})
        return edit

    def expect(block: dict):
        def edit(g: G):
            g.doc["expect"] = {"hw": copy.deepcopy(block(g) if callable(block) else block)}
        return edit

    def at(place: Path_, fragment: str):
        def edit(g: G):
            return placed(g, place, fragment)[1]
        return edit

    def rename(g: G):
        rename_replica(g.doc, replicas_of(g.doc)[0], 10**30)

    def duplicate(g: G):
        return dump(_with_duplicate(g.doc, (), "name", "last-wins"))

    return [
        ("1,000 nesting levels (flow lists) in description", at(("description",), nesting(1000, "flow-list"))),
        ("1,000 nesting levels (flow mappings) in steps", at(("steps",), nesting(1000, "flow-map"))),
        ("a 1 KB alias bomb in description", at(("description",), bomb())),
        ("a 1 KB alias bomb in produce.values", at(("@produce", "values"), bomb())),
        ("a 1 KB alias bomb in elect.isr", at(("@elect", "isr"), bomb())),
        ("a 1 KB alias bomb in an expect log", at(("expect", "hw", "replicas", "@r", "log"), bomb())),
        ("duplicate mapping key (name twice, last would win)", duplicate),
        ("expect names an unknown replica", expect(lambda g: {"replicas": {unknown_replica(g.doc, g.rng): {"leo": 0}}})),
        ("expect names an unknown field", expect({"replicas": {}, "controller": {"leader_id": 1}})),
        ("expect losses.offset: 'x'", expect({"losses": [{"offset": "x"}]})),
        ("expect at_step beyond the steps", expect(lambda g: {"at_step": {len(g.doc["steps"]) + 1: {"controller": {"epoch": 0}}}})),
        ("elect.epoch 10^30", step("elect", epoch=10**30)),
        ("tick.ms 10^30", step("tick", ms=10**30)),
        ("flush.offset 10^30", step("flush", offset=10**30)),
        ("replica id 10^30 (renamed everywhere)", rename),
        ("elect.epoch 2^31 (epochs are int32)", step("elect", epoch=2**31)),
        ("leader_and_isr.epoch 2^31", step("leader_and_isr", epoch=2**31)),
        ("fetch.max_records 2^31 (counts are int32)", step("fetch", max_records=2**31)),
        ("tick.ms 2^63 (times are int64)", step("tick", ms=2**63)),
        ("flush.offset 2^63 (offsets are int64)", step("flush", offset=2**63)),
    ]


_ISSUE_EXAMPLES: list = []


def issue_examples() -> list[tuple[str, Callable[[G], Any]]]:
    if not _ISSUE_EXAMPLES:
        _ISSUE_EXAMPLES.extend(_issue_examples())
    return _ISSUE_EXAMPLES


@generator("issue-examples")
def _issue_example(g: G) -> Result:
    """The inputs the issue reports (all invalid), case ``n`` mod their number."""
    what, edit = issue_examples()[g.n % len(issue_examples())]
    text = edit(g)
    return what, INVALID, g.doc if text is None else text


# The values just past (and at) each numeric type's limits, drawn half of the time.
EDGES = {
    "epoch": (INT32_MAX, 2**31, 2**32, -1), "count": (INT32_MAX, 2**31, -1), "partition": (INT32_MAX, 2**31, -1),
    "offset": (INT64_MAX, 2**63, -1), "millis": (INT64_MAX, 2**63, -1), "replica-id": (INT32_MAX, 2**31, -1),
}


@generator("hostile-number")
def _hostile_number(g: G) -> Result:
    """The issue's numbers (10^30, -1, 2^31, 2^63, 1e308, nan, inf ...) in every numeric position."""
    reps = replicas_of(g.doc)
    r = g.choice(reps)
    where = g.choice(["elect.epoch", "leader_and_isr.epoch", "tick.ms", "flush.offset", "fetch.max_records", "partition",
                      "min_insync_replicas", "replica_lag_time_max_ms", "replica-id", "fetch.replica", "elect.leader"])
    edge = {"elect.epoch": "epoch", "leader_and_isr.epoch": "epoch", "tick.ms": "millis", "flush.offset": "offset",
            "fetch.max_records": "count", "partition": "partition", "replica_lag_time_max_ms": "millis",
            "replica-id": "replica-id"}.get(where)
    n = g.choice(EDGES[edge]) if edge and g.rng.random() < 0.5 else g.choice(HOSTILE_NUMBERS)
    ctx: dict = {}
    if where == "replica-id":
        if n in reps or (isinstance(n, (int, float)) and not isinstance(n, bool) and any(n == x for x in reps)):
            n = 10**30
        rename_replica(g.doc, r, n)
        if is_int(n) and 0 <= n <= INT32_MAX:
            return f"replica {r} renamed to {short(n)} everywhere", VALID, g.doc
        return f"replica {r} renamed to {short(n)} everywhere", INVALID, g.doc
    if where == "partition":
        g.doc["partition"] = n
        t = "partition"
    elif where in ("min_insync_replicas", "replica_lag_time_max_ms"):
        g.doc.setdefault("config", {})[where] = n
        t = {"min_insync_replicas": "min_isr", "replica_lag_time_max_ms": "millis"}[where]
    else:
        kind, arg = where.split(".")
        args = {"replica": r} if kind in ("leader_and_isr", "flush", "fetch") else {}
        args[arg] = n
        g.doc["steps"].insert(g.rng.randint(0, len(g.doc["steps"])), {kind: args})
        t = STEP_ARGS[kind][arg]  # a trailing "!": required (null is then invalid)
        ctx["ticks"] = sum(1 for s in g.doc["steps"] if step_kind(s) == "tick")
    expected, note = judge(t, n, g.doc, ctx=ctx)
    return f"{where} = {short(n)}", expected, g.doc, note


@generator("config-values")
def _config_values(g: G) -> Result:
    reps = replicas_of(g.doc)
    cases = [
        ("acks -1", {"acks": -1}, VALID), ("acks '0'", {"acks": "0"}, VALID), ("acks 2", {"acks": 2}, INVALID),
        ("acks 1.0", {"acks": 1.0}, INVALID), ("acks true", {"acks": True}, INVALID), ("acks null", {"acks": None}, EITHER),
        ("hw_checkpoint sometimes", {"hw_checkpoint": "sometimes"}, INVALID), ("log_flush EVERY_STEP", {"log_flush": "EVERY_STEP"}, INVALID),
        ("min_isr 0", {"min_insync_replicas": 0}, INVALID), ("min_isr > replicas", {"min_insync_replicas": len(reps) + 1}, INVALID),
        ("min_isr = replicas", {"min_insync_replicas": len(reps)}, VALID),
        ("unclean 'yes'", {"unclean_leader_election": "yes"}, INVALID), ("unclean yes (YAML 1.1 bool)", None, None),
        ("knob valid", {"knobs": {"trunc_rule": "kip279"}}, VALID), ("knob bool", {"knobs": {"fencing": True}}, VALID),
        ("knob unknown", {"knobs": {"bogus": 1}}, INVALID), ("knob bad value", {"knobs": {"trunc_rule": "kip999"}}, INVALID),
        ("knobs list", {"knobs": ["trunc_rule"]}, INVALID), ("knob int key", {"knobs": {1: 1}}, INVALID),
        ("knob nested", {"knobs": {"trunc_rule": {"a": 1}}}, INVALID), ("config list", [1], INVALID),
    ]
    what, conf, expected = g.choice(cases)
    if conf is None:
        g.doc.pop("config", None)
        text = dump(g.doc).replace("replicas:", "config: {unclean_leader_election: yes}\nreplicas:", 1)
        return what, EITHER, text, "`yes` is a bool in YAML 1.1 (PyYAML), a string in YAML 1.2"
    if isinstance(conf, dict):
        g.doc.setdefault("config", {})
        if not isinstance(g.doc["config"], dict):
            g.doc["config"] = {}
        g.doc["config"].update(conf)
    else:
        g.doc["config"] = conf
    note = "null for an optional key: absent, or a wrong type" if expected == EITHER else ""
    return what, expected, g.doc, note


@generator("name-topic-partition")
def _name_topic(g: G) -> Result:
    cases = [
        ("name", "Upper"), ("name", ""), ("name", "has space"), ("name", "a/b"), ("name", "../../etc/passwd"), ("name", "ünï"),
        ("name", 12), ("name", "ok-name.1_2"), ("name", "-"), ("topic", ""), ("topic", "a/b"), ("topic", "x" * 300),
        ("topic", 5), ("topic", "valid.topic_1"), ("topic", "\u0000"), ("partition", -1), ("partition", "0"), ("partition", 1.0),
        ("description", 42), ("description", ["a"]), ("initial_state", "no/such/dir"), ("initial_state", "hostile-case.yaml"),
        ("initial_state", 5), ("initial_state", ""),
    ]
    key, value = g.choice(cases)
    g.doc[key] = value
    if key == "initial_state":
        if value == "":
            return "initial_state '' (the file's own directory)", EITHER, g.doc, "the directory holds no replica directories"
        return f"initial_state {short(value)}", INVALID, g.doc
    t = {"name": "name", "topic": "topic", "partition": "partition", "description": "description"}[key]
    expected, note = judge(t, value, g.doc)
    return f"{key} = {short(value)}", expected, g.doc, note


@generator("yaml-tags")
def _yaml_tags(g: G) -> Result:
    tagged = g.choice([
        ("description", Tagged("tag:yaml.org,2002:python/object/apply:os.getcwd", [])),
        ("description", Tagged("tag:yaml.org,2002:python/name:os.system", "")),
        ("description", Tagged("tag:yaml.org,2002:binary", "aGVsbG8=")),
        ("replicas", Tagged("tag:yaml.org,2002:set", {1: None, 2: None})),
        ("name", Tagged("tag:yaml.org,2002:timestamp", "2020-01-01")),
        ("description", Tagged("!custom", "x")),
        ("config", Tagged("tag:yaml.org,2002:omap", [{"acks": 1}])),
        ("config", Tagged("tag:yaml.org,2002:pairs", [{"acks": 1}])),
        ("partition", Tagged("tag:yaml.org,2002:float", "1")),
        ("description", Tagged("tag:yaml.org,2002:int", "not-a-number")),
        ("name", Tagged("tag:yaml.org,2002:null", "")),
    ])
    key, value = tagged
    g.doc[key] = value
    return f"{key}: {value.tag} {short(value.value)}", INVALID, g.doc


@generator("complex-keys")
def _complex_keys(g: G) -> Result:
    reps = replicas_of(g.doc)
    how = g.choice(["list-key", "map-key", "null-key", "bool-replica-key", "float-replica-key", "bool-at-step", "int-top-key"])
    text = dump(g.doc)
    v = g.choice(VARIANTS)
    if how == "list-key":
        text += "? [a, b]\n: 1\n"
    elif how == "map-key":
        text += "? {a: 1}\n: 1\n"
    elif how == "null-key":
        text += "~: 1\n"
    elif how == "int-top-key":
        text += "1: x\n"
    else:
        doc = copy.deepcopy(g.doc)
        doc.pop("expect", None)
        key = {"bool-replica-key": "true", "float-replica-key": f"{float(reps[0])}", "bool-at-step": "true"}[how]
        if how == "bool-at-step":
            text = dump(doc) + f"expect:\n  {v}:\n    at_step:\n      {key}: {{controller: {{epoch: 0}}}}\n"
        else:
            text = dump(doc) + f"expect:\n  {v}:\n    replicas:\n      {key}: {{alive: true}}\n"
    return f"key: {how}", INVALID, text


# .. invalid files: expect blocks ..


@generator("expect-invalid")
def _expect_invalid(g: G) -> Result:
    reps = replicas_of(g.doc)
    n_steps = len(g.doc["steps"])
    v = g.choice(VARIANTS)
    bad_replica = unknown_replica(g.doc, g.rng)
    mutations: list[tuple[str, Any]] = [
        ("unknown variant", ("expect", g.choice(["kip999", "HW", "all", "kip-320", ""])), {"violations": []}),
        ("unknown replica", ("expect", v, "replicas"), {bad_replica: {"role": "leader"}}),
        ("unknown replica (at_step)", ("expect", v, "at_step"), {1: {"replicas": {bad_replica: {"leo": 0}}}}),
        ("unknown replica field", ("expect", v, "replicas"), {reps[0]: {g.choice(["lag", "LEO", "log_end_offset", "epoch"]): 1}}),
        ("unknown controller field", ("expect", v, "controller"), {g.choice(["leaders", "zk_version", "Isr"]): 1}),
        ("unknown invariant", ("expect", v, "violations"), [g.choice(["StrongISR", "NoSuchInvariant", "", "strongisr"])]),
        ("violations a string", ("expect", v, "violations"), "StrongIsr"),
        ("violations ints", ("expect", v, "violations"), [1, 2]),
        ("violations a map", ("expect", v, "violations"), {"StrongIsr": True}),
        ("losses a string", ("expect", v, "losses"), "none"),
        ("losses entry an int", ("expect", v, "losses"), [1]),
        ("losses.offset 'x'", ("expect", v, "losses"), [{"offset": "x"}]),
        ("losses.offset 1.5", ("expect", v, "losses"), [{"offset": 1.5}]),
        ("losses.acked 'yes'", ("expect", v, "losses"), [{"offset": 0, "acked": "yes"}]),
        ("losses.value 5", ("expect", v, "losses"), [{"value": 5}]),
        ("losses.step 'x'", ("expect", v, "losses"), [{"step": "x"}]),
        ("losses unknown field", ("expect", v, "losses"), [{"offset": 0, "lost": True}]),
        ("replica leo 'x'", ("expect", v, "replicas"), {reps[0]: {"leo": "x"}}),
        ("replica hw 1.5", ("expect", v, "replicas"), {reps[0]: {"hw": 1.5}}),
        ("replica alive 'yes'", ("expect", v, "replicas"), {reps[0]: {"alive": "yes"}}),
        ("replica role boss", ("expect", v, "replicas"), {reps[0]: {"role": "boss"}}),
        ("replica log a string", ("expect", v, "replicas"), {reps[0]: {"log": "m1,m2"}}),
        ("replica log flat ints", ("expect", v, "replicas"), {reps[0]: {"log": [1, 2]}}),
        ("replica epoch_cache a map", ("expect", v, "replicas"), {reps[0]: {"epoch_cache": {"a": 1}}}),
        ("replica fields a list", ("expect", v, "replicas"), {reps[0]: ["leo", 1]}),
        ("replicas a list", ("expect", v, "replicas"), [reps[0]]),
        ("replica leader_epoch true", ("expect", v, "replicas"), {reps[0]: {"leader_epoch": True}}),
        ("controller epoch 'x'", ("expect", v, "controller"), {"epoch": "x"}),
        ("controller isr '1,2'", ("expect", v, "controller"), {"isr": "1,2"}),
        ("controller leader 'x'", ("expect", v, "controller"), {"leader": "x"}),
        ("controller a list", ("expect", v, "controller"), [1]),
        ("at_step 0", ("expect", v, "at_step"), {0: {}}),
        ("at_step -1", ("expect", v, "at_step"), {-1: {}}),
        ("at_step 'x'", ("expect", v, "at_step"), {"x": {}}),
        ("at_step 1.5", ("expect", v, "at_step"), {1.5: {}}),
        ("at_step beyond the steps", ("expect", v, "at_step"), {n_steps + 1: {"controller": {"epoch": 0}}}),
        ("at_step 10**30", ("expect", v, "at_step"), {10**30: {}}),
        ("at_step value a string", ("expect", v, "at_step"), {1: "x"}),
        ("at_step unknown key", ("expect", v, "at_step"), {1: {"violations": []}}),
        ("at_step bad field", ("expect", v, "at_step"), {1: {"replicas": {reps[0]: {"leo": "x"}}}}),
        ("at_step a list", ("expect", v, "at_step"), [1]),
        ("expect a list", ("expect",), [v]),
        ("expect a string", ("expect",), "hw"),
        ("variant block a list", ("expect", v), ["violations"]),
        ("variant block a string", ("expect", v), "ok"),
    ]
    what, path, value = g.choice(mutations)
    if path == ("expect",) or len(path) == 2 or not isinstance(g.doc.get("expect"), dict):
        g.doc.setdefault("expect", {})
    if len(path) == 3 and not isinstance(g.doc["expect"].get(v), dict):
        g.doc["expect"][v] = {}
    set_at(g.doc, path, value)
    return f"expect: {what} ({show_path(path)})", INVALID, g.doc


@generator("expect-valid")
def _expect_valid(g: G) -> Result:
    """Well-formed expectations (possibly wrong about the run: only --check compares them)."""
    reps = replicas_of(g.doc)
    n_steps = len(g.doc["steps"])
    v = g.choice(VARIANTS)
    block = g.doc.setdefault("expect", {}).setdefault(v, {}) if isinstance(g.doc.get("expect"), dict) else None
    if block is None:
        g.doc["expect"] = {v: {}}
        block = g.doc["expect"][v]
    how = g.choice(["violations", "losses", "replicas", "controller", "at_step", "at_step-last", "empty-block", "empty-expect"])
    if how == "violations":
        block["violations"] = g.rng.sample(INVARIANTS_SAMPLE, g.rng.randint(0, 3))
    elif how == "losses":
        block["losses"] = [{"offset": 0, "value": "m1", "acked": True, "allowed": False, "step": 3}]
    elif how == "replicas":
        block["replicas"] = {reps[-1]: {"alive": True, "role": "follower", "leo": 0, "hw": 0, "log": [[0, 0, "m1"]],
                                        "epoch_cache": [[0, 0]], "remote_leo": None, "halted": False, "leader_epoch": 0}}
    elif how == "controller":
        block["controller"] = {"leader": reps[0], "epoch": 3, "isr": list(reps)}
    elif how == "at_step":
        block["at_step"] = {1: {"controller": {"epoch": 0}}, max(1, n_steps // 2): {"replicas": {reps[0]: {"leo": 0}}}}
    elif how == "at_step-last":
        block["at_step"] = {n_steps: {"controller": {"leader": None}}}
    elif how == "empty-block":
        g.doc["expect"][v] = {}
    else:
        g.doc["expect"] = {}
    return f"expect.{v}: {how}", VALID, g.doc


# .. invalid files: bombs, depth, bytes ..

BOMB_PLACES: tuple[Path_, ...] = (
    ("name",), ("description",), ("topic",), ("replicas",), ("steps",), ("config",), ("config", "knobs"),
    ("initial_state",), ("steps", 0), ("@produce", "value"), ("@produce", "values"), ("@elect", "isr"), ("@elect", "to"),
    ("expect", "@v", "violations"), ("expect", "@v", "losses"), ("expect", "@v", "replicas", "@r", "log"),
    ("expect", "@v", "replicas", "@r", "epoch_cache"), ("expect", "@v", "replicas", "@r", "remote_leo"),
    ("expect", "@v", "controller", "isr"), ("expect", "@v", "at_step"), ("expect",),
)


def _resolve_place(g: G, place: Path_) -> Path_:
    """A concrete path for a placement: ``@produce`` = some produce step's arguments, ``@v`` a variant, ``@r`` a replica."""
    out: list = []
    for k in place:
        if k in ("@produce", "@elect"):
            kind = k[1:]
            idx = [i for i, s in enumerate(g.doc["steps"]) if step_kind(s) == kind]
            if not idx:
                g.doc["steps"].append({kind: {"value": "x"} if kind == "produce" else {}})
                idx = [len(g.doc["steps"]) - 1]
            i = g.choice(idx)
            step_args(g.doc["steps"][i])
            out += ["steps", i, kind]
        elif k == "@v":
            out.append(g.choice(VARIANTS))
        elif k == "@r":
            out.append(g.choice(replicas_of(g.doc)))
        else:
            out.append(k)
    if out[0] == "expect" and not isinstance(g.doc.get("expect"), dict):
        g.doc["expect"] = {}
    return tuple(out)


def placed(g: G, place: Path_, fragment: str, flow_doc: bool = False) -> tuple[str, str]:
    """The document with the YAML text ``fragment`` as the value at ``place``; (path shown, text)."""
    path = _resolve_place(g, place)
    token = "HOSTILE_FRAGMENT_7f3a"
    if path == ("steps", 0):
        g.doc["steps"][0] = token
    else:
        set_at(g.doc, path, token)
    text = dump(g.doc, flow=True if flow_doc else None, width=10**9)
    assert text.count(token) == 1, text
    return show_path(path), text.replace(token, fragment)


def bomb(depth: int = 9, width: int = 9, mapping: bool = False, leaf: str = "lol") -> str:
    """A billion-laughs fragment: ``width**depth`` leaves from a few hundred bytes."""
    if mapping:
        keys = [f"k{i}" for i in range(width)]
        levels = ["&b0 {" + ", ".join(f"{k}: {leaf}" for k in keys) + "}"]
        levels += [f"&b{d} {{" + ", ".join(f"{k}: *b{d - 1}" for k in keys) + "}" for d in range(1, depth)]
        return "{" + ", ".join(f"l{d}: {lv}" for d, lv in enumerate(levels)) + "}"
    levels = ["&b0 [" + ", ".join([leaf] * width) + "]"]
    levels += [f"&b{d} [" + ", ".join([f"*b{d - 1}"] * width) + "]" for d in range(1, depth)]
    return "[" + ", ".join(levels) + "]"


@generator("alias-bomb")
def _alias_bomb(g: G) -> Result:
    place = g.choice(BOMB_PLACES)
    mapping = g.rng.random() < 0.3
    frag = bomb(depth=g.choice([8, 9, 10]), mapping=mapping)
    where, text = placed(g, place, frag)
    return f"{'mapping' if mapping else 'list'} alias bomb ({len(frag)} bytes) at {where}", INVALID, text


@generator("alias-bomb-split")
def _alias_bomb_split(g: G) -> Result:
    """The anchors in one key, the alias that expands them in another (error messages quote the latter)."""
    frag = bomb(depth=9)
    g.doc.pop("description", None)
    target = g.choice([("@produce", "values"), ("@elect", "isr"), ("expect", "@v", "replicas", "@r", "log"), ("expect", "@v", "violations"),
                       ("name",), ("topic",)])
    where, text = placed(g, target, "*b8")
    # The anchors must come first in the document: put them in `description` at the top.
    text = f"description: {frag}\n" + text
    return f"alias bomb: anchors in description, *b8 at {where}", INVALID, text


@generator("alias-fanout")
def _alias_fanout(g: G) -> Result:
    """Many aliases of one big string: at most 100 KB written, up to 50 MB expanded (flat, not nested)."""
    n = g.choice([100, 500])
    big = "x" * g.choice([1000, 100_000])
    token = "HOSTILE_FANOUT_7f3a"
    g.doc["description"] = token  # the anchor: description comes before steps in every seed
    g.doc["steps"].insert(g.rng.randint(0, len(g.doc["steps"])), {"produce": {"values": token}})
    text = dump(g.doc, width=10**9)
    assert text.count(token) == 2 and text.index(f"description: {token}") < text.rindex(token)
    text = text.replace(f"description: {token}", f"description: &s {big}", 1)
    text = text.replace(token, "[" + ", ".join(["*s"] * n) + "]", 1)
    return f"{n} aliases of a {len(big)}-character string in produce.values", EITHER, text, \
        "flat alias fan-out: small enough to replay, or past an alias budget and refused"


def nesting(depth: int, style: str) -> str:
    if style == "flow-list":
        return "[" * depth + "]" * depth
    if style == "flow-map":
        return "{a: " * depth + "1" + "}" * depth
    if style == "mixed":
        return "[{a: " * (depth // 2) + "1" + "}]" * (depth // 2)
    raise AssertionError(style)


@generator("deep-nesting")
def _deep_nesting(g: G) -> Result:
    depth = g.choice([1000, 1000, 5000, 100_000])
    style = g.choice(["flow-list", "flow-map", "mixed", "block-map", "block-seq", "whole-document"])
    if style == "whole-document":
        return f"the whole document nested {depth} deep", INVALID, nesting(depth, "flow-list") + "\n"
    if style == "block-map":
        g.doc.pop("description", None)
        lines = "".join(" " * i + "a:\n" for i in range(1, 1001))
        return "description: block mappings 1000 deep", INVALID, dump(g.doc) + "description:\n" + lines + " " * 1001 + "x\n"
    if style == "block-seq":
        g.doc.pop("description", None)
        return f"description: block sequences {depth} deep on one line", INVALID, dump(g.doc) + "description: " + "- " * depth + "x\n"
    place = g.choice(BOMB_PLACES)
    where, text = placed(g, place, nesting(depth, style))
    return f"{style} nested {depth} deep at {where}", INVALID, text


@generator("bad-bytes")
def _bad_bytes(g: G) -> Result:
    raw = g.seed.raw
    how = g.choice(["latin1", "cp1252", "lone-continuation", "truncated-multibyte", "overlong", "surrogate", "ff-fe-mid", "nul",
                    "control-char"])
    if how in ("latin1", "cp1252"):
        g.doc["description"] = "café – naïve"
        data = dump(g.doc).encode("latin-1" if how == "latin1" else "cp1252", errors="replace")
    elif how == "lone-continuation":
        data = raw.replace(b"name:", b"\x80name:", 1)
    elif how == "truncated-multibyte":
        data = raw + b"# \xe2\x82\n"
    elif how == "overlong":
        data = raw.replace(b"\n", b"\n# \xc0\xaf\n", 1)
    elif how == "surrogate":
        data = raw.replace(b"\n", b"\n# \xed\xa0\x80\n", 1)
    elif how == "ff-fe-mid":
        data = raw[: len(raw) // 2] + b"\xff\xfe" + raw[len(raw) // 2:]
    elif how == "nul":
        data = raw[: len(raw) // 3] + b"\x00" + raw[len(raw) // 3:]
    else:
        data = raw.replace(b"name: ", b"name: \x07", 1)
    return f"bytes: {how}", INVALID, data


@generator("garbage")
def _garbage(g: G) -> Result:
    how = g.choice(["random", "elf", "png", "gzip", "json-array", "random-printable"])
    n = g.choice([1, 16, 512, 4096, 65536])
    body = g.rng.randbytes(n)
    if how == "elf":
        body = b"\x7fELF\x02\x01\x01" + body
    elif how == "png":
        body = b"\x89PNG\r\n\x1a\n" + body
    elif how == "gzip":
        body = b"\x1f\x8b\x08\x00" + body
    elif how == "json-array":
        body = json.dumps([1, 2, {"a": [None]}]).encode()
    elif how == "random-printable":
        body = "".join(g.rng.choice(string.printable) for _ in range(n)).encode()
    return f"garbage: {how}, {len(body)} bytes", INVALID, body


@generator("empty-like")
def _empty_like(g: G) -> Result:
    data = g.choice([b"", b"\n", b"   \n\t\n", b"# only a comment\n", b"---\n", b"...\n", b"---\n...\n", b"~\n", b"null\n",
                     b"[]\n", b"{}\n", b"0\n", b"hello\n", b'""\n', b"\xef\xbb\xbf", b"\xef\xbb\xbf\n", b"- a\n- b\n", b"true\n"])
    return f"document {short(data)}", INVALID, data


@generator("tabs")
def _tabs(g: G) -> Result:
    """Tabs in indentation, which YAML forbids."""
    g.doc.pop("description", None)  # no multi-line scalars: every indented line starts a node
    text = dump(g.doc, flow=False, width=10**9)
    how = g.choice(["indent", "one-line"])
    if how == "indent":
        text = re.sub(r"^( +)", lambda m: "\t" * (len(m.group(1)) // 2 or 1), text, flags=re.M)
    else:
        lines = text.splitlines(keepends=True)
        i = g.choice([i for i, line in enumerate(lines) if line.startswith("  ") and line.strip()])
        lines[i] = "\t" + lines[i][2:]
        text = "".join(lines)
    return f"tabs: {how}", INVALID, text


@generator("multi-document")
def _multi_document(g: G) -> Result:
    text = dump(g.doc)
    how = g.choice(["two", "same-twice", "empty-second", "garbage-after-end", "yaml-2.0", "flow-then-block"])
    if how == "two":
        other = copy.deepcopy(g.doc)
        other["name"] = "other"
        return "two documents", INVALID, text + "---\n" + dump(other)
    if how == "same-twice":
        return "the same document twice", INVALID, "---\n" + text + "---\n" + text
    if how == "empty-second":
        return "a trailing '---' (an empty second document)", EITHER, text + "---\n", \
            "an empty second document: ignore it, or refuse more than one document"
    if how == "garbage-after-end":
        return "garbage after the document end marker", INVALID, text + "...\n}{ not yaml [\n"
    if how == "yaml-2.0":
        return "%YAML 2.0 directive", INVALID, "%YAML 2.0\n---\n" + text
    return "a flow document then a block document", INVALID, dump(g.doc, flow=True) + "---\nname: x\n"


@generator("truncated")
def _truncated(g: G) -> Result:
    raw = g.seed.raw
    cut = g.rng.randrange(1, len(raw))
    return f"cut at byte {cut} of {len(raw)}", EITHER, raw[:cut], "a cut file may still be a valid scenario (fewer steps)"


@generator("byte-flip")
def _byte_flip(g: G) -> Result:
    raw = bytearray(g.seed.raw)
    n = g.choice([1, 3, 10])
    for _ in range(n):
        raw[g.rng.randrange(len(raw))] = g.rng.randrange(256)
    return f"{n} random bytes changed", EITHER, bytes(raw), "random damage may leave a valid scenario"


@generator("huge-invalid")
def _huge_invalid(g: G) -> Result:
    reps = replicas_of(g.doc)
    bad = unknown_replica(g.doc, g.rng)
    how = g.choice(["isr", "steps-bad-last", "violations", "at_step", "long-key", "long-value", "many-config-keys", "long-name"])
    if how == "isr":
        g.doc["steps"].append({"elect": {"isr": list(range(10, 30_010))}})
    elif how == "steps-bad-last":
        g.doc["steps"] += [random_valid_step(g.rng, reps) for _ in range(3000)] + [{"fetch": {"replica": bad}}]
    elif how == "violations":
        g.doc.setdefault("expect", {})["hw"] = {"violations": [f"Bogus{i}" for i in range(20_000)]}
    elif how == "at_step":
        g.doc.setdefault("expect", {})["hw"] = {"at_step": {i: {} for i in range(100_000, 120_000)}}
    elif how == "long-key":
        g.doc["k" * 1_000_000] = 1
    elif how == "long-value":
        g.doc["steps"].append({"fetch": {"replica": "r" * 1_000_000}})
    elif how == "many-config-keys":
        g.doc["config"] = {f"key{i}": i for i in range(10_000)}
    else:
        g.doc["name"] = "N" * 1_000_000
    return f"huge and invalid: {how}", INVALID, g.doc


# -- building cases --------------------------------------------------------------------------


def make_case(generator_name: str, seed_name: str, n: int) -> Case:
    """Case number ``n`` of ``generator_name`` applied to the seed file ``seed_name`` (deterministic)."""
    rng = random.Random(f"{generator_name}/{seed_name}/{n}")
    out = GENERATORS[generator_name](G(rng, seeds()[seed_name], n))
    detail, expected, data = out[:3]
    note = out[3] if len(out) > 3 else ""
    if expected not in CLASSES:
        raise AssertionError(f"{generator_name}: bad class {expected!r}")
    if not isinstance(data, (bytes, str)):
        data = dump(data)
    if expected != EITHER:
        note = ""
    return Case(f"{generator_name}/{seed_name}#{n}: {detail}", generator_name, expected, _b(data), note)


def generate(seed: int, count: int) -> Iterator[Case]:
    """``count`` cases, repeatable from ``seed``: first every example the issue names
    (``issue_examples()``), then the generators in turn, so each kind is exercised."""
    names = list(GENERATORS)
    stems = seed_names()
    for i in range(count):
        rng = random.Random(f"{seed}/{i}")
        if i < len(issue_examples()):
            yield make_case("issue-examples", rng.choice(stems), i)
        else:
            yield make_case(names[i % len(names)], rng.choice(stems), rng.randrange(2**31))


def case_strategy():
    """Hypothesis strategy of ``Case`` (shrinks towards the first generator, seed and number)."""
    from hypothesis import strategies as st

    return st.builds(make_case, st.sampled_from(list(GENERATORS)), st.sampled_from(seed_names()), st.integers(0, 2**31 - 1))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


# -- judging a run ---------------------------------------------------------------------------

MESSAGE_LIMIT = 500
SPARK_MARKS = ("Using Spark's default log4j profile", "setLogLevel", "py4j", "Java gateway", "org.apache.spark",
               "SparkContext", "JAVA_HOME", "WARN NativeCodeLoader")


@dataclass(frozen=True)
class Outcome:
    """How a run of a case went; ``verdict`` is one of the table's columns."""

    verdict: str  # clean | traceback | hang/timeout | silently accepted | other
    detail: str = ""


CLEAN, TRACEBACK, HANG, SILENT, OTHER = "clean", "traceback", "hang/timeout", "silently accepted", "other"
VERDICTS = (CLEAN, TRACEBACK, HANG, SILENT, OTHER)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def shown_stderr(text: str, limit: int = 300) -> str:
    """stderr for a report: its last line; a message of a few lines (no traceback) whole."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(empty)"
    if len(lines) <= 3 and "Traceback" not in text:
        return " / ".join(lines)[:limit]
    return lines[-1][:limit]


def message_problem(stderr: str, file_name: str | None = None, mentions: tuple[str, ...] = (), one_line: bool = True,
                    spark_ok: bool = False) -> str:
    """Why ``stderr`` is not a clean one-line refusal ('' when it is)."""
    if "Traceback" in stderr:
        return "traceback on stderr"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "no message on stderr"
    msg = lines[-1]
    if one_line and len(lines) != 1:
        return f"{len(lines)} lines on stderr"
    if len(msg) > MESSAGE_LIMIT:
        return f"a {len(msg)}-character message"
    if not spark_ok and any(m in stderr for m in SPARK_MARKS):
        return "Spark/Java output in the message"
    if file_name and file_name not in msg:
        return f"the message does not name the file {file_name}"
    for m in mentions:
        if m not in msg:
            return f"the message does not mention {m!r}"
    return ""


# A valid file with a step a KRaft controller never takes (an election asking for an epoch, an
# ISR or a leader ElectLeaders would not elect) replays under --protocol all with those variants'
# results "not expressible" (exit 0, one result per variant); a run where no variant can take it is
# refused: one clean line naming the file, the step and the variant (these words).
STEP_REFUSED = "controller can take"


def judge_scenario_run(case: Case, status: int | None, stdout: str, stderr: str, file_name: str, timed_out: bool = False,
                       slow: bool = False) -> Outcome:
    """The verdict on ``replemu run FILE --protocol all --json`` for ``case``."""
    if timed_out:
        return Outcome(HANG, "timed out")
    if status == 2:
        problem = message_problem(stderr, file_name)
        if problem == "traceback on stderr":
            return Outcome(TRACEBACK, problem)
        if case.expected == VALID and not (STEP_REFUSED in stderr and not problem):
            return Outcome(OTHER, f"refused a valid file: {last_line(stderr)[:200]}")
        if problem:
            return Outcome(OTHER, f"exit 2 but {problem}")
        return Outcome(HANG, "clean refusal, but slow") if slow else Outcome(CLEAN)
    if status in (0, 1):
        if "Traceback" in stderr:
            return Outcome(TRACEBACK, "traceback on stderr")
        if case.expected == INVALID:
            return Outcome(SILENT, f"exit {status}")
        try:
            runs = json.loads(stdout)
        except ValueError:
            return Outcome(OTHER, "stdout is not JSON")
        if not (isinstance(runs, list) and len(runs) == len(VARIANT_NAMES)
                and all(isinstance(r, dict) and r.get("format") == 1 for r in runs)):
            return Outcome(OTHER, f"stdout is not {len(VARIANT_NAMES)} result objects (one per variant)")
        return Outcome(HANG, "replayed, but slow") if slow else Outcome(CLEAN)
    return Outcome(TRACEBACK, f"exit status {status}")


# -- bad command lines -----------------------------------------------------------------------


@dataclass(frozen=True)
class CliCase:
    """A command line (``{placeholders}`` name the fixtures of ``cli_fixtures``)."""

    label: str
    args: tuple[str, ...]
    expected: str = INVALID  # invalid: exit 2; either: 0 or 2
    spark: bool = False  # would start Spark if not refused first: must fail fast (before the JVM)
    mentions: tuple[str, ...] = ()  # words the message must contain ({placeholders} allowed)
    needs: tuple[str, ...] = ()  # expensive fixtures: "checkpoint" (a stream's real checkpoint)
    note: str = ""
    isolate: bool = False  # run in its own process even in-process suites (long loops, process-wide state)

    def argv(self, fx: dict[str, str]) -> list[str]:
        return [a.format(**fx) for a in self.args]

    def words(self, fx: dict[str, str]) -> tuple[str, ...]:
        return tuple(m.format(**fx) for m in self.mentions)


def _c(label: str, *args: str, **kw) -> CliCase:
    if args and args[0] == "campaign":
        kw.setdefault("isolate", True)
    return CliCase(label, args, **kw)


STREAM = ("stream", "--input", "{events}", "--output", "{new}/out", "--checkpoint", "{new}/ck", "--protocol", "kip320")
CAMPAIGN = ("campaign", "--partitions", "2", "--seed", "1", "--profile", "clean", "--engine", "local")
SHRINK = ("shrink", "{s1}", "--protocol", "hw", "--invariant", "StrongIsr")

CLI_CASES: tuple[CliCase, ...] = (
    # run
    _c("run: missing file", "run", "{missing}.yaml", mentions=("missing",)),
    _c("run: a directory", "run", "{empty_dir}", mentions=("empty",)),
    _c("run: /dev/null", "run", "/dev/null", mentions=("/dev/null",)),
    _c("run: a text file", "run", "{file}", mentions=("plain.txt",)),
    _c("run: no files", "run"),
    _c("run: unknown protocol", "run", "{s1}", "--protocol", "bogus", mentions=("bogus",)),
    _c("run: --protocol without value", "run", "{s1}", "--protocol"),
    _c("run: unknown knob", "run", "{s1}", "--knob", "bogus=1", mentions=("bogus",)),
    _c("run: knob without =", "run", "{s1}", "--knob", "trunc_rule", mentions=("trunc_rule",)),
    _c("run: knob bad value", "run", "{s1}", "--knob", "trunc_rule=kip999", mentions=("kip999",)),
    _c("run: a valid and an invalid file", "run", "{s1}", "{invalid}", mentions=("bad.yaml",)),
    _c("run: --from-dirs missing", "run", "{s1}", "--from-dirs", "{missing}", mentions=("missing",)),
    _c("run: --from-dirs a file", "run", "{s1}", "--from-dirs", "{file}", mentions=("plain.txt",)),
    _c("run: --from-dirs an empty directory", "run", "{s1}", "--from-dirs", "{empty_dir}", mentions=("empty",)),
    # export
    _c("export: --to under a regular file", "export", "{result}", "--to", "{file}/x", mentions=("plain.txt",)),
    _c("export: --to /etc/passwd/x", "export", "{result}", "--to", "/etc/passwd/x", mentions=("/etc/passwd",)),
    _c("export: --to a regular file", "export", "{result}", "--to", "{file}", mentions=("plain.txt",)),
    _c("export: array result, --to under a regular file", "export", "{result_all}", "--to", "{file}/x", mentions=("plain.txt",)),
    _c("export: missing result", "export", "{missing}.json", "--to", "{new}", mentions=("missing",)),
    _c("export: result not JSON", "export", "{garbage_json}", "--to", "{new}", mentions=("garbage.json",)),
    _c("export: a scenario YAML as result", "export", "{s1}", "--to", "{new}", mentions=("s1.yaml",)),
    _c("export: empty JSON array", "export", "{empty_array}", "--to", "{new}", mentions=("empty-array.json",)),
    _c("export: result without replicas", "export", "{hollow_result}", "--to", "{new}", mentions=("hollow.json",)),
    _c("export: result with a bad log", "export", "{bad_log_result}", "--to", "{new}", mentions=("bad-log.json",)),
    _c("export: no --to", "export", "{result}"),
    # compile
    _c("compile: --out under a regular file", "compile", "{s1}", "--out", "{file}/x", mentions=("plain.txt",)),
    _c("compile: --out /etc/passwd/x", "compile", "{s1}", "--out", "/etc/passwd/x", mentions=("/etc/passwd",)),
    _c("compile: --out a regular file", "compile", "{s1}", "--out", "{file}", mentions=("plain.txt",)),
    _c("compile: --split 0", "compile", "{s1}", "--out", "{new}", "--split", "0"),
    _c("compile: --split x", "compile", "{s1}", "--out", "{new}", "--split", "x"),
    _c("compile: --split 10**30", "compile", "{s1}", "--out", "{new}", "--split", str(10**30), expected=EITHER, isolate=True,
       note="far more files than rows: write them (quickly) or refuse; never hang"),
    _c("compile: --format csv", "compile", "{s1}", "--out", "{new}", "--format", "csv"),
    _c("compile: missing scenario", "compile", "{missing}.yaml", "--out", "{new}", mentions=("missing",)),
    _c("compile: invalid scenario", "compile", "{invalid}", "--out", "{new}", mentions=("bad.yaml",)),
    _c("compile: one file twice (same partition key)", "compile", "{s1}", "{s1}", "--out", "{new}"),
    _c("compile: no --out", "compile", "{s1}"),
    # dashboard
    _c("dashboard: --output under a regular file", "dashboard", "{result}", "--output", "{file}/x", mentions=("plain.txt",)),
    _c("dashboard: --output /etc/passwd/x", "dashboard", "{result}", "--output", "/etc/passwd/x", mentions=("/etc/passwd",)),
    _c("dashboard: --output a regular file", "dashboard", "{result}", "--output", "{file}", mentions=("plain.txt",)),
    _c("dashboard: unknown --partition", "dashboard", "{result}", "--output", "{new}", "--partition", "nope/9", mentions=("nope/9",)),
    _c("dashboard: missing input", "dashboard", "{missing}.json", "--output", "{new}", mentions=("missing",)),
    _c("dashboard: input not JSON", "dashboard", "{garbage_json}", "--output", "{new}", mentions=("garbage.json",)),
    _c("dashboard: empty directory", "dashboard", "{empty_dir}", "--output", "{new}", mentions=("empty",)),
    _c("dashboard: a scenario YAML", "dashboard", "{s1}", "--output", "{new}", mentions=("s1.yaml",)),
    # campaign
    _c("campaign: --out under a regular file", *CAMPAIGN, "--out", "{file}/x", mentions=("plain.txt",)),
    _c("campaign: --out a regular file", *CAMPAIGN, "--out", "{file}", mentions=("plain.txt",)),
    _c("campaign (spark): --out under a regular file", "campaign", "--partitions", "2", "--seed", "1", "--profile", "clean",
       "--out", "{file}/x", spark=True, mentions=("plain.txt",)),
    _c("campaign: --partitions 0", "campaign", "--partitions", "0", "--seed", "1", "--profile", "clean", "--engine", "local"),
    _c("campaign: --partitions -1", "campaign", "--partitions", "-1", "--seed", "1", "--profile", "clean", "--engine", "local"),
    _c("campaign: --partitions 10**30", "campaign", "--partitions", str(10**30), "--seed", "1", "--profile", "clean",
       "--engine", "local", "--out", "{new}"),
    _c("campaign: --seed x", "campaign", "--partitions", "2", "--seed", "x", "--profile", "clean", "--engine", "local"),
    _c("campaign: unknown profile", "campaign", "--partitions", "2", "--seed", "1", "--profile", "bogus", "--engine", "local",
       mentions=("bogus",)),
    _c("campaign: unknown engine", "campaign", "--partitions", "2", "--seed", "1", "--profile", "clean", "--engine", "bogus"),
    _c("campaign: unknown protocol", *CAMPAIGN, "--protocol", "bogus"),
    _c("campaign: unknown knob", *CAMPAIGN, "--knob", "bogus=1", "--out", "{new}", mentions=("bogus",)),
    # shrink
    _c("shrink: --out under a regular file", *SHRINK, "--out", "{file}/x", mentions=("plain.txt",)),
    _c("shrink: --out /etc/passwd/x", *SHRINK, "--out", "/etc/passwd/x", mentions=("/etc/passwd",)),
    _c("shrink: --out a directory", *SHRINK, "--out", "{empty_dir}", mentions=("empty",)),
    _c("shrink: unknown invariant", "shrink", "{s1}", "--protocol", "hw", "--invariant", "Bogus", mentions=("Bogus",)),
    _c("shrink: neither file nor --from-campaign", "shrink", "--protocol", "hw", "--invariant", "StrongIsr"),
    _c("shrink: both file and --from-campaign", *SHRINK, "--from-campaign", "1/clean/0"),
    _c("shrink: --from-campaign x", "shrink", "--from-campaign", "x", "--protocol", "hw", "--invariant", "StrongIsr"),
    _c("shrink: --from-campaign unknown profile", "shrink", "--from-campaign", "1/bogus/0", "--protocol", "hw",
       "--invariant", "StrongIsr", mentions=("bogus",)),
    _c("shrink: --from-campaign a/b/c", "shrink", "--from-campaign", "a/b/c", "--protocol", "hw", "--invariant", "StrongIsr"),
    _c("shrink: --from-campaign negative partition", "shrink", "--from-campaign", "1/clean/-1", "--protocol", "hw",
       "--invariant", "StrongIsr", "--out", "{new}/s.yaml"),
    _c("shrink: a scenario that does not break the invariant", "shrink", "{s0}", "--protocol", "hw", "--invariant", "StrongIsr",
       "--out", "{new}/s.yaml"),
    _c("shrink: invalid scenario", "shrink", "{invalid}", "--protocol", "hw", "--invariant", "StrongIsr", mentions=("bad.yaml",)),
    _c("shrink: --protocol all", "shrink", "{s1}", "--protocol", "all", "--invariant", "StrongIsr"),
    # stream (would start Spark)
    _c("stream: empty input directory", "stream", "--input", "{empty_dir}", "--output", "{new}/out", "--checkpoint", "{new}/ck",
       "--protocol", "kip320", spark=True, mentions=("empty",)),
    _c("stream: missing input", "stream", "--input", "{missing}", "--output", "{new}/out", "--checkpoint", "{new}/ck",
       "--protocol", "kip320", spark=True, mentions=("missing",)),
    _c("stream: input a regular file", "stream", "--input", "{file}", "--output", "{new}/out", "--checkpoint", "{new}/ck",
       "--protocol", "kip320", spark=True, mentions=("plain.txt",)),
    _c("stream: --trigger processing-time=-5s", *STREAM, "--trigger", "processing-time=-5s", spark=True, mentions=("-5s",)),
    _c("stream: --trigger processing-time=0s", *STREAM, "--trigger", "processing-time=0s", spark=True, mentions=("0s",)),
    _c("stream: --trigger processing-time=5 (no unit)", *STREAM, "--trigger", "processing-time=5", spark=True),
    _c("stream: --trigger bogus", *STREAM, "--trigger", "bogus", spark=True, mentions=("bogus",)),
    _c("stream: --master bogus://x", *STREAM, "--master", "bogus://x", spark=True, mentions=("bogus://x",)),
    _c("stream: --master empty", *STREAM, "--master", "", spark=True),
    _c("stream: --output under a regular file", "stream", "--input", "{events}", "--output", "{file}/x", "--checkpoint",
       "{new}/ck", "--protocol", "kip320", spark=True, mentions=("plain.txt",)),
    _c("stream: --checkpoint under a regular file", "stream", "--input", "{events}", "--output", "{new}/out", "--checkpoint",
       "{file}/x", "--protocol", "kip320", spark=True, mentions=("plain.txt",)),
    _c("stream: --protocol bogus", *STREAM[:-1], "bogus", spark=True),
    _c("stream: --max-files-per-trigger 0", *STREAM, "--max-files-per-trigger", "0", spark=True),
    _c("stream: --gap-timeout-ms -5", *STREAM, "--gap-timeout-ms", "-5", spark=True),
    _c("stream: --compact-min-records 0", *STREAM, "--compact-min-records", "0", spark=True),
    _c("stream: unknown --workload", "stream", "--workload", "bogus", "--partitions", "2", "--seed", "1", "--max-steps", "5",
       "--output", "{new}/out", "--checkpoint", "{new}/ck", "--protocol", "kip320", spark=True, mentions=("bogus",)),
    _c("stream: --workload without --partitions", "stream", "--workload", "clean", "--output", "{new}/out",
       "--checkpoint", "{new}/ck", "--protocol", "kip320", spark=True),
    # (no --seed, --protocol or --max-steps is no error: 1, all and the profile's longest partition; issue 46 item 7)
    _c("stream: --workload and --input", *STREAM, "--workload", "clean", "--partitions", "2", "--seed", "1", "--max-steps", "5",
       spark=True),
    _c("stream: unknown knob", *STREAM, "--knob", "bogus=1", spark=True, mentions=("bogus",)),
    _c("stream: unknown --state-store", *STREAM, "--state-store", "bogus", spark=True),
    _c("stream: no --output", "stream", "--input", "{events}", "--checkpoint", "{new}/ck", "--protocol", "kip320", spark=True),
    # state (would start Spark)
    _c("state: missing checkpoint", "state", "{missing}", spark=True, mentions=("missing",)),
    _c("state: empty checkpoint directory", "state", "{empty_dir}", spark=True, mentions=("empty",)),
    _c("state: a regular file", "state", "{file}", spark=True, mentions=("plain.txt",)),
    _c("state: a directory that is no checkpoint", "state", "{junk_dir}", spark=True, mentions=("junk",)),
    _c("state: --partition x", "state", "{empty_dir}", "--partition", "x", spark=True),
    _c("state: --master bogus://x", "state", "{missing}", "--master", "bogus://x", spark=True),
    # one JVM start for both filters (each costs one): the message names the topic and the partition asked for
    _c("state: unknown --topic and --partition of a real checkpoint", "state", "{checkpoint}", "--topic", "nope",
       "--partition", "99", spark=True, mentions=("nope", "99"), needs=("checkpoint",)),
    _c("state: real checkpoint, --master bogus://x", "state", "{checkpoint}", "--master", "bogus://x", spark=True,
       mentions=("bogus://x",), needs=("checkpoint",)),
    # results, inspect, misc
    _c("results: missing directory", "results", "{missing}", mentions=("missing",)),
    _c("results: a regular file", "results", "{file}", mentions=("plain.txt",)),
    _c("results: empty directory", "results", "{empty_dir}", mentions=("empty",)),
    _c("results --json: missing directory", "results", "{missing}", "--json", mentions=("missing",)),
    _c("inspect: missing directory", "inspect", "{missing}", mentions=("missing",)),
    _c("inspect: a regular file", "inspect", "{file}", mentions=("plain.txt",)),
    _c("inspect: empty directory", "inspect", "{empty_dir}", mentions=("empty",)),
    _c("inspect: a replica directory with a garbage segment", "inspect", "{garbage_replica}", expected=EITHER,
       note="inspect reports what Kafka's log recovery would do (findings, exit 0) or refuses; never a traceback"),
    _c("no command", ),
    _c("unknown command", "bogus"),
    _c("steps: an extra argument", "steps", "extra"),
)


def cli_fixtures(root: Path, run_cli: Callable[[list[str]], tuple[int, str, str]], checkpoint: bool = False,
                 stream: Callable[[str, str, str], None] | None = None) -> dict[str, str]:
    """The files the command lines name, under ``root``.  ``run_cli(argv) -> (status, out, err)``
    runs ``replemu`` (used for a real result JSON, events and, with ``checkpoint``, a stream).
    ``stream(events, output, checkpoint)``: makes the checkpoint instead of ``replemu stream
    --protocol kip320`` (the test suite runs it on its SparkSession: no JVM to start)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    s = seeds()
    (root / "s1.yaml").write_bytes(s["s1-kip101-scenario-1"].raw)
    (root / "s0.yaml").write_bytes(s["s0-basic-epoch-workflow"].raw)
    (root / "bad.yaml").write_text("name: bad\nreplicas: [1]\nsteps: []\nbogus: 1\n")
    (root / "plain.txt").write_text("just a regular file\n")
    (root / "empty").mkdir(exist_ok=True)
    (root / "junk").mkdir(exist_ok=True)
    (root / "junk" / "offsets").write_text("junk\n")
    (root / "garbage.json").write_text("{not json")
    (root / "empty-array.json").write_text("[]")
    (root / "hollow.json").write_text(json.dumps({"format": 1, "scenario": "x", "protocol": "hw", "final": {}}))
    fx = {
        "s1": str(root / "s1.yaml"), "s0": str(root / "s0.yaml"), "invalid": str(root / "bad.yaml"),
        "file": str(root / "plain.txt"), "empty_dir": str(root / "empty"), "junk_dir": str(root / "junk"),
        "missing": str(root / "missing"), "garbage_json": str(root / "garbage.json"),
        "empty_array": str(root / "empty-array.json"), "hollow_result": str(root / "hollow.json"),
        "result": str(root / "result.json"), "result_all": str(root / "result-all.json"),
        "bad_log_result": str(root / "bad-log.json"), "events": str(root / "events"),
        "garbage_replica": str(root / "garbage-replica"), "checkpoint": str(root / "checkpoint" / "ck"),
        "new": str(root / "new"),
    }
    status, out, err = run_cli(["run", fx["s1"], "--protocol", "hw", "--json"])
    if status != 0:
        raise RuntimeError(f"replemu run failed, no result fixture: {err[-500:]}")
    Path(fx["result"]).write_text(out)
    result = json.loads(out)
    status, out, err = run_cli(["run", fx["s1"], "--protocol", "all", "--json"])
    Path(fx["result_all"]).write_text(out)
    for rep in result["final"]["replicas"].values():
        rep["log"] = [["zero", None, 3], 7]
    Path(fx["bad_log_result"]).write_text(json.dumps(result))
    status, out, err = run_cli(["compile", fx["s1"], "--out", fx["events"]])
    if status != 0:
        raise RuntimeError(f"replemu compile failed, no events fixture: {err[-500:]}")
    seg = root / "garbage-replica" / "broker-1" / "t-0"
    seg.mkdir(parents=True, exist_ok=True)
    (seg / "00000000000000000000.log").write_bytes(bytes(range(256)) * 3)
    (seg / "leader-epoch-checkpoint").write_text("garbage\n")
    (seg / "replication-offset-checkpoint").write_text("0\n")
    if checkpoint and not Path(fx["checkpoint"]).exists():
        base = Path(fx["checkpoint"]).parent
        if stream is not None:
            stream(fx["events"], str(base / "out"), fx["checkpoint"])
            return fx
        status, out, err = run_cli(["stream", "--input", fx["events"], "--output", str(base / "out"), "--checkpoint",
                                    fx["checkpoint"], "--protocol", "kip320"])
        if status != 0:
            raise RuntimeError(f"replemu stream failed, no checkpoint fixture: {last_line(err)}")
    return fx


def fresh_dir(fx: dict[str, str], label: str) -> dict[str, str]:
    """The fixtures with ``{new}`` a path no other case uses (nothing exists there yet)."""
    return {**fx, "new": str(Path(fx["new"]) / hashlib.sha256(label.encode()).hexdigest()[:10])}


def judge_cli_run(case: CliCase, status: int | None, stderr: str, fx: dict[str, str], elapsed: float,
                  timed_out: bool = False, fail_fast: float = 15.0) -> Outcome:
    """The verdict on one bad command line."""
    if timed_out:
        return Outcome(HANG, "timed out")
    if "Traceback" in stderr:
        return Outcome(TRACEBACK, "traceback on stderr")
    if status == 2:
        problem = message_problem(stderr, None, case.words(fx), one_line=False, spark_ok=bool(case.needs))
        if problem:
            return Outcome(OTHER, f"exit 2 but {problem}")
        if case.spark and "checkpoint" not in case.needs and elapsed > fail_fast:
            return Outcome(HANG, f"refused after {elapsed:.0f} s (Spark started first)")
        return Outcome(CLEAN)
    if status == 0 and case.expected == EITHER:
        return Outcome(CLEAN)
    if status in (0, 1):
        return Outcome(SILENT, f"exit {status}")
    return Outcome(TRACEBACK, f"exit status {status}")


if __name__ == "__main__":  # a quick look: python tests/hostile.py [N]
    import sys

    for c in generate(0, int(sys.argv[1]) if len(sys.argv) > 1 else len(GENERATORS)):
        print(f"{c.expected:8} {len(c.data):>9} B  {c.label}")
