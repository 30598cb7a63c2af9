"""replemu's public Python API: the core without the command line (docs/api.md).

Everything here is re-exported by ``replemu`` itself (``import replemu; replemu.run(...)``) and
follows the package's semantic version (``replemu.__version__``); every other module is private
by convention.  Each function returns what the matching ``--json`` command prints: the result
object of ``replemu run``, the search of ``replemu explore``, the campaign of ``replemu campaign``
(docs/scenario-format.md).

Bad input raises ``ScenarioError`` (a scenario) or ``ValueError`` (arguments), naming the file,
step or argument, as the CLI's messages do.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Mapping

from emulator.explore import Bounds, Reduction
from emulator.families import family_of_document, family_of_scenario
from emulator.quorum.run import QuorumScenario
from emulator.scenario import Scenario, ScenarioError
from emulator.variants import VARIANT_NAMES
from streaming.operators import OPERATOR_NAMES

__all__ = ["OPERATORS", "VARIANTS", "Expectations", "Scenario", "ScenarioError", "bundled_scenarios", "campaign", "events_frame",
           "explore", "final_logs", "load_scenario", "replicate", "run", "scenario", "spark_session", "split_kinds",
           "trace_frame"]

VARIANTS: tuple[str, ...] = tuple(VARIANT_NAMES)  # the protocol variants, oldest first
OPERATORS: tuple[str, ...] = tuple(OPERATOR_NAMES)  # Spark's stateful operators for replicate, the default first


def load_scenario(path: str | Path) -> Scenario | QuorumScenario:
    """A scenario file (the YAML contract, docs/scenario-format.md), validated; a file that names
    ``voters`` is a metadata-quorum scenario (docs/quorum.md).  ``path`` may be a bundled
    scenario's name (``bundled_scenarios()``; an existing file of the same name wins); one that is
    neither raises ``ScenarioError`` naming it and the closest names."""
    from scenario_io.yaml_files import load_any_scenario

    from .bundled import API_LISTING, resolve_scenario

    return load_any_scenario(resolve_scenario(path, API_LISTING))


def bundled_scenarios() -> list[dict[str, str]]:
    """The scenarios shipped with replemu, which every function taking a scenario path accepts by
    name: ``name``, ``family`` (``partition``, or ``quorum`` for metadata-quorum ones),
    ``description`` and ``path`` of each, as ``replemu scenarios --json`` prints them."""
    from .bundled import bundled_scenarios as listing

    return listing()


def scenario(document: Mapping[str, Any], source: str = "<scenario>") -> Scenario | QuorumScenario:
    """A scenario built in code from the same document a YAML file holds (``name``,
    ``replicas``, ``config``, ``steps``, ``expect``; or ``voters`` and quorum steps), validated;
    errors name ``source``."""
    return family_of_document(document).parse_scenario(dict(document), source=source)


def run(scenario: Scenario | QuorumScenario | str | Path, protocol: str | None = None,
        knobs: Mapping[str, Any] | None = None, trace: bool = False) -> dict[str, Any]:
    """Replay ``scenario`` (a scenario, a path or a bundled scenario's name) under ``protocol`` (default ``kip320``, for a
    metadata-quorum scenario ``kraft853``) with ``knobs``: the result object of ``replemu run
    --json`` (with ``trace``: one entry per step, as ``--trace``)."""
    if isinstance(scenario, (str, Path)):
        scenario = load_scenario(scenario)
    family = family_of_scenario(scenario)
    protocol = protocol or family.default_protocol
    if protocol not in family.variant_names():
        raise ValueError(f"unknown {family.qualifier}protocol {protocol!r} (known: {', '.join(family.variant_names())})")
    result = family.run(scenario, protocol, trace=trace, knobs=dict(knobs or {}))
    if not trace:
        result.pop("trace", None)
    return result


def trace_frame(result: Mapping[str, Any]):
    """A result's trace as a pandas DataFrame: one row per step and replica, with the step's
    description, the controller's leader, epoch and ISR, and the replica's role, leader epoch,
    LEO, HW and whether it is alive (``run(..., trace=True)``)."""
    import pandas as pd

    if "trace" not in result:
        raise ValueError("the result has no trace: run it with trace=True")
    rows = []
    for entry in result["trace"]:
        c = entry["controller"]
        for rid, r in sorted(entry["replicas"].items(), key=lambda kv: int(kv[0])):
            rows.append({"step": entry["step"], "description": entry["description"], "replica": int(rid),
                         "alive": r["alive"], "role": r["role"], "leader_epoch": r["leader_epoch"], "leo": r["leo"],
                         "hw": r["hw"], "controller_leader": c["leader"], "controller_epoch": c["epoch"],
                         "isr": list(c["isr"])})
    frame = pd.DataFrame(rows, columns=["step", "description", "replica", "alive", "role", "leader_epoch", "leo", "hw",
                                        "controller_leader", "controller_epoch", "isr"])
    return frame.astype({"controller_leader": "Int64"})  # no leader: <NA>, not a float


def final_logs(result: Mapping[str, Any]) -> dict[int, list[tuple[int, int, str]]]:
    """Each replica's log at the end of a run: ``(offset, leader epoch, value)`` per record."""
    return {int(rid): [tuple(rec) for rec in r["log"]] for rid, r in sorted(result["final"]["replicas"].items(),
                                                                             key=lambda kv: int(kv[0]))}


def explore(protocol: str = "kip320", replicas: int = 2, depth: int = 8, records: int = 2, epochs: int = 2,
            crashes: int = 1, power_crashes: int = 0, reduce: str = "none", config: Mapping[str, Any] | None = None,
            knobs: Mapping[str, Any] | None = None, out: str | Path = "out/explore", workers: int = 1,
            max_seconds: float | None = None, progress=None) -> dict[str, Any]:
    """``replemu explore`` on the local engine: every interleaving up to ``depth``, breadth-first;
    returns the object ``--json`` prints (``exhausted``, ``diameter``, ``violations`` with their
    shortest paths and scenario files under ``out``...).  Resumes a search stopped in ``out``.
    ``progress``: a text stream for the per-depth lines (default: none)."""
    from emulator.config import parse_config
    from emulator.explore import DEFAULT_ALPHABET
    from replemu.explore import explore as search
    from replemu.explore import partition_request as Request

    if protocol not in VARIANTS:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(VARIANTS)})")
    cfg = parse_config(dict(config or {}), replicas)
    req = Request([protocol], replicas, Bounds(depth, records, epochs, crashes, power_crashes), cfg, dict(knobs or {}),
                  DEFAULT_ALPHABET, "local", Path(out), max_seconds=max_seconds, workers=workers, reduce=Reduction.parse(reduce))
    return search(req, out=progress if progress is not None else io.StringIO())[0]


def campaign(seed: int = 1, profile: str = "hard", partitions: int = 100, protocols: tuple[str, ...] = VARIANTS,
             out: str | Path = "out/campaign") -> dict[str, Any]:
    """``replemu campaign`` in this process (no Spark): ``partitions`` generated scenarios from
    ``seed`` with a workload profile (``conf/workloads.yaml``: clean, hard, unclean, kraft) under
    each protocol; returns the object ``--json`` prints.  ``ValueError`` names an unknown profile."""
    from replemu.campaign import run_campaign

    try:
        return run_campaign(seed, profile, partitions, list(protocols), out, progress=False)
    except KeyError as exc:  # an unknown profile
        raise ValueError(exc.args[0]) from None


# -- Spark: DataFrame in, DataFrame out ----------------------------------------------------------

def spark_session(master: str | None = None, conf_path: str | Path | None = None, app_name: str = "replemu"):
    """A SparkSession with the project's settings (``conf/spark.conf``: shuffle partitions, Arrow,
    the Python workers on this interpreter); ``master`` defaults to ``local[*]``.  Any other
    session works with ``replicate`` too."""
    from streaming.session import build_spark

    return build_spark(master, conf_path, app_name)


def events_frame(spark, scenarios) -> Any:
    """The event rows of ``scenarios`` (``Scenario`` objects, paths or bundled names) as a batch DataFrame with
    the event columns (topic, partition, seq, type, args): what ``replemu compile`` writes.
    ``ValueError`` when two scenarios have the same partition key."""
    from streaming.events import duplicate_keys, scenario_rows
    from streaming.schemas import EVENT_SCHEMA

    loaded = [load_scenario(s) if isinstance(s, (str, Path)) else s for s in scenarios]
    clash = duplicate_keys(loaded)
    if clash:
        raise ValueError(clash)
    return spark.createDataFrame([row for s in loaded for row in scenario_rows(s)], EVENT_SCHEMA)


def replicate(events, protocol: str = "kip320", knobs: Mapping[str, Any] | None = None,
              gap_timeout_ms: int | None = None, operator: str | None = None) -> Any:
    """``replemu stream`` as one DataFrame transformation: every (topic, partition)'s events,
    applied in ``seq`` order under ``protocol`` with ``knobs``, as a DataFrame of output rows with a
    ``kind`` column (timeline, log, summary, violations, losses, errors, quarantine) and the union
    of every kind's columns.  ``events``: any batch or streaming DataFrame with the event columns;
    a streaming query keeps each partition's state in its checkpoint.  ``gap_timeout_ms``: under a
    processing-time trigger, report a missing ``seq`` after that long (None: never, which an
    available-now query needs to end).  ``operator``: Spark's stateful operator of a streaming query,
    ``applyInPandasWithState`` (None, the default) or ``transformWithState`` (the same rows; the
    session's state store must then be RocksDB: docs/api.md).  ``ValueError`` names a missing
    column, a protocol, a knob or an operator."""
    from streaming.pipeline import replicate as transform

    return transform(events, protocol, dict(knobs) if knobs else None, gap_timeout_ms, operator=operator)


def split_kinds(rows) -> dict[str, Any]:
    """One micro-batch of ``replicate``'s rows (Spark, pandas or Arrow) split by kind: kind -> pandas
    frame with that kind's columns, sorted as ``replemu stream`` writes them."""
    from streaming.sink import kind_frames

    return kind_frames(rows)


class Expectations:
    """The Great Expectations suites of ``replemu stream`` for your own micro-batches: one per
    stream (building it costs about a second); ``docs_dir``: where ``build_docs`` writes Data Docs."""

    def __init__(self, docs_dir: str | Path | None = None) -> None:
        from expectations.suites import BatchValidator

        self._validator = BatchValidator(docs_dir)

    def validate(self, rows, batch_id: int = 0) -> Any:
        """The suites on one micro-batch of ``replicate``'s rows: a pandas frame with one row per
        expectation (batch_id, invariant, expectation, frame, success, unexpected_count,
        partitions, docs)."""
        from expectations.suites import validate_rows

        return validate_rows(rows, batch_id, self._validator)

    def build_docs(self) -> Path | None:
        """(Re)build the Data Docs of every batch validated so far; the index page (None without ``docs_dir``)."""
        return self._validator.build_docs()
