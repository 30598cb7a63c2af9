"""replemu's pure, deterministic core: Kafka partition replication as a state machine.

Standard library only: no pyspark, no YAML, no wall clock, no decision that depends on set or
dict-hash order.  A ``Partition`` is stepped with ``Step`` objects and reports effects; a
``Checker`` observes them; a ``Replay`` holds both; ``run_scenario`` builds the result.

``BUILD`` says which build runs: ``"compiled (mypyc)"`` or ``"pure Python"`` (``emulator._build``;
``BUILD_REASON`` says why pure Python runs where compiled modules are installed).
"""

from ._build import build_of, choose_build

# Before any other submodule is imported: stale compiled modules, or REPLEMU_PURE=1, mean the .py files.
BUILD_REASON = choose_build(__name__, __file__)

from . import run as _run  # noqa: E402
from .checker import Checker  # noqa: E402
from .config import Config, ConfigError, parse_config  # noqa: E402
from .follower import EmulatorBug  # noqa: E402
from .partition import Partition  # noqa: E402
from .result import RESULT_FORMAT, dumps  # noqa: E402
from .run import Replay, run_scenario  # noqa: E402
from .scenario import Scenario, ScenarioError, parse_scenario  # noqa: E402
from .step_table import StepError  # noqa: E402
from .steps import STEP_TABLE, Step, StepKind  # noqa: E402
from .variants import VARIANT_NAMES, VARIANTS, ProtocolVariant, variant_named  # noqa: E402

BUILD = build_of(_run)

__all__ = [
    "BUILD", "BUILD_REASON", "Checker", "Config", "ConfigError", "EmulatorBug", "Partition", "ProtocolVariant",
    "RESULT_FORMAT", "Replay", "STEP_TABLE", "Scenario", "ScenarioError", "Step", "StepError", "StepKind", "VARIANTS",
    "VARIANT_NAMES", "dumps", "parse_config", "parse_scenario", "run_scenario", "variant_named",
]
