"""replemu's pure, deterministic core: Kafka partition replication as a state machine.

Standard library only: no pyspark, no YAML, no wall clock, no decision that depends on set or
dict-hash order.  A ``Partition`` is stepped with ``Step`` objects and reports effects; a
``Checker`` observes them; a ``Replay`` holds both; ``run_scenario`` builds the result.
"""

from .checker import Checker
from .config import Config, ConfigError, parse_config
from .follower import EmulatorBug
from .partition import Partition
from .result import RESULT_FORMAT, dumps
from .run import Replay, run_scenario
from .scenario import Scenario, ScenarioError, parse_scenario
from .steps import STEP_TABLE, Step, StepError, StepKind
from .variants import VARIANT_NAMES, VARIANTS, ProtocolVariant, variant_named

__all__ = [
    "Checker", "Config", "ConfigError", "EmulatorBug", "Partition", "ProtocolVariant", "RESULT_FORMAT", "Replay",
    "STEP_TABLE", "Scenario", "ScenarioError", "Step", "StepError", "StepKind", "VARIANTS", "VARIANT_NAMES", "dumps",
    "parse_config", "parse_scenario", "run_scenario", "variant_named",
]
