"""The stateful operators a stream can run its state function under: one table (``STATEFUL_OPERATORS``)
that the command line's ``--operator`` choices, the checkpoint's identity, the pipeline and the docs read.

Both run the same per-partition work (``streaming.processor.process_batch``: events in, output rows
and the state row out) behind ``groupBy(topic, partition)``; they differ in how Spark hands a group's
rows and state to Python:

* ``applyInPandasWithState`` (the default): pandas frames per group, the state as one ``GroupState``
  row (``STATE_SCHEMA``), a gap's wait as a processing-time timeout. HDFS-backed or RocksDB store.
* ``transformWithState`` (Spark's arbitrary state API v2, pyspark >= 4.1, its ``Row`` form): rows per
  group, the same state row as one ``ValueState`` named ``TWS_STATE_VAR``, a gap's wait as a
  processing-time timer. Spark runs it only on the RocksDB state store; replemu turns on its
  changelog checkpointing (``ROCKSDB_CHANGELOG_CONF``) for it.

The operator is fixed for a checkpoint's life (``streaming.checkpoint.IDENTITY_FIELDS``): the two
keep their state under different layouts, and neither can read the other's.  No pyspark import here:
``replemu --help`` reads this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StatefulOperator:
    name: str
    api: str  # which of Spark's APIs
    hands: str  # how Spark hands a group's rows to Python
    state: str  # how the state row is kept
    wait: str  # what a gap's wait (--gap-timeout-ms) is
    state_stores: tuple[str, ...]  # the state store providers (streaming.job.STATE_STORES) it runs on
    query_conf: tuple[tuple[str, str], ...] = ()  # Spark settings its queries start with

    @property
    def doc(self) -> str:
        """One line: ``replemu stream --help``'s words for it."""
        stores = " or ".join(self.state_stores)
        return f"{self.api}: {self.hands}, the state as {self.state}, a gap's wait as {self.wait}; {stores} state store"


ROCKSDB_CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
TWS_STATE_VAR = "partitionState"  # the transformWithState operator's one ValueState (statestore's stateVarName)

STATEFUL_OPERATORS: tuple[StatefulOperator, ...] = (
    StatefulOperator("applyInPandasWithState", "Spark's arbitrary state API v1, its pandas form (the default)", "pandas frames",
                     "one GroupState row (STATE_SCHEMA)", "a processing-time timeout", ("hdfs", "rocksdb")),
    StatefulOperator("transformWithState", "Spark's arbitrary state API v2 (pyspark >= 4.1), its Row form",
                     "Row objects",
                     f"the same row as one ValueState named {TWS_STATE_VAR}", "a processing-time timer", ("rocksdb",),
                     ((ROCKSDB_CHANGELOG_CONF, "true"),)),
)
OPERATOR_NAMES = tuple(o.name for o in STATEFUL_OPERATORS)
DEFAULT_OPERATOR = OPERATOR_NAMES[0]


def operator_named(name: str | None) -> StatefulOperator:
    """The operator called ``name`` (None: the default); ``ValueError`` names the known ones."""
    for o in STATEFUL_OPERATORS:
        if o.name == (name or DEFAULT_OPERATOR):
            return o
    raise ValueError(f"unknown stateful operator {str(name)[:80]!r} (known: {', '.join(OPERATOR_NAMES)})")


def state_store_for(operator: str | None, state_store: str | None) -> str | None:
    """The state store a query of ``operator`` runs on, given ``--state-store`` (None: Spark's
    default, or the operator's only one); ``ValueError`` when the operator cannot run on it."""
    o = operator_named(operator)
    if state_store is None:
        return None if "hdfs" in o.state_stores else o.state_stores[0]
    if state_store not in o.state_stores:
        raise ValueError(f"--operator {o.name} runs only on the {' or '.join(o.state_stores)} state store, "
                         f"not --state-store {state_store}")
    return state_store


def operators_markdown() -> str:
    """The table of docs/streaming.md between ``<!-- operators:begin -->`` and ``<!-- operators:end -->``."""
    lines = ["| `--operator` | Spark's API | how Spark hands a group to Python | the state | a gap's wait (`--gap-timeout-ms`) "
             "| state store (`--state-store`) | Spark settings it starts with |", "|---|---|---|---|---|---|---|"]
    for o in STATEFUL_OPERATORS:
        conf = ", ".join(f"`{k}={v}`" for k, v in o.query_conf) or "none"
        lines.append(f"| `{o.name}` | {o.api} | {o.hands} | {o.state} | {o.wait} | {', '.join(f'`{x}`' for x in o.state_stores)} "
                     f"| {conf} |")
    return "\n".join(lines) + "\n"
