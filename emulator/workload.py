"""Seeded workload and fault generator: one contract scenario per partition.

One root seed; every partition ``k`` draws from independent streams derived from it,
``replemu/<seed>/<k>/header`` (replica count, config, length), ``…/workload`` (produces,
elections, flushes), ``…/faults`` (crashes, power losses, lost responses, ISR shrinks) and
``…/scheduling`` (who fetches, which replicas hear a LeaderAndIsr late and when), so adding draws
to one concern never shifts another.  A draw is a pure function of (stream, step, draw): draw
``i`` of the burst that starts at step ``n`` is SplitMix64's output at position ``n·2^20 + i`` of
the stream whose key is the stream name's BLAKE2b (``Draws``; generator ``GENERATOR_VERSION``).
Nothing of the randomness is state: a generator is resumed from its counters and shadow alone.  Rates and
budgets come from a ``Profile`` (the user-editable table is ``conf/workloads.yaml``, read by
``scenario_io.profiles``; ``profile_from_mapping`` is its one validator).

The controller reacts as Kafka's does: a crashed broker is removed from the ISR
(``controller_remove``) and, if the partition lost its leader, a new one is elected from the live
ISR in assignment order (``elect`` without arguments: the core applies the rule, unclean only
when the profile allows it); fast elections deliver LeaderAndIsr to some replicas only, the
others process it some steps later; a restarted broker processes the current LeaderAndIsr
(maybe late).  A shadow partition (kip320, stepped without a checker: ``shadow_compactable_offset``) tells the
generator who leads and who follows; the generated steps are the same for every variant.

``WorkloadGenerator`` is that sequence as an object that stops anywhere and resumes from its document
(``step_bursts`` drives one): the streaming job keeps each partition's generator in the
partition's state, so the steps are generated where the partition is stepped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Iterator, NoReturn, Sequence

from .bounds import short_repr
from .partition import Partition
from .replica import Role
from .scenario import Scenario, parse_partition, parse_scenario
from .steps import STEP_TABLE
from .variants import VARIANTS

RATE_KEYS = ("produce", "fetch", "lost_response", "crash", "power", "restart", "fast_election",
             "late_leader_and_isr", "shrink_isr", "checkpoint_hw", "flush", "shutdown", "fence")
# shutdown: the share of stops that are clean shutdowns; fence: the share of deaths the controller
# notices by fencing the broker (KRaft; a ZooKeeper variant refuses the step) rather than by
# controller_remove.  A rate of 0 draws nothing, so profiles without them generate as before.


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    replicas: tuple[int, int]
    steps: tuple[int, int]
    min_insync_replicas: tuple[int, ...]
    acks: tuple[str, ...]
    unclean: float
    explicit_hw_checkpoint: float
    explicit_log_flush: float
    rates: dict[str, float]
    # Opt-in (issue 49): the share of workload draws that are a reassignment (KRaft's reassign);
    # above 0 the partitions get one spare broker and a KRaft shadow. 0: the profile generates as before.
    reassign: float = 0.0


class ProfileError(ValueError):
    """An invalid workload profile: the message names the profile and the key."""


PROFILE_KEYS = ("description", "replicas", "steps", "min_insync_replicas", "acks", "unclean", "explicit_hw_checkpoint",
                "explicit_log_flush", "rates", "reassign")


def profile_from_mapping(name: str, p: Any) -> Profile:
    """Validate one profile of the profiles table (``conf/workloads.yaml``)."""
    def fail(reason: str) -> NoReturn:
        raise ProfileError(f"profile {name}: {reason}")

    if not isinstance(p, dict):
        fail("must be a mapping")
    unknown = sorted(str(k) for k in p if k not in PROFILE_KEYS)
    if unknown:
        fail(f"unknown key {short_repr(unknown[0])} (allowed: {', '.join(PROFILE_KEYS)})")
    rates = p.get("rates") or {}
    if not isinstance(rates, dict):
        fail("rates must be a mapping")
    unknown = sorted(set(rates) - set(RATE_KEYS))
    if unknown:
        fail(f"unknown rate {short_repr(unknown[0])}")
    try:
        return Profile(
            name=name, description=str(p.get("description", "")), replicas=_pair(p["replicas"]), steps=_pair(p["steps"]),
            min_insync_replicas=tuple(int(m) for m in p["min_insync_replicas"]), acks=tuple(str(a) for a in p["acks"]),
            unclean=float(p["unclean"]), explicit_hw_checkpoint=float(p["explicit_hw_checkpoint"]),
            explicit_log_flush=float(p["explicit_log_flush"]), rates={k: float(rates.get(k, 0.0)) for k in RATE_KEYS},
            reassign=float(p.get("reassign", 0.0)),
        )
    except KeyError as exc:
        fail(f"missing key {exc.args[0]!r}")
    except (TypeError, ValueError) as exc:
        fail(f"bad value: {exc}")


def _pair(v: Any) -> tuple[int, int]:
    lo, hi = (int(x) for x in v)
    if not 1 <= lo <= hi:
        raise ValueError(f"expected [low, high] with 1 <= low <= high, got {v}")
    return lo, hi


def profile_to_mapping(profile: Profile) -> dict[str, Any]:
    """The profile as plain data (passed to a stream's executors as JSON)."""
    d = asdict(profile)
    d.pop("name")
    if not d["reassign"]:
        d.pop("reassign")  # the mapping of a profile without reassignments is as before
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


# The generator of the partition workloads (campaigns and workload streams): its name is part of a
# stream's run identity and ``run.json``, and of the bytes a stream keeps (``GENERATOR_LAYOUT``).
# 1: three Mersenne Twister streams (``random.Random``), their 7.5 KB of state stored per partition;
# 2: counter-based draws (``Draws``), nothing stored.  Every seed's workload changed with 2.
GENERATOR_VERSION = 2
STREAM_NAMES = ("header", "workload", "faults", "scheduling")
_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment
_BURST_SHIFT = 20  # draws of one burst: position (step << 20) + i; a burst draws far fewer than 2^20


def stream_key(seed: int, partition: int, name: str) -> int:
    """The 64-bit key of one of a partition's streams: ``replemu/<seed>/<partition>/<name>``'s BLAKE2b."""
    digest = hashlib.blake2b(f"replemu/{seed}/{partition}/{name}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def splitmix64(key: int, position: int) -> int:
    """SplitMix64's output number ``position`` (0-based) of the sequence seeded with ``key``."""
    z = (key + (position + 1) * _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class Draws:
    """The draws of one stream in one burst: a pure function of (stream key, the step the burst
    starts at, how many were drawn before), so nothing of it is state.  ``random``, ``randint``
    and ``choice`` as ``random.Random``'s (not the same numbers)."""

    def __init__(self, key: int, step: int) -> None:
        self.key = key
        self.position = step << _BURST_SHIFT

    def next64(self) -> int:
        x = splitmix64(self.key, self.position)
        self.position += 1
        return x

    def random(self) -> float:
        """A float in [0, 1) with 53 random bits."""
        return (self.next64() >> 11) * (1.0 / 9007199254740992.0)

    def randint(self, lo: int, hi: int) -> int:
        """An int in ``lo..hi`` (both included)."""
        return lo + self.next64() % (hi - lo + 1)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.next64() % len(seq)]


def streams(seed: int, partition: int) -> dict[str, int]:
    """The keys of partition ``partition``'s streams (``STREAM_NAMES``)."""
    return {name: stream_key(seed, partition, name) for name in STREAM_NAMES}


def workload_topic(seed: int, profile_name: str) -> str:
    """The topic of every generated partition of one seed and profile (no draw decides it)."""
    return f"campaign-{seed}-{profile_name}"


def partition_header(seed: int, partition: int, profile: Profile) -> dict[str, Any]:
    """Name, key, replicas and config of generated partition ``partition`` (the workload stream's
    first draws)."""
    return _draw_header(Draws(stream_key(seed, partition, "header"), 0), seed, partition, profile)


def _draw_header(w: Draws, seed: int, partition: int, profile: Profile) -> dict[str, Any]:
    n = w.randint(*profile.replicas)
    config: dict[str, Any] = {
        "min_insync_replicas": w.choice([m for m in profile.min_insync_replicas if m <= n] or [1]),
        "unclean_leader_election": w.random() < profile.unclean,
        "acks": w.choice(profile.acks),
        "hw_checkpoint": "explicit" if w.random() < profile.explicit_hw_checkpoint else "every_step",
        "log_flush": "explicit" if w.random() < profile.explicit_log_flush else "every_step",
    }
    if config["acks"] != "all":
        config["acks"] = int(config["acks"])
    header: dict[str, Any] = {
        "name": f"campaign-{seed}-{profile.name}-p{partition}",
        "description": f"replemu campaign seed {seed}, profile {profile.name}, partition {partition}",
        "topic": workload_topic(seed, profile.name),
        "partition": partition,
        "replicas": list(range(1, n + 1)),
        "config": config,
        "length": w.randint(*profile.steps),
    }
    if profile.reassign:  # one spare broker a reassignment can move the partition to (no draw)
        header["brokers"] = list(range(1, n + 2))
    return header


# The shadow replay compacts its unchangeable prefix every this many steps (once a quarter of that
# many records are stable), as the stream does: without it, its logs and epoch caches grow with
# history, and an endless workload gets slower with every election and holds every record of
# every partition in the source's memory. Compaction never changes who leads, follows or is alive.
SHADOW_COMPACT_EVERY = 64


def shadow_compactable_offset(p: Partition) -> int:
    """The prefix the shadow partition (stepped without a checker) can compact: the generator
    reads only who is alive, leads and follows, which the partition alone decides, so the shadow
    is never judged (the checker was two thirds of a step, and its ghost state most of a shadow's
    memory).  Below every replica's recovery point, HW, HW checkpoint and LEO (dead replicas
    included) and below the first record of every parked acks=all produce, as the checker's
    bound, and identical on every replica (compared directly instead of through the checker's
    ledger): no step truncates or reads below it, so compacting it changes no later step."""
    reps = list(p.replicas.values())
    k = p.settled_offset()
    start = p.compacted_offset
    if k <= start:
        return start
    logs = [r.log for r in reps]
    first = logs[0]
    for o in range(start, k):
        record = first[o]
        if any(log[o] != record for log in logs[1:]):
            return o
    return k


# Generated steps parsed for the shadow, by kind, arguments and assignment: steps are frozen, and
# most repeat (fetches, elections, the same produced values in every partition). Bounded. (The
# generator writes no booleans, so no key confuses True with 1.)
_PARSED: dict[tuple, Any] = {}
_PARSED_MAX = 1 << 14


def _parsed(step: dict, assignment: tuple[int, ...]):
    (kind, args), = step.items()
    key = (kind, assignment, *((k, tuple(v) if type(v) is list else v) for k, v in args.items()))
    parsed = _PARSED.get(key)
    if parsed is None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        parsed = _PARSED[key] = STEP_TABLE.parse(kind, args, assignment)
    return parsed


def step_bursts(seed: int, partition: int, profile: Profile) -> Iterator[list[dict]]:
    """The partition's endless step sequence, one burst (an action and the controller's reaction)
    at a time; any prefix of it is the same whoever asks and however far."""
    generator = WorkloadGenerator(seed, partition, profile)
    while True:
        yield generator.next_burst()


class WorkloadGenerator:
    """Partition ``partition``'s step sequence (``step_bursts``) as an object that can stop
    anywhere and resume from its document (``to_document`` / ``from_document``): the streaming job keeps
    one per partition in that partition's state, so the steps are generated where the partition
    is stepped and nothing is generated twice after a restart.

    ``header`` is the partition's header (``partition_header``); ``steps(first, last)`` hands
    out steps ``first..last`` (sequence numbers, the first step is 1) and keeps the rest of the
    last burst for the next call (``pending``).
    """

    def __init__(self, seed: int, partition: int, profile: Profile | None,
                 resume: dict[str, Any] | None = None) -> None:
        """A new generator from the seed (``profile`` given), or one resumed from the document
        ``to_document`` wrote (``profile`` None, ``resume`` the document): one constructor,
        since a compiled class cannot be made without its ``__init__``."""
        if profile is None:
            if resume is None:
                raise ValueError("a WorkloadGenerator needs a profile or the state to resume")
            self._restore(resume)
            return
        self.seed, self.partition = seed, partition
        self.profile: Profile | None = profile  # None once resumed from bytes (its rates are kept)
        self.rates: dict[str, float] = profile.rates
        self._keys(seed, partition)
        header = partition_header(seed, partition, profile)
        self.header: dict[str, Any] | None = header
        self.replicas: list[int] = header["replicas"]
        config = header["config"]
        self.config: dict[str, Any] = config
        self.hw_checkpoint, self.log_flush = config["hw_checkpoint"], config["log_flush"]
        self.reassign: float = profile.reassign
        self.brokers: list[int] = header.get("brokers", self.replicas)
        _, self.assignment, parsed = parse_partition(header, "generator")
        self.shadow = Partition(self.assignment, parsed, _shadow_variant(self.reassign),
                                tuple(b for b in self.brokers if b not in self.replicas))
        self.next_compaction = SHADOW_COMPACT_EVERY
        self.late: dict[int, int] = {}  # replica -> step count at which it processes its pending LeaderAndIsr
        self.emitted = 0  # steps generated (handed out or pending)
        self.produced = 0  # values produced
        self.started = False  # the first burst (the first election) was generated
        self.pending: list[dict] = []  # generated steps not handed out yet (``steps``)

    def _keys(self, seed: int, partition: int) -> None:
        keys = streams(seed, partition)
        self.w_key, self.f_key, self.s_key = keys["workload"], keys["faults"], keys["scheduling"]

    @property
    def next_seq(self) -> int:
        """The sequence number of the next step ``steps`` hands out."""
        return self.emitted - len(self.pending) + 1

    def steps(self, first: int, last: int) -> list[dict]:
        """Steps ``first..last``; ``first`` is ``next_seq`` or later (the steps between are
        generated and dropped).  ``ValueError`` for a step already handed out."""
        taken = self.emitted - len(self.pending)
        if first <= taken:
            raise ValueError(f"steps {first}..{last} asked of a generator at step {taken + 1}")
        while self.emitted < last:
            self.pending.extend(self.next_burst())
        out = self.pending[first - 1 - taken:last - taken]
        del self.pending[:max(0, last - taken)]
        return out

    def _emit(self, step: dict, burst: list) -> None:
        burst.append(step)
        self.emitted += 1
        shadow = self.shadow
        shadow.apply(_parsed(step, tuple(self.brokers)))
        shadow.errors.clear()  # an endless generator keeps no error history

    def next_burst(self) -> list[dict]:
        """The next burst of the sequence (an action and the controller's reaction)."""
        emit = self._emit
        burst: list[dict] = []
        if not self.started:
            self.started = True
            emit({"elect": {}}, burst)
            return burst
        shadow, late, r = self.shadow, self.late, self.rates
        step = self.emitted  # the burst's draws: a function of the step it starts at
        w, f, s = Draws(self.w_key, step), Draws(self.f_key, step), Draws(self.s_key, step)
        for rid, due in sorted(late.items()):
            if due <= self.emitted and shadow.replicas[rid].alive:
                emit({"leader_and_isr": {"replica": rid}}, burst)
                del late[rid]
        brokers = self.brokers  # the replicas, and with reassignments the spare broker
        alive = [x for x in brokers if shadow.replicas[x].alive]
        dead = [x for x in brokers if not shadow.replicas[x].alive]
        followers = [x for x in alive if shadow.replicas[x].role is Role.FOLLOWER]
        roll = f.random()
        if roll < r["crash"] and len(alive) > 1:
            victim = f.choice(alive)
            if r["shutdown"] and f.random() < r["shutdown"]:
                emit({"shutdown": {"replica": victim}}, burst)
            else:
                mode = "power" if f.random() < r["power"] else "process"
                emit({"crash": {"replica": victim, "mode": mode}}, burst)
            # the controller notices the broker is gone
            notice = "fence" if r["fence"] and f.random() < r["fence"] else "controller_remove"
            emit({notice: {"replica": victim}}, burst)
            if shadow.controller.leader is None:
                emit({"elect": {}}, burst)
        elif dead and roll < r["crash"] + r["crash"] * r["restart"] * 2:
            back = s.choice(dead)
            emit({"restart": {"replica": back}}, burst)
            if s.random() < r["late_leader_and_isr"]:
                late[back] = self.emitted + s.randint(1, 6)
            else:
                emit({"leader_and_isr": {"replica": back}}, burst)
        elif self.reassign and s.random() < self.reassign:  # opt-in: no draw for the other profiles
            emit(self._reassignment(s), burst)
        else:
            roll = w.random()
            if roll < r["fast_election"] and len(alive) > 1:
                hear_now = [x for x in alive if s.random() >= r["late_leader_and_isr"]]
                emit({"elect": {"to": hear_now}}, burst)
                for x in alive:
                    if x not in hear_now:
                        late[x] = self.emitted + s.randint(1, 6)
            elif roll < r["fast_election"] + r["shrink_isr"] and followers:
                emit({"shrink_isr": {"replica": f.choice(followers)}}, burst)
            elif self.hw_checkpoint == "explicit" and roll < r["fast_election"] + r["shrink_isr"] + r["checkpoint_hw"]:
                emit({"checkpoint_hw": {"replica": s.choice(alive)}}, burst)
            elif self.log_flush == "explicit" and w.random() < r["flush"]:
                emit({"flush": {"replica": s.choice(alive)}}, burst)
            elif w.random() < r["produce"] / (r["produce"] + r["fetch"]) or not followers:
                count = w.randint(1, 2)
                values = [f"v{self.produced + i}" for i in range(count)]
                self.produced += count
                emit({"produce": {"values": values} if count > 1 else {"value": values[0]}}, burst)
            else:
                fetch: dict[str, Any] = {"replica": s.choice(followers)}
                if f.random() < r["lost_response"]:
                    fetch["response"] = "lost"
                emit({"fetch": fetch}, burst)
        if self.emitted >= self.next_compaction:  # an endless stream: keep the shadow's logs and caches a window
            upto = shadow_compactable_offset(shadow)
            if upto - shadow.compacted_offset >= SHADOW_COMPACT_EVERY // 4:
                shadow.compact(upto)
            self.next_compaction = self.emitted + SHADOW_COMPACT_EVERY
        return burst

    def _reassignment(self, s: "Draws") -> dict:
        """A reassign step: cancel the one in progress (half the time), else move one replica to a
        broker outside the replica list (the spare), else rotate the list (a new preferred leader)."""
        shadow = self.shadow
        c = shadow.controller
        if (c.adding or c.removing) and s.random() < 0.5:
            return {"reassign": {"cancel": True}}
        current = list(shadow.assignment)
        outside = [b for b in self.brokers if b not in current]
        if outside:
            out, into = s.choice(current), s.choice(outside)
            return {"reassign": {"replicas": [into if x == out else x for x in current]}}
        return {"reassign": {"replicas": current[1:] + current[:1]}}

    # -- the generator as data ----------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """Everything the generator holds, as JSON-compatible data; ``from_document`` resumes it
        exactly.  No randomness is in it (``Draws``): seed and partition give the streams."""
        return {
            "version": GENERATOR_VERSION, "seed": self.seed, "partition": self.partition,
            "rates": [self.rates[k] for k in RATE_KEYS], "replicas": self.replicas, "config": self.config,
            "next_compaction": self.next_compaction, "late": sorted([rid, due] for rid, due in self.late.items()),
            "emitted": self.emitted, "produced": self.produced, "started": self.started, "pending": self.pending,
            "shadow": _shadow_document(self.shadow, self.replicas, self.config, self.brokers, self.reassign),
            **({"reassign": self.reassign, "brokers": self.brokers} if self.reassign else {}),
        }

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> "WorkloadGenerator":
        """The generator ``to_document`` described; ``ValueError`` for another generator version."""
        if not isinstance(doc, dict) or doc.get("version") != GENERATOR_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else None
            raise ValueError(f"a workload generator of version {version!r}; this build resumes version {GENERATOR_VERSION}")
        return WorkloadGenerator(doc["seed"], doc["partition"], None, doc)

    def _restore(self, doc: dict[str, Any]) -> None:
        g = self
        g.seed, g.partition = doc["seed"], doc["partition"]
        g.profile, g.rates = None, dict(zip(RATE_KEYS, doc["rates"]))
        g.header = None  # drawn at the start; a resumed generator is past it (``partition_header``)
        g._keys(g.seed, g.partition)
        g.replicas, g.config = doc["replicas"], doc["config"]
        g.hw_checkpoint, g.log_flush = g.config["hw_checkpoint"], g.config["log_flush"]
        g.reassign, g.brokers = doc.get("reassign", 0.0), doc.get("brokers", g.replicas)
        g.shadow = _shadow_from_document(doc["shadow"], g.replicas, g.config, g.brokers, g.reassign)
        g.assignment = g.shadow.assignment
        g.next_compaction, g.late = doc["next_compaction"], {rid: due for rid, due in doc["late"]}
        g.emitted, g.produced, g.started, g.pending = doc["emitted"], doc["produced"], doc["started"], doc["pending"]


# The magic of a stored generator (``streaming.state_codec.pack_generator``: this, then its
# ``to_document`` as LZ4'd JSON): version (``GENERATOR_VERSION``), seed, partition, rates (the
# profile's, ``RATE_KEYS`` order), replicas and config (the header's), next_compaction, late
# ([replica, due] pairs), emitted, produced, started, pending (steps generated and not handed out)
# and shadow (the shadow partition: ``emulator.state.state_document`` without the checker's
# ``oracle`` and ``violated``).
GENERATOR_LAYOUT = f"RWG{GENERATOR_VERSION}"
# Per (replicas, config): a blank shadow replay (what a document is read into: assignment, config,
# variant) and its checker's document (the shadow is never judged). Bounded.
_TEMPLATES: dict[str, tuple[Any, dict]] = {}
_TEMPLATES_MAX = 1 << 10


def _shadow_variant(reassign: float):
    """The shadow's rules: kip320's (it only tells who is alive, leads and follows), KRaft's
    (kip903) when the profile reassigns (a ZooKeeper shadow would not move the replicas)."""
    return VARIANTS["kip903"] if reassign else VARIANTS["kip320"]


def _template(replicas: list[int], config: dict[str, Any], brokers: list[int] | None = None,
              reassign: float = 0.0) -> tuple[Any, dict]:
    others = [] if brokers is None else [b for b in brokers if b not in replicas]
    key = json.dumps([replicas, config] + ([others, bool(reassign)] if reassign else []), sort_keys=True)
    known = _TEMPLATES.get(key)
    if known is None:
        from .run import Replay
        from .state import state_document

        _, assignment, parsed = parse_partition({"name": "shadow", "replicas": replicas, "config": config}, "generator")
        blank = Replay(assignment, parsed, _shadow_variant(reassign), brokers=tuple(others))
        doc = state_document(blank)
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        known = _TEMPLATES[key] = (blank, {"violated": doc["violated"], "oracle": doc["oracle"]})
    return known


def _shadow_document(shadow: Partition, replicas: list[int], config: dict[str, Any], brokers: list[int] | None = None,
                     reassign: float = 0.0) -> dict[str, Any]:
    from .run import Replay
    from .state import state_document

    doc = state_document(Replay.of(shadow, _template(replicas, config, brokers, reassign)[0].checker))
    del doc["oracle"], doc["violated"]
    return doc


def _shadow_from_document(doc: dict[str, Any], replicas: list[int], config: dict[str, Any],
                          brokers: list[int] | None = None, reassign: float = 0.0) -> Partition:
    from .state import from_document

    blank, oracle = _template(replicas, config, brokers, reassign)
    return from_document({**doc, **oracle}, like=blank).partition


def generate_partition(seed: int, partition: int, profile: Profile) -> dict[str, Any]:
    """The scenario (contract YAML form) of partition ``partition`` of a campaign: whole bursts of
    its step sequence until the profile's drawn length is reached."""
    doc = partition_header(seed, partition, profile)
    length = doc.pop("length")
    steps: list[dict] = []
    for burst in step_bursts(seed, partition, profile):
        steps.extend(burst)
        if len(steps) >= length:
            break
    doc["steps"] = steps
    return doc


def first_steps_document(seed: int, partition: int, profile: Profile, steps: int) -> dict[str, Any]:
    """The scenario (contract YAML form) of the first ``steps`` steps of partition ``partition``'s
    endless sequence, cut wherever that falls (``generate_partition`` stops at whole bursts)."""
    doc = partition_header(seed, partition, profile)
    doc.pop("length")
    doc["steps"] = WorkloadGenerator(seed, partition, profile).steps(1, steps)
    return doc


def generate_scenario(seed: int, partition: int, profile: Profile) -> Scenario:
    return parse_scenario(generate_partition(seed, partition, profile), source=f"campaign {seed}/{profile.name}/{partition}")
