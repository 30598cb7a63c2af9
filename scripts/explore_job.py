#!/usr/bin/env python3
"""spark-submit entry point for ``replemu explore --engine spark`` (a cluster, or any master
spark-submit knows).

    PYSPARK_PYTHON=/path/to/venv/bin/python spark-submit --master spark://HOST:7077 \\
        scripts/explore_job.py --protocol kip320 --replicas 3 --depth 9 --engine spark --out /shared/explore

Arguments are those of ``replemu explore`` without ``--master``: the master and every Spark
setting come from spark-submit.  ``--out`` must be a POSIX directory mounted at the same path on
the driver and every executor, and replemu installed in the executors' Python (docs/explore.md
"On a cluster").  spark-submit merges the driver's stderr into stdout: with ``--json`` the result
object is the end of the output.
"""

import sys
from pathlib import Path

try:
    from replemu.cli import main  # an installed replemu
except ImportError:  # run from a source tree
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from replemu.cli import main

if __name__ == "__main__":
    sys.exit(main(["explore", *sys.argv[1:]]))
