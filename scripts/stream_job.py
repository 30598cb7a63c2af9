#!/usr/bin/env python3
"""spark-submit entry point for the streaming job (a cluster, or any master spark-submit knows).

    pip wheel --no-deps -w dist .
    spark-submit --master spark://HOST:7077 --py-files dist/replemu-0.1.0-py3-none-any.whl \\
        scripts/stream_job.py --input DIR --output DIR --checkpoint DIR --protocol kip320 --shuffle-partitions N

Arguments are those of ``replemu stream`` without ``--master``/``--remote``: the master and every
Spark setting come from spark-submit.  Input, output and checkpoint directories must be on
storage every executor and the driver can reach.  docs/cluster.md.
"""

import sys
from pathlib import Path

try:
    from replemu.cli import main  # the wheel given to --py-files (or an installed replemu)
except ImportError:  # run from a source tree without either
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from replemu.cli import main

if __name__ == "__main__":
    sys.exit(main(["stream", *sys.argv[1:]]))
