"""Reading a stream's outputs back as the contract's result objects (scenario-format.md §3).

Built only from the Parquet outputs (the latest partition summary holds the ``final`` state;
violations, losses and errors are the rows the stream emitted, in emission order), never by
re-running the core, so a streamed run and ``replemu run --json`` compare with any tool.
EventualConvergence is judged at the end of a run: a partition's latest summary carries the
judgement as of its last step, and it is reported at that step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emulator.run import RESULT_FORMAT


def _read(output_dir: Path, kind: str):
    import pandas as pd
    import pyarrow.dataset as ds

    path = output_dir / kind
    if not path.exists() or not any(path.iterdir()):
        return pd.DataFrame()
    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    return table.to_pandas()


class ResultsError(ValueError):
    pass


def read_results(output_dir: str | Path) -> list[dict[str, Any]]:
    output_dir = Path(output_dir)
    if not (output_dir / "run.json").exists():
        raise ResultsError(f"{output_dir}: not a replemu stream output directory (no run.json)")
    summary = _read(output_dir, "summary")
    if summary.empty:
        return []
    summary = summary.sort_values(["topic", "partition", "batch_id"], kind="stable")
    latest = summary.groupby(["topic", "partition"], sort=True).tail(1)
    # Each kind's rows grouped by partition once, in emission order (not filtered per partition).
    grouped: dict[str, dict[tuple[str, int], list[dict]]] = {}
    for kind in ("violations", "losses", "errors"):
        t = _read(output_dir, kind)
        grouped[kind] = {} if t.empty else {
            (str(topic), int(partition)): g.to_dict("records")
            for (topic, partition), g in t.sort_values(["topic", "partition", "seq", "idx"], kind="stable").groupby(
                ["topic", "partition"], sort=False)
        }

    def rows_of(kind: str, topic: str, partition: int):
        return grouped[kind].get((topic, partition), [])

    results = []
    for s in latest.to_dict("records"):
        topic, partition = s["topic"], int(s["partition"])
        violations = [{"invariant": r["invariant"], "step": int(r["at_step"]), "detail": r["detail"]} for r in rows_of("violations", topic, partition)]
        if isinstance(s["convergence"], str) and not any(v["invariant"] == "EventualConvergence" for v in violations):
            violations.append({"invariant": "EventualConvergence", "step": int(s["steps"]), "detail": s["convergence"]})
        results.append({
            "format": RESULT_FORMAT,
            "scenario": s["scenario"],
            "protocol": s["protocol"],
            "steps": int(s["steps"]),
            "final": json.loads(s["final"]),
            "violations": violations,
            "losses": [
                {"offset": int(r["offset"]), "value": r["value"], "acked": bool(r["acked"]), "allowed": bool(r["allowed"]), "step": int(r["at_step"])}
                for r in rows_of("losses", topic, partition)
            ],
            "errors": [{"step": int(r["at_step"]), "error": r["error"]} for r in rows_of("errors", topic, partition)],
        })
        if isinstance(s.get("compacted_prefix"), str):
            results[-1]["compacted_prefix"] = json.loads(s["compacted_prefix"])
    return results


def quarantine_rows(output_dir: str | Path) -> list[dict[str, Any]]:
    q = _read(Path(output_dir), "quarantine")
    if q.empty:
        return []
    q = q.sort_values(["batch_id", "topic", "partition", "seq", "idx"], kind="stable", na_position="first")
    return [{k: (None if v != v else v) for k, v in r.items()} for r in q.to_dict("records")]


def summary_text(output_dir: str | Path) -> str:
    results = read_results(output_dir)
    lines = [f"{len(results)} partitions in {output_dir}"]
    width = max([len(r["scenario"]) for r in results] + [8])
    for r in results:
        names = ", ".join(v["invariant"] for v in r["violations"]) or "no invariant violated"
        c = r["final"]["controller"]
        lost = len(r["losses"])
        lines.append(f"  {r['scenario']:<{width}}  {r['protocol']:<7} {r['steps']:>6} steps  leader {c['leader']} e{c['epoch']}  "
                     f"{names}{f'; {lost} lost' if lost else ''}")
    q = quarantine_rows(output_dir)
    lines.append(f"{len(q)} quarantined rows" + (":" if q else ""))
    for row in q[:20]:
        lines.append(f"  batch {row['batch_id']} {row['topic']}/{row['partition']} seq {row['seq']}: {row['reason']}")
    return "\n".join(lines)
