#!/usr/bin/env python3
"""spark-submit entry point for the streaming job (a cluster, or any master spark-submit knows).

    python -m zipfile -c replemu.zip emulator scenario_io streaming expectations replemu
    spark-submit --master spark://HOST:7077 --py-files replemu.zip scripts/stream_job.py \\
        --input DIR --output DIR --checkpoint DIR --protocol kip320

Arguments are those of ``replemu stream``; the master comes from spark-submit. Input, output
and checkpoint directories must be on storage every executor and the driver can reach.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replemu.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["stream", *sys.argv[1:]]))
