"""The replemu application: the command line, campaigns and shrinking, text reports, the
dashboard, and the bundled scenarios (``replemu/scenarios``, ``conf/scenarios`` in the source
tree; by name: ``replemu/bundled.py``).  The only package that knows all the others::

    replemu  ->  expectations  ->  streaming  ->  emulator
             ->  scenario_io   ------------------>  emulator

The public Python API (docs/api.md) is this package's top level: ``replemu.run``,
``replemu.explore`` and the rest of ``replemu.api.__all__``; ``__version__`` is its semantic
version.  Every other module is private by convention.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

# The submodules ``replemu.explore`` and ``replemu.campaign`` share their names with the API's
# functions.  Importing a submodule sets it as an attribute of the package the first time it is
# loaded, so they are loaded here, before the functions are bound: later imports find them in
# sys.modules and leave ``replemu.explore`` the function.
from . import campaign as _campaign_module  # noqa: F401
from . import explore as _explore_module  # noqa: F401
from .api import (  # noqa: F401  (the public API)
    OPERATORS,
    VARIANTS,
    Expectations,
    Scenario,
    ScenarioError,
    bundled_scenarios,
    campaign,
    events_frame,
    explore,
    final_logs,
    load_scenario,
    replicate,
    run,
    scenario,
    spark_session,
    split_kinds,
    trace_frame,
)

try:
    __version__ = _version("replemu")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.1.0"
