"""Seeded workload and fault generator: one contract scenario per partition.

One root seed; every partition ``k`` draws from three independent streams derived from it,
``replemu/<seed>/<k>/workload`` (replica count, config, produces), ``…/faults`` (crashes, power
losses, lost responses, ISR shrinks) and ``…/scheduling`` (who fetches, which replicas hear a
LeaderAndIsr late and when), so adding draws to one concern never shifts another.  Rates and
budgets come from a ``Profile`` (the user-editable table is ``conf/workloads.yaml``, read by
``scenario_io.profiles``; ``profile_from_mapping`` is its one validator).

The controller reacts as Kafka's does: a crashed broker is removed from the ISR
(``controller_remove``) and, if the partition lost its leader, a new one is elected from the live
ISR in assignment order (``elect`` without arguments: the core applies the rule, unclean only
when the profile allows it); fast elections deliver LeaderAndIsr to some replicas only, the
others process it some steps later; a restarted broker processes the current LeaderAndIsr
(maybe late).  A shadow partition (kip320, stepped without a checker: ``shadow_compactable_offset``) tells the
generator who leads and who follows; the generated steps are the same for every variant.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any, Iterator, NoReturn

from .bounds import short_repr
from .replica import Role
from .partition import Partition
from .scenario import Scenario, parse_partition, parse_scenario
from .steps import parse_step
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


class ProfileError(ValueError):
    """An invalid workload profile: the message names the profile and the key."""


PROFILE_KEYS = ("description", "replicas", "steps", "min_insync_replicas", "acks", "unclean", "explicit_hw_checkpoint",
                "explicit_log_flush", "rates")


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
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def streams(seed: int, partition: int) -> dict[str, random.Random]:
    return {s: random.Random(f"replemu/{seed}/{partition}/{s}") for s in ("workload", "faults", "scheduling")}


def partition_header(seed: int, partition: int, profile: Profile) -> dict[str, Any]:
    """Name, key, replicas and config of generated partition ``partition`` (the workload stream's
    first draws)."""
    return _draw_header(streams(seed, partition)["workload"], seed, partition, profile)


def _draw_header(w: random.Random, seed: int, partition: int, profile: Profile) -> dict[str, Any]:
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
    return {
        "name": f"campaign-{seed}-{profile.name}-p{partition}",
        "description": f"replemu campaign seed {seed}, profile {profile.name}, partition {partition}",
        "topic": f"campaign-{seed}-{profile.name}",
        "partition": partition,
        "replicas": list(range(1, n + 1)),
        "config": config,
        "length": w.randint(*profile.steps),
    }


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
        parsed = _PARSED[key] = parse_step(kind, args, assignment)
    return parsed


def step_bursts(seed: int, partition: int, profile: Profile) -> Iterator[list[dict]]:
    """The partition's endless step sequence, one burst (an action and the controller's reaction)
    at a time; any prefix of it is the same whoever asks and however far."""
    rng = streams(seed, partition)
    w, f, s = rng["workload"], rng["faults"], rng["scheduling"]
    header = _draw_header(w, seed, partition, profile)  # the workload stream continues after it
    replicas, config, r = header["replicas"], header["config"], profile.rates
    _, assignment, parsed = parse_partition(header, "generator")
    shadow = Partition(assignment, parsed, VARIANTS["kip320"])
    next_compaction = SHADOW_COMPACT_EVERY
    late: dict[int, int] = {}  # replica -> step count at which it processes its pending LeaderAndIsr
    emitted = produced = 0

    def emit(step: dict, burst: list) -> None:
        nonlocal emitted
        burst.append(step)
        emitted += 1
        shadow.apply(_parsed(step, assignment))
        shadow.errors.clear()  # an endless generator keeps no error history

    first: list[dict] = []
    emit({"elect": {}}, first)
    yield first
    while True:
        burst: list[dict] = []
        for rid, due in sorted(late.items()):
            if due <= emitted and shadow.replicas[rid].alive:
                emit({"leader_and_isr": {"replica": rid}}, burst)
                del late[rid]
        alive = [x for x in replicas if shadow.replicas[x].alive]
        dead = [x for x in replicas if not shadow.replicas[x].alive]
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
                late[back] = emitted + s.randint(1, 6)
            else:
                emit({"leader_and_isr": {"replica": back}}, burst)
        else:
            roll = w.random()
            if roll < r["fast_election"] and len(alive) > 1:
                hear_now = [x for x in alive if s.random() >= r["late_leader_and_isr"]]
                emit({"elect": {"to": hear_now}}, burst)
                for x in alive:
                    if x not in hear_now:
                        late[x] = emitted + s.randint(1, 6)
            elif roll < r["fast_election"] + r["shrink_isr"] and followers:
                emit({"shrink_isr": {"replica": f.choice(followers)}}, burst)
            elif config["hw_checkpoint"] == "explicit" and roll < r["fast_election"] + r["shrink_isr"] + r["checkpoint_hw"]:
                emit({"checkpoint_hw": {"replica": s.choice(alive)}}, burst)
            elif config["log_flush"] == "explicit" and w.random() < r["flush"]:
                emit({"flush": {"replica": s.choice(alive)}}, burst)
            elif w.random() < r["produce"] / (r["produce"] + r["fetch"]) or not followers:
                count = w.randint(1, 2)
                values = [f"v{produced + i}" for i in range(count)]
                produced += count
                emit({"produce": {"values": values} if count > 1 else {"value": values[0]}}, burst)
            else:
                fetch: dict[str, Any] = {"replica": s.choice(followers)}
                if f.random() < r["lost_response"]:
                    fetch["response"] = "lost"
                emit({"fetch": fetch}, burst)
        if emitted >= next_compaction:  # an endless stream: keep the shadow's logs and caches a window
            upto = shadow_compactable_offset(shadow)
            if upto - shadow.compacted_offset >= SHADOW_COMPACT_EVERY // 4:
                shadow.compact(upto)
            next_compaction = emitted + SHADOW_COMPACT_EVERY
        yield burst


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


def generate_scenario(seed: int, partition: int, profile: Profile) -> Scenario:
    return parse_scenario(generate_partition(seed, partition, profile), source=f"campaign {seed}/{profile.name}/{partition}")
