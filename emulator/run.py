"""Replaying a scenario: a partition stepped by steps, a checker observing it, one result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ._build import mypyc_attr
from .bounds import PROGRESS_EVERY
from .checker import Checker, Judging, input_values
from .config import Config
from .effects import Effect
from .kraft import REFUSED
from .partition import Partition
from .result import compacted_prefix, not_expressible_result, result_object, state_snapshot
from .scenario import Scenario
from .step_table import StepRefused
from .steps import STEP_TABLE, Step
from .variants import VARIANT_TABLE, ProtocolVariant


@dataclass(slots=True)
class StepReport:
    step: int
    errors: list[dict]
    events: list[dict]
    violations: list[dict]
    effects: list[Effect]


@dataclass
class Compaction:
    """What one compaction dropped from the state: the records below ``upto`` (identical on
    every replica) and, per replica, the epoch-cache entries no step can consult any more."""

    upto: int
    records: list[tuple[int, str]]  # (epoch, value) at offsets [upto - len(records), upto)
    cold_cache: dict[int, list[tuple[int, int]]]  # replica -> [(epoch, start_offset), ...]


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled too, Cls.__new__(Cls) then does not run __init__ (copies)
class Replay:
    """A partition and the checker that observes it: the unit every engine steps."""

    def __init__(self, replicas: tuple[int, ...], config: Config, variant: ProtocolVariant,
                 judging: Judging = Judging.INCREMENTAL, brokers: tuple[int, ...] = ()) -> None:
        self.partition = Partition(replicas, config, variant, brokers)
        self.checker = Checker(tuple(self.partition.replicas), judging)

    @classmethod
    def of(cls, partition: Partition, checker: Checker) -> "Replay":
        replay = Replay.__new__(Replay)  # (mypyc cannot compile cls.__new__(cls))
        replay.partition, replay.checker = partition, checker
        return replay

    def seed(self, effects: Iterable[Effect]) -> None:
        """Ghost state for replicas that start with data (imported logs): observed, never judged."""
        self.checker.observe_effects(self.partition, list(effects))
        self.checker.findings, self.checker.dirty_caches = {}, {}
        self.checker.unjudged_caches = set(self.partition.replicas)

    def apply(self, step: Step) -> StepReport:
        p, g = self.partition, self.checker
        before = input_values(p) if g.judging is Judging.VERIFY else None
        outcome = p.apply(step)
        violations = g.observe(p, outcome, before)
        return StepReport(outcome.step, outcome.errors, outcome.events, violations, outcome.effects)

    def forget_reported(self) -> None:
        """Drop the errors, violations and losses already handed out: a stream or a generator
        keeps no output history (a replay for ``run_scenario`` keeps them for its result)."""
        self.partition.errors.clear()
        self.checker.violations.clear()
        self.checker.losses.clear()

    def finish(self) -> list[dict]:
        return self.checker.finish(self.partition)

    def compact(self, min_records: int) -> Compaction | None:
        """Compact the unchangeable prefix into an offset and a digest once it holds at least
        ``min_records`` more records; returns what was dropped (None when nothing was).

        The ghost state that refers only to the prefix (acked records, reported losses,
        records committed twice) goes with it, and each epoch cache loses the entries no
        future step can consult (``cold_cache_entries``).  A later step that would reach below
        the compacted offset is clamped there and recorded as ``BELOW_COMPACTED_PREFIX``.
        """
        p = self.partition
        upto = self.checker.compactable_offset(p)
        if upto - p.compacted_offset < max(min_records, 1):
            return None
        self.checker.compact(upto)
        records, cold = p.compact(upto)
        return Compaction(upto, records, cold)

    def lowest_future_epoch(self) -> int:
        return self.partition.lowest_future_epoch()

    def knobs_in_force(self) -> dict[str, Any] | None:
        """Every knob, when the run's variant differs from its preset; None for a plain preset."""
        variant = self.partition.variant
        return variant.knobs() if VARIANT_TABLE.overrides(variant) else None

    def result(self, scenario_name: str) -> dict[str, Any]:
        p, g = self.partition, self.checker
        return result_object(scenario_name, p.variant.name, p.step_number, state_snapshot(p), g.violations, g.losses,
                             p.errors, compacted_prefix(p) if p.compacted_offset else None, self.knobs_in_force())


def effective_variant(protocol: str, config: Config, knobs: dict[str, Any] | None = None) -> ProtocolVariant:
    """The variant a run uses: the preset of ``protocol``, then the partition's ``config.knobs``,
    then the run's own ``knobs`` (``--knob``), which win."""
    return VARIANT_TABLE.named(protocol).with_knobs(dict(config.knobs)).with_knobs(knobs or {})


def run_scenario(scenario: Scenario, protocol: str, trace: bool = False, prepare=None,
                 knobs: dict[str, Any] | None = None, judging: Judging = Judging.INCREMENTAL,
                 refusal_as_result: bool = False, trace_logs: bool = True, progress=None) -> dict[str, Any]:
    """Replay every step of ``scenario`` under ``protocol`` (plus knobs); return the result object.

    ``trace``: the result has a ``trace`` (every step's outcome and state); ``trace_logs=False``
    leaves the replicas' logs out of its states (what a step table needs: its memory grows with
    the steps, not with the steps times the logs).  ``progress(steps_done, steps)``, when given,
    is called every ``PROGRESS_EVERY`` steps.

    Raises ``StepRefused`` (the file, the step, why) at a step the variant's controller cannot
    take (``kraft.REFUSED``): no verdict comes from such a step.  With ``refusal_as_result`` the
    variant's answer is instead the result ``not_expressible_result`` builds (no verdict, no final
    state: ``replemu run --protocol all`` reports it beside the other variants' verdicts).

    ``prepare(replay)``, when given, loads initial replica state (Kafka replica directories,
    see ``scenario_io.kafka_logs.seed_replay``) before the first step.
    """
    variant = effective_variant(protocol, scenario.config, knobs)
    replay = Replay(scenario.replicas, scenario.config, variant, judging, scenario.brokers)
    if prepare is not None:
        prepare(replay)
    steps_trace = []
    total = len(scenario.steps)
    for done, step in enumerate(scenario.steps, start=1):
        report = replay.apply(step)
        if progress is not None and done % PROGRESS_EVERY == 0 and done < total:
            progress(done, total)
        if any(e["error"] == REFUSED for e in report.errors):
            reason = next((e.get("reason") for e in report.events if e["event"] == "StepRefused"), "")
            if refusal_as_result:
                return not_expressible_result(scenario.name, variant.name, report.step, STEP_TABLE.describe(step), str(reason or ""))
            raise StepRefused(f"{scenario.source}: step {report.step} ({STEP_TABLE.describe(step)}): "
                              f"not a step the {variant.name} controller can take: {reason}")
        if trace:
            steps_trace.append({
                "step": report.step,
                "event": STEP_TABLE.to_dict(step),
                "description": STEP_TABLE.describe(step),
                "outcome": {"errors": report.errors, "events": report.events, "violations": report.violations},
                **state_snapshot(replay.partition, with_logs=trace_logs),
            })
    final_violations = replay.finish()
    if trace and steps_trace:
        steps_trace[-1]["outcome"]["violations"] = steps_trace[-1]["outcome"]["violations"] + final_violations
    result = replay.result(scenario.name)
    if trace:
        result["trace"] = steps_trace
    return result
