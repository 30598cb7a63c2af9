"""Many generated partitions through the job at once (the Spark engine of campaigns): scenario
documents become event files, streamed per variant, read back as contract results."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from emulator.scenario import parse_scenario

from .events import scenario_rows, write_event_files
from .job import run_stream
from .results import read_results
from .session import build_spark


def stream_scenarios(scenarios_data: list[dict], protocols: list[str], work_dir: Path, spark=None,
                     progress: bool | None = None, batches: int = 4) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Stream every scenario document through the job (``batches`` micro-batches per variant);
    returns, per variant, ``(index in scenarios_data, result)`` in index order."""
    if work_dir.exists():
        shutil.rmtree(work_dir)
    rows = [scenario_rows(parse_scenario(d)) for d in scenarios_data]
    write_event_files(rows, work_dir / "events", split=batches)
    index = {d["name"]: k for k, d in enumerate(scenarios_data)}
    own = spark is None
    spark = spark or build_spark()
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    try:
        for protocol in protocols:
            show = sys.stderr.isatty() if progress is None else progress
            if show:
                print(f"{protocol}: streaming {len(scenarios_data)} partitions in {batches} micro-batches", file=sys.stderr, flush=True)
            run_stream(work_dir / "events", work_dir / protocol, work_dir / f"checkpoint-{protocol}", protocol,
                       max_files_per_trigger=1, spark=spark, quiet=not show, out=sys.stderr)
            out[protocol] = sorted(((index[r["scenario"]], r) for r in read_results(work_dir / protocol)), key=lambda kr: kr[0])
    finally:
        if own:
            spark.stop()
    return out
