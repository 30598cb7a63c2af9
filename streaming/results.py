"""Reading a stream's outputs back as the contract's result objects (scenario-format.md §3).

Built only from the Parquet outputs, never by re-running the core, so a streamed run and
``replemu run --json`` compare with any tool: the latest partition summary holds the ``final``
state without logs; every log is rebuilt by replaying the ``log`` rows (each appended record and
each truncation, in order), and the epoch-cache entries compaction moved out of the state come
back from ``epoch`` rows; violations, losses and errors are the rows the stream emitted, in
emission order.
The final tier of invariants (EventualConvergence) is judged at the end of a run: every
summary carries that judgement as of its last step (``final_findings``), and the latest one is
reported at that step (``violated_in_summary`` is the one reading of a summary row).

This module is the public API for reading a job's outputs (the dashboard and the expectation
suites use it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

from emulator.families import PARTITION, family_of_protocol
from emulator.result import result_object


def read_output(output_dir: str | Path, kind: str):
    """One output kind of a job (``timeline``, ``summary``, ``validations`` ...) as pandas, with
    its ``batch_id`` (int64), in batch order; an empty frame when the job wrote none.  Fresh
    micro-batches and compacted ranges alike (``streaming.output_layout``)."""
    import pandas as pd

    from streaming.output_layout import read_kind

    table = read_kind(Path(output_dir), kind)
    if table.num_rows == 0:
        return pd.DataFrame()
    return table.to_pandas()


class ResultsError(ValueError):
    pass


RESULT_KINDS = ("summary", "violations", "losses", "errors", "log")


def local_output_problem(output_dir: str | Path) -> str | None:
    """Why ``output_dir`` cannot be read here: the readers take local directories, not URIs."""
    from streaming.storage import is_uri

    if is_uri(output_dir):
        return (f"{output_dir}: the readers take a local directory; copy the job's output here first "
                f"(e.g. hadoop fs -get {output_dir} DIR) and give DIR")
    return None


def read_results(output_dir: str | Path) -> list[dict[str, Any]]:
    if local_output_problem(output_dir):
        raise ResultsError(local_output_problem(output_dir))
    output_dir = Path(output_dir)
    if not (output_dir / "run.json").exists():
        raise ResultsError(f"{output_dir}: not a replemu stream output directory (no run.json)")
    results = results_from_frames({kind: read_output(output_dir, kind) for kind in RESULT_KINDS})
    if any(refused_step(r) is not None for r in results):
        results = not_expressible_results(results, read_output(output_dir, "timeline"))
    return results


def refused_step(result: dict[str, Any]) -> int | None:
    """The first step the variant's controller could not take (the core's ``NOT_A_KRAFT_STEP``
    answer: the stream goes on, changing nothing), or None."""
    from emulator.kraft import REFUSED

    return next((e["step"] for e in result.get("errors") or [] if e.get("error") == REFUSED), None)


def not_expressible_results(results: list[dict[str, Any]], timeline) -> list[dict[str, Any]]:
    """``results`` with each partition whose steps include one its variant's controller cannot
    take as that variant's "not expressible" result (``replemu run``'s, docs/scenario-format.md
    §4): what followed such a step is no verdict.  ``timeline`` (its rows' ``event``) describes
    the step."""
    from emulator.result import not_expressible_result

    described: dict[tuple[str, int], str] = {}
    if timeline is not None and not timeline.empty:
        for row in timeline[["scenario", "seq", "event"]].drop_duplicates(["scenario", "seq"]).to_dict("records"):
            described[(str(row["scenario"]), int(row["seq"]))] = str(row["event"])
    out = []
    for r in results:
        step = refused_step(r)
        if step is None:
            out.append(r)
            continue
        key = (r["scenario"], step)
        out.append(not_expressible_result(r["scenario"], r["protocol"], step, described.get(key, f"seq {step}"),
                                          refused_reason(r["protocol"])))
    return out


def refused_reason(protocol: str) -> str:
    """Why a stream's partition is "not expressible" under ``protocol`` (its core answered a step
    with ``NOT_A_KRAFT_STEP``): the results' and the dashboard's words."""
    return (f"not a step the {protocol} controller can take (the core answered NOT_A_KRAFT_STEP; "
            f"replemu run of the scenario under {protocol} says why)")


def results_from_frames(frames: dict[str, Any]) -> list[dict[str, Any]]:
    """One contract result per partition from a job's output rows (pandas frames by kind, each
    with a ``batch_id`` column), in (topic, partition) order."""
    summary = frames["summary"]
    if summary.empty:
        return []
    summary = summary.sort_values(["topic", "partition", "batch_id"], kind="stable")
    latest = summary.groupby(["topic", "partition"], sort=True).tail(1)
    # Each kind's rows grouped by partition once, in emission order (not filtered per partition).
    grouped: dict[str, dict[tuple[str, int], list[dict]]] = {}
    for kind in ("violations", "losses", "errors", "log"):
        t = frames[kind]
        groups: dict[tuple[str, int], list[dict]] = {}
        if not t.empty:  # one pass over the records (a pandas groupby + to_dict per partition costs ~10 ms each)
            for r in t.sort_values(["topic", "partition", "batch_id", "seq", "idx"], kind="stable").to_dict("records"):
                key = (str(r["topic"]), int(r["partition"]))
                group = groups.get(key)
                if group is None:
                    group = groups[key] = []
                group.append(r)
        grouped[kind] = groups

    results = []
    for s in latest.to_dict("records"):
        topic, partition = s["topic"], int(s["partition"])
        family = family_of_protocol(s["protocol"]) or PARTITION
        results.append(RESULT_OF[family.name](s, lambda kind, key=(topic, partition): grouped[kind].get(key, [])))
    return results


def partition_result(s: dict, rows_of: Callable[[str], list[dict]]) -> dict[str, Any]:
    """A partition's result in ``replemu run --json``'s shape: the latest summary's ``final`` with
    each replica's log rebuilt from the ``log`` rows, the verdicts from its rows (``rows_of(kind)``)."""
    violations = [{"invariant": r["invariant"], "step": int(r["at_step"]), "detail": r["detail"]} for r in rows_of("violations")]
    seen = {v["invariant"] for v in violations}
    violations += [f for f in final_findings(s) if f["invariant"] not in seen]
    return result_object(
        s["scenario"], s["protocol"], int(s["steps"]), rebuild_final(json.loads(s["final"]), rows_of("log")),
        violations,
        [{"offset": int(r["offset"]), "value": r["value"], "acked": bool(r["acked"]), "allowed": bool(r["allowed"]), "step": int(r["at_step"])}
         for r in rows_of("losses")],
        [{"step": int(r["at_step"]), "error": r["error"]} for r in rows_of("errors")],
        None,  # the logs are whole again: no compacted prefix to declare
        json.loads(s["knobs"]) if isinstance(s.get("knobs"), str) else None,
    )


def quorum_result(s: dict, rows_of: Callable[[str], list[dict]]) -> dict[str, Any]:
    """A metadata partition's result in ``replemu run --json``'s quorum shape (docs/quorum.md):
    the latest summary's ``final`` with each server's log rebuilt from the ``log`` rows."""
    final = json.loads(s["final"])
    violation_rows, error_rows = rows_of("violations"), rows_of("errors")
    logs, _ = replay_logs(((r["replica"], r["op"], r["offset"], r["epoch"], r["value"]) for r in rows_of("log")), final["servers"])
    servers = {sid: {**server, "log": logs.get(sid, [])} for sid, server in final["servers"].items()}
    return {
        "scenario": s["scenario"], "family": "quorum", "protocol": s["protocol"],
        "knobs": json.loads(s["knobs"]) if isinstance(s.get("knobs"), str) else None, "steps": int(s["steps"]),
        "final": {"leader": final["leader"], "servers": servers},
        "violations": [{"invariant": r["invariant"], "step": int(r["at_step"]), "detail": r["detail"]} for r in violation_rows],
        "errors": [{"step": int(r["at_step"]), **json.loads(r["error"])} for r in error_rows],
    }


# A stream partition's result from its rows, by its protocol's family (``Family.name``).
RESULT_OF: dict[str, Callable[[dict, Callable[[str], list[dict]]], dict[str, Any]]] = {
    "partition": partition_result, "quorum": quorum_result}


def replay_logs(ops: Iterable[tuple], replicas: Iterable[str] = ()) -> tuple[dict[str, list], dict[str, list]]:
    """Every replica's log ``[[offset, epoch, value], ...]`` and its cold epoch-cache entries
    ``[[epoch, start offset], ...]``, from ``log`` operations ``(replica, op, offset, epoch, value)``
    in emission order: the one replay of the ``log`` rows (the results, and the dashboard's log
    picture at a step)."""
    logs: dict[str, list] = {str(rid): [] for rid in replicas}
    cold: dict[str, list] = {str(rid): [] for rid in replicas}
    for replica, op, offset, epoch, value in ops:
        rid, offset = str(int(replica)), int(offset)
        log = logs.setdefault(rid, [])
        if op == "append":
            if offset != len(log):
                raise ResultsError(f"log rows of replica {rid}: an append at offset {offset} to a log of {len(log)} records")
            log.append([offset, int(epoch), value])
        elif op == "truncate":
            del log[offset:]
        else:
            cold.setdefault(rid, []).append([int(epoch), offset])
    return logs, cold


def rebuild_final(final: dict, log_rows: list[dict]) -> dict:
    """The contract's ``final`` from a summary's (no logs) and the partition's ``log`` rows."""
    logs, cold = replay_logs(((r["replica"], r["op"], r["offset"], r["epoch"], r["value"]) for r in log_rows), final["replicas"])
    replicas = {}
    for rid, rep in final["replicas"].items():
        rebuilt = dict(rep)
        rebuilt["log"] = logs[rid]
        rebuilt["epoch_cache"] = cold[rid] + rep["epoch_cache"]
        replicas[rid] = {k: rebuilt[k] for k in ("alive", "halted", "role", "leader_epoch", "leo", "hw", "log", "epoch_cache", "remote_leo")}
    return {"controller": final["controller"], "replicas": replicas}


def final_findings(summary_row: dict) -> list[dict]:
    """The final-tier invariants a summary row judged broken as of its last step."""
    text = summary_row.get("final_findings")
    return json.loads(text) if isinstance(text, str) else []


def violated_in_summary(summary_row: dict) -> set[str]:
    """Every invariant a summary row says is broken: the per-step ones so far and the final tier now."""
    names = set(filter(None, (summary_row.get("violated") or "").split(",")))
    return names | {f["invariant"] for f in final_findings(summary_row)}


def quarantine_rows(output_dir: str | Path) -> list[dict[str, Any]]:
    q = read_output(output_dir, "quarantine")
    if q.empty:
        return []
    q = q.sort_values(["batch_id", "topic", "partition", "seq", "idx"], kind="stable", na_position="first")
    return [{k: (None if v != v else v) for k, v in r.items()} for r in q.to_dict("records")]


def _leader_text(leader, epoch) -> str:
    """``leader 2 e3``, or ``no leader e3`` (not ``leader None``)."""
    return f"{'no leader' if leader is None else f'leader {leader}'}{'' if epoch is None else f' e{epoch}'}"


def summary_text(output_dir: str | Path) -> str:
    from .progress import counted

    results = read_results(output_dir)
    lines = [f"{counted(len(results), 'partition')} in {output_dir}"]
    width = max([len(r["scenario"]) for r in results] + [8])
    for r in results:
        if "not_expressible" in r:
            n = r["not_expressible"]
            lines.append(f"  {r['scenario']:<{width}}  {r['protocol']:<7} not expressible under {r['protocol']}: "
                         f"step {n['step']} ({n['description']})")
            continue
        names = ", ".join(v["invariant"] for v in r["violations"]) or "no invariant violated"
        if r.get("family") == "quorum":
            leader = r["final"]["leader"]
            epoch = r["final"]["servers"][str(leader)]["epoch"] if leader is not None else None
            errors = counted(len(r["errors"]), "error answer")
            lines.append(f"  {r['scenario']:<{width}}  {r['protocol']:<7} {r['steps']:>6} steps  {_leader_text(leader, epoch)}  "
                         f"{names}{f'; {errors}' if r['errors'] else ''}")
            continue
        c = r["final"]["controller"]
        lost = len(r["losses"])
        lines.append(f"  {r['scenario']:<{width}}  {r['protocol']:<7} {r['steps']:>6} steps  {_leader_text(c['leader'], c['epoch'])}  "
                     f"{names}{f'; {lost} lost' if lost else ''}")
    q = quarantine_rows(output_dir)
    lines.append(f"{counted(len(q), 'quarantined row')}" + (":" if q else ""))
    for row in q[:20]:
        lines.append(f"  batch {row['batch_id']} {row['topic']}/{row['partition']} seq {row['seq']}: {row['reason']}")
    return "\n".join(lines)
