"""A third protocol family, built in tests/ on the frame (docs/architecture.md): a register that
clients write on one server and servers copy to each other.  ``toy-volatile`` loses a server's
register in a crash, ``toy-durable`` keeps it (knob ``durable``); the one invariant,
``AckedWriteKept``, says the newest acknowledged write is on some server.  So a write, then a
crash of the server that took it, breaks it under ``toy-volatile`` and never under ``toy-durable``.

It is a family as the partition and quorum families are: a step table, a variant table, a
scenario document (a file that names ``toy``), a run, a campaign's cases, a search space and the
stream's hooks.  ``tests/test_family_toy.py`` registers it (``emulator.families.register``) and
runs it through ``replemu run``, ``campaign``, ``explore`` and the stream.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from emulator.family import Family, StreamRowError, StreamRows
from emulator.search import SearchSpace
from emulator.search_command import Counterexample, SearchOption, counterexample_name
from emulator.step_table import (
    Arg,
    ArgType,
    ScenarioError,
    StepError,
    StepRefused,
    StepSpec,
    StepTable,
)
from emulator.variant_table import Knob, KnobTable, Variant, VariantTable

INVARIANT = "AckedWriteKept"


# -- steps and variants ------------------------------------------------------------------------------

class ToyKind(str, Enum):
    WRITE = "write"
    COPY = "copy"
    CRASH = "crash"


@dataclass(frozen=True)
class Write:
    server: int
    value: str
    kind = ToyKind.WRITE


@dataclass(frozen=True)
class Copy:
    source: int
    destination: int
    kind = ToyKind.COPY


@dataclass(frozen=True)
class Crash:
    server: int
    kind = ToyKind.CRASH


_SERVER = Arg("server", ArgType.REPLICA, required=True, doc="the server")
STEPS = StepTable(ToyKind, (
    StepSpec(ToyKind.WRITE, Write, (_SERVER, Arg("value", ArgType.STRING, required=True)), "A client writes; the server acks."),
    StepSpec(ToyKind.COPY, Copy, (Arg("source", ArgType.REPLICA, required=True),
                                  Arg("destination", ArgType.REPLICA, required=True)), "A server copies another's register."),
    StepSpec(ToyKind.CRASH, Crash, (_SERVER,), "The server restarts; volatile, its register is gone."),
), "toy step type", "## Toy scenarios")

KNOBS = KnobTable((Knob("durable", (False, True), "a crash keeps the register", "tests/toy_family.py"),),
                  "toy knob", "known: durable")


@dataclass(frozen=True)  # no slots: an interpreted subclass of the compiled Variant keeps its fields in __dict__
class ToyVariant(Variant):
    durable: bool

    def knob_table(self) -> KnobTable:
        return KNOBS


VARIANTS = VariantTable(KNOBS, (ToyVariant("toy-volatile", False), ToyVariant("toy-durable", True)), "toy protocol")


# -- the model -------------------------------------------------------------------------------------------

@dataclass
class Register:
    variant: Any
    values: dict[int, str | None]
    acked: str | None = None
    broken: set[str] = field(default_factory=set)

    def apply(self, step: Any) -> list[tuple[str, str]]:
        """Apply one step: the invariants it broke (``StepRefused``: nothing to copy)."""
        if isinstance(step, Write):
            self.values[step.server], self.acked = step.value, step.value
        elif isinstance(step, Copy):
            if self.values[step.source] is None:
                raise StepRefused(f"server {step.source} holds nothing to copy")
            self.values[step.destination] = self.values[step.source]
        elif not self.variant.durable:
            self.values[step.server] = None
        if self.acked is not None and self.acked not in self.values.values():
            return [(INVARIANT, f"the acked write {self.acked!r} is on no server")]
        return []


@dataclass(frozen=True)
class ToyScenario:
    name: str
    servers: tuple[int, ...]
    steps: tuple[Any, ...]
    knobs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    expect: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"


@dataclass(frozen=True)
class ToySpace(SearchSpace):
    """Searched: servers, a variant, at most ``writes`` writes and ``crashes`` crashes, ``depth`` actions.
    A state: (registers, acked, writes, crashes)."""

    servers: tuple[int, ...]
    variant: Any
    bound: int
    writes: int
    crashes: int

    def depth(self) -> int:
        return self.bound

    def root_state(self) -> tuple[Any, list[str]]:
        return (tuple(None for _ in self.servers), None, 0, 0), []

    def restore(self, t: tuple, context: Any) -> Any:
        return t

    def canonical(self, state: Any) -> tuple:
        return state

    def actions(self, state: Any) -> list[str]:
        values, _, writes, crashes = state
        codes = [f"W{s}" for s in self.servers if writes < self.writes]
        codes += [f"X{s}" for s in self.servers if crashes < self.crashes]
        codes += [f"C{a}{b}" for i, a in enumerate(self.servers) for b in self.servers if a != b and values[i] is not None]
        return sorted(codes)

    def step_of(self, state: Any, code: str) -> Any:
        ids = [int(c) for c in code[1:]]
        return {"W": lambda: Write(ids[0], f"v{state[2] + 1}"), "X": lambda: Crash(ids[0]),
                "C": lambda: Copy(ids[0], ids[1])}[code[0]]()

    def take(self, state: Any, code: str) -> tuple[Any, set[str]] | None:
        step = self.step_of(state, code)
        model = Register(self.variant, dict(zip(self.servers, state[0])), state[1])
        broken = {name for name, _ in model.apply(step)}
        return (tuple(model.values[s] for s in self.servers), model.acked, state[2] + isinstance(step, Write),
                state[3] + isinstance(step, Crash)), broken

    def order(self) -> dict[str, int]:
        return {INVARIANT: 0}

    def step_names(self) -> list[str]:
        return list(STEPS.kinds)

    def identity(self) -> dict[str, Any]:
        return {"family": "toy", "servers": list(self.servers), "protocol": self.variant.name, "writes": self.writes,
                "crashes": self.crashes}


# -- the family --------------------------------------------------------------------------------------

class ToyFamily(Family):
    def __init__(self) -> None:
        super().__init__("toy", "toy", "tests/toy_family.py", STEPS, VARIANTS)
        self.default_protocol, self.campaign_walk, self.campaign_unit = "toy-volatile", "toy", "scenario"
        self.cases_per_protocol, self.replica_dirs, self.max_table_steps = False, False, 1000
        self.search_owner, self.search_kind = "toy protocols", "a toy protocol"
        self.stream_header_type = "toy"

    def init_args(self) -> tuple[Any, ...]:
        return ()  # (its constructor takes none: how Spark's workers build it again)

    # invariants, scenarios (the variants and steps are the tables')
    def invariant_names(self) -> tuple[str, ...]:
        return (INVARIANT,)

    def is_document(self, data: Any) -> bool:
        return isinstance(data, dict) and "toy" in data

    def parse_scenario(self, data: Any, source: str = "<memory>") -> Any:
        servers = tuple(data.get("toy") or ())
        if not servers or not all(isinstance(s, int) for s in servers):
            raise ScenarioError(f"{source}: 'toy' must be a non-empty list of server ids")
        steps = []
        for number, raw in enumerate(data.get("steps") or (), 1):
            (kind, args), = raw.items()
            try:
                steps.append(STEPS.parse(kind, args, servers))
            except StepError as e:
                raise ScenarioError(f"{source}: step {number} ({kind}): {e}") from None
        return ToyScenario(data["name"], servers, tuple(steps), dict(data.get("knobs") or {}),
                           data.get("description", ""), dict(data.get("expect") or {}), source)

    # run / campaign / shrink
    def run(self, scenario: Any, protocol: str, trace: bool = False, knobs: dict[str, Any] | None = None,
            refusal_as_result: bool = False, progress: Any = None, prepare: Any = None,
            trace_logs: bool = True) -> dict[str, Any]:
        model = Register(self.variant(protocol, {**scenario.knobs, **(knobs or {})}), dict.fromkeys(scenario.servers))
        violations, rows = [], []
        for number, step in enumerate(scenario.steps, 1):
            try:
                found = model.apply(step)
            except StepRefused as e:
                raise StepRefused(f"{scenario.source}: step {number} ({STEPS.describe(step)}): refused under {protocol}: {e}") from None
            for name, detail in found:
                if name not in model.broken:
                    model.broken.add(name)
                    violations.append({"invariant": name, "step": number, "detail": detail})
            if trace:
                rows.append({"step": number, "description": STEPS.describe(step), "state": self.final(model)})
        result = {"scenario": scenario.name, "family": "toy", "protocol": protocol, "knobs": None,
                  "steps": len(scenario.steps), "final": self.final(model), "violations": violations, "errors": []}
        return {**result, "trace": rows} if trace else result

    @staticmethod
    def final(model: Register) -> dict[str, Any]:
        return {"acked": model.acked, "servers": {str(s): v for s, v in sorted(model.values.items())}}

    def step_table(self, result: dict[str, Any]) -> str:
        return "\n".join(f"{r['step']:>3}  {r['description']:<16} {r['state']['servers']}" for r in result["trace"])

    def final_logs(self, result: dict[str, Any]) -> str:
        return "  ".join(f"{s}: {v}" for s, v in result["final"]["servers"].items())

    def verdict(self, result: dict[str, Any]) -> str:
        return ", ".join(v["invariant"] for v in result["violations"]) or "no violation"

    def check_expectation(self, result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
        want, got = sorted((expect or {}).get("violations", [])), sorted(v["invariant"] for v in result["violations"])
        return [] if want == got else [f"violations: expected {want}, got {got}"]

    def is_scenario(self, scenario: Any) -> bool:
        return isinstance(scenario, ToyScenario)

    def document(self, scenario: Any, description: str | None = None, expect: dict | None = None) -> dict[str, Any]:
        doc = {"name": scenario.name, "description": scenario.description if description is None else description,
               "toy": list(scenario.servers), "steps": [STEPS.to_dict(s) for s in scenario.steps]}
        return {**doc, **({"knobs": dict(scenario.knobs)} if scenario.knobs else {}), **({"expect": expect} if expect else {})}

    def with_knobs(self, scenario: Any, knobs: dict[str, Any]) -> Any:
        return replace(scenario, knobs={**scenario.knobs, **knobs})

    def describe_campaign(self, seed: int, profile: Any, cases: int, protocols: list[str], engine: str,
                          knobs: dict[str, Any] | None) -> list[str]:
        return [f"replemu campaign: seed {seed}, {cases} toy scenarios of 6 steps, protocols {','.join(protocols)}"]

    def generate_case(self, seed: int, k: int, profile: Any, protocol: str | None,
                      knobs: dict[str, Any] | None) -> dict[str, Any]:
        rng = random.Random(f"toy/{seed}/{k}")  # one seed, everything derived from it
        steps = [{"write": {"server": rng.choice((1, 2)), "value": f"v{i}"}} if rng.random() < 0.6 else
                 {"crash": {"server": rng.choice((1, 2))}} for i in range(6)]
        return {"name": f"toy-{seed}-{k}", "description": "", "toy": [1, 2], "steps": steps,
                **({"knobs": dict(knobs)} if knobs else {})}

    # search (explore)
    def search_options(self) -> tuple[SearchOption, ...]:
        return (SearchOption("depth", required=True), SearchOption("replicas", default=2),
                SearchOption("records", default=1), SearchOption("crashes", default=1))

    def search_spaces(self, protocols: list[str], knobs: dict[str, Any],
                      options: dict[str, Any]) -> tuple[list[SearchSpace], frozenset[str]]:
        servers = tuple(range(1, options["replicas"] + 1))
        return [ToySpace(servers, self.variant(p, knobs), options["depth"], options["records"], options["crashes"])
                for p in protocols], frozenset()

    def describe_search(self, space: Any) -> tuple[str, str]:
        return f"servers {len(space.servers)}, depth {space.bound}, writes {space.writes}, crashes {space.crashes}", ""

    def search_result(self, space: Any) -> dict[str, Any]:
        return {"protocol": space.variant.name, "bounds": {"depth": space.bound, "writes": space.writes, "crashes": space.crashes}}

    def counterexample(self, space: Any, invariant: str, depth: int, path: str, knobs: dict[str, Any]) -> Counterexample:
        state, steps = space.root_state()[0], []
        for code in path.split():
            steps.append(space.step_of(state, code))
            state = space.take(state, code)[0]
        scenario = ToyScenario(counterexample_name(space.variant.name, invariant), space.servers, tuple(steps))
        return Counterexample(self.document(scenario, f"{invariant} in {depth} steps",
                                            {space.variant.name: {"violations": [invariant]}}))

    # stream
    def stream_misplaced_header(self, seq: int, kind: Any, protocol: str) -> str:
        return f"seq {seq}: the toy header must be seq 0 with type 'toy'"

    def stream_headerless(self, seq: int) -> str:
        return f"seq {seq}: no valid toy header (seq 0)"

    def parse_stream_header(self, args_json: str) -> tuple[str, Any]:
        args = json.loads(args_json)
        return args["scenario"], tuple(args["servers"])

    def stream_model(self, header: Any, variant: Any, knobs: dict[str, Any] | None) -> Any:
        return Register(variant, dict.fromkeys(header))

    def stream_step_ids(self, model: Any) -> tuple[int, ...]:
        return tuple(model.values)

    def parse_stream_step(self, where: str, seq: int, kind: Any, args_json: str, ids: tuple[int, ...]) -> tuple[Any, str]:
        try:
            step = STEPS.parse(kind, json.loads(args_json), ids)
        except StepError as e:
            raise StreamRowError(f"{where} seq {seq} ({kind}): {e}") from None
        return step, STEPS.describe(step)

    def stream_apply(self, model: Any, step: Any, seq: int, description: str, rows: StreamRows) -> None:
        try:
            found = model.apply(step)
        except StepRefused as e:
            raise StreamRowError(f"seq {seq} ({description}): refused under {model.variant.name}: {e}") from None
        for i, (sid, value) in enumerate(sorted(model.values.items())):
            rows.timeline.append((seq, i, description, sid, "holder" if value else "empty", True, None, 0,
                                  0 if value is None else 1, 0, None, "[]", None, 0, "[]"))
        for name, detail in found:
            if name not in model.broken:
                model.broken.add(name)
                rows.violations.append((seq, name, detail))

    def stream_verdicts(self, model: Any) -> tuple[int | None, int, tuple[str, ...]]:
        return None, 0, tuple(sorted(model.broken))

    def stream_summary(self, model: Any, steps: int) -> dict[str, Any]:
        violated = ",".join(sorted(model.broken))
        return {"protocol": model.variant.name, "steps": steps, "leader": None, "controller_epoch": 0, "isr": "[]",
                "min_hw": 0, "max_hw": 0, "violations_so_far": len(model.broken), "violated": violated,
                "final_findings": "[]", "knobs": None, "compacted_prefix": None,
                "final": json.dumps(self.final(model), separators=(",", ":"))}

    def stream_document(self, model: Any) -> dict[str, Any]:
        return {"protocol": model.variant.name, "durable": model.variant.durable, "acked": model.acked,
                "values": [[s, v] for s, v in model.values.items()]}

    def stream_restore(self, document: Any, violated: str) -> Any:
        variant = VARIANTS.named(document["protocol"], {"durable": document["durable"]})
        return Register(variant, {s: v for s, v in document["values"]}, document["acked"],
                        {n for n in violated.split(",") if n})


TOY = ToyFamily()
