"""replemu's pure, deterministic core: Kafka partition replication as a state machine.

No pyspark, no wall clock, no decision that depends on set or dict-hash order.
"""

from .partition import EmulatorBug, Partition
from .run import run_scenario
from .scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from .variants import VARIANT_NAMES, VARIANTS, ProtocolVariant

__all__ = [
    "EmulatorBug", "Partition", "ProtocolVariant", "Scenario", "ScenarioError", "VARIANTS",
    "VARIANT_NAMES", "load_scenario", "parse_scenario", "run_scenario",
]
