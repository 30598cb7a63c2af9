"""What a partition result shows people: ``replemu run``'s step table, final logs and verdict, the
``--check`` comparison with an ``expect`` block, and the dashboard's views of a ``--trace`` (the
per-step timeline, the log operations).  ``emulator.partition_family.PARTITION`` serves them to the
engines; ``log_rows`` and ``log_ops`` are every family's (``emulator.quorum.report`` uses them).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .invariants import VERDICT_INVARIANTS

# -- every family's: logs side by side, and a trace's log changes -----------------------------------


def log_rows(logs: list[list[Any]], longest: int) -> list[list[str]]:
    """One row per offset: ``eEPOCH VALUE`` of each log (``[offset, epoch, value]`` records), and
    ``<- differs`` where the logs that reach the offset disagree."""
    rows: list[list[str]] = []
    for o in range(longest):
        cells: list[str] = []
        seen: set[tuple[Any, Any]] = set()
        for log in logs:
            if o < len(log):
                cells.append(f"e{log[o][1]} {log[o][2]}")
                seen.add((log[o][1], log[o][2]))
            else:
                cells.append("")
        rows.append([str(o)] + cells + (["<- differs"] if len(seen) > 1 else []))
    return rows


def log_ops(states: Iterable[tuple[Any, list[tuple[str, list[Any], Any]]]]) -> list[list[Any]]:
    """The log changes of a trace as the views' log operations, from each step's whole logs
    (``(step, [(id, log, control offsets or None), ...])``, ids in order; a member without a log in
    a step is left out of it): ``[step, id, "append"|"truncate", offset, epoch, value]``, an append of
    a control record (an offset in its member's control offsets) with a seventh element, 1."""
    ops: list[list[Any]] = []
    before: dict[str, list[Any]] = {}
    for step, members in states:
        for mid, new, control in members:
            old = before.get(mid, [])
            same = 0
            while same < min(len(old), len(new)) and list(old[same]) == list(new[same]):
                same += 1
            if same < len(old):
                ops.append([step, int(mid), "truncate", same, None, None])
            for o, e, v in new[same:]:
                ops.append([step, int(mid), "append", int(o), int(e), v] + ([1] if control is not None and o in control else []))
            before[mid] = new
    return ops


# -- replemu run's human output ----------------------------------------------------------------------


def _cell(rep: dict[str, Any]) -> str:
    if rep["halted"]:
        mark = "H"
    elif not rep["alive"]:
        mark = "x"
    else:
        mark = {"leader": "L", "follower": "F", "none": "-"}[rep["role"]]
    return f"{mark} {rep['leo']}/{rep['hw']}/e{rep['leader_epoch']}"


def step_table(result: dict[str, Any]) -> str:
    """One row per step: each replica's role LEO/HW/epoch, the leader's remote LEOs, errors, violations."""
    trace = result["trace"]
    ids = list(result["final"]["replicas"])
    head = ["step", "event"] + [f"r{i} LEO/HW/e" for i in ids] + ["ISR", "leader's remote LEO", "errors / violations"]
    rows: list[list[str]] = []
    for t in trace:
        reps = t["replicas"]
        remote: list[str] = []
        for i in ids:
            if reps[i]["remote_leo"] is not None:
                remote.append(f"r{i} " + " ".join(f"[{k}]={v}" for k, v in reps[i]["remote_leo"].items()))
        notes = [e["error"] if e["step"] == t["step"] else f"{e['error']}(step {e['step']})" for e in t["outcome"]["errors"]]
        notes += [f"!{v['invariant']}" for v in t["outcome"]["violations"]]
        notes += [f"truncate r{e['replica']} {e['from_leo']}->{e['to']} ({e['rule']})" for e in t["outcome"]["events"]
                  if e["event"] == "Truncation"]
        isr = ",".join(map(str, t["controller"]["isr"]))
        rows.append([str(t["step"]), t["description"]] + [_cell(reps[i]) for i in ids] + [isr, " ".join(remote), "; ".join(notes)])
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.append("(L leader, F follower, - no role, x down, H halted; !Name = invariant first broken here)")
    return "\n".join(lines)


def final_logs(result: dict[str, Any]) -> str:
    """The final logs side by side; offsets where live logs disagree are marked."""
    reps = result["final"]["replicas"]
    ids = list(reps)
    longest = max((r["leo"] for r in reps.values()), default=0)
    head = ["offset"] + [
        f"r{i} ({'down' if not reps[i]['alive'] else reps[i]['role']}, HW {reps[i]['hw']})" for i in ids
    ]
    rows = log_rows([reps[i]["log"] for i in ids], longest)
    caches = ["cache"] + [" ".join(f"({e},{s})" for e, s in reps[i]["epoch_cache"]) or "[]" for i in ids]
    widths = [max(len(r[c]) for r in rows + [head, caches] if c < len(r)) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths + [0])).rstrip() for r in rows + [caches]]
    return "\n".join(lines)


def verdict(result: dict[str, Any]) -> str:
    names = [f"{v['invariant']} (step {v['step']})" for v in result["violations"]]
    losses = result["losses"]
    lost = ", ".join(
        f"{l['value']}@{l['offset']}{' acked' if l['acked'] else ''}{' allowed' if l['allowed'] else ''}" for l in losses  # noqa: E741
    )
    head = f"verdict {result['scenario']} / {result['protocol']}: "
    body = ("VIOLATED " + ", ".join(names)) if names else "no invariant violated"
    if losses:
        body += f"; lost {lost}"
    return head + body


# -- --check ----------------------------------------------------------------------------------------


def check_expectation(result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
    """Disagreements between a result and its variant's ``expect`` block (empty = agrees).

    ``violations`` is exact over the verdict invariants (NoCommittedDataLoss, StrongIsr,
    EventualConvergence) and over every name it lists; other invariants are not compared.
    ``losses`` compares the given fields of each loss, in order.  ``replicas`` and
    ``controller`` compare the given fields of the final state.
    """
    if expect is None:
        return []
    problems: list[str] = []
    got = {v["invariant"] for v in result["violations"]}
    if "violations" in expect:
        listed = set(expect["violations"])
        for name in sorted(listed - got):
            problems.append(f"expected {name} to be violated, it was not")
        for name in VERDICT_INVARIANTS:
            if name in got and name not in listed:
                step = next(v["step"] for v in result["violations"] if v["invariant"] == name)
                problems.append(f"{name} was violated at step {step}, the expectation says it is not")
    if "losses" in expect:
        want = expect["losses"]
        have = result["losses"]
        if len(want) != len(have):
            problems.append(f"expected {len(want)} losses, got {len(have)}: {have}")
        else:
            for w, h in zip(want, have):
                for k, v in w.items():
                    if h.get(k) != v:
                        problems.append(f"loss {h}: expected {k}={v!r}")
    problems += _state_problems(result["final"], expect, "")
    trace = result.get("trace") or []
    for number, state in sorted((expect.get("at_step") or {}).items()):
        if not 1 <= number <= len(trace):
            problems.append(f"at_step {number}: the run has {len(trace)} steps")
            continue
        problems += _state_problems(trace[number - 1], state, f"after step {number}: ")
    return problems


def _state_problems(have_state: dict[str, Any], expect: dict[str, Any], where: str) -> list[str]:
    """Disagreements of ``replicas`` / ``controller`` expectations with one state snapshot."""
    problems: list[str] = []
    for rid, fields in (expect.get("replicas") or {}).items():
        have = have_state["replicas"].get(str(rid))
        if have is None:
            problems.append(f"{where}replica {rid} is not in the result")
            continue
        for k, v in fields.items():
            if have.get(k) != v:
                problems.append(f"{where}replica {rid}: expected {k}={v!r}, got {have.get(k)!r}")
    for k, v in (expect.get("controller") or {}).items():
        if have_state["controller"].get(k) != v:
            problems.append(f"{where}controller: expected {k}={v!r}, got {have_state['controller'].get(k)!r}")
    return problems


# -- the dashboard's views of a --trace ----------------------------------------------------------------


def timeline(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The views' per-step timeline of a ``--trace``: ``steps``, ``events``, the controller's
    ``leader`` and ``epoch``; per replica ``leo``, ``hw``, ``epoch``, ``role``, ``alive``."""
    replicas = sorted(trace[0]["replicas"], key=int) if trace else []
    tl: dict[str, Any] = {"steps": [], "events": [], "leader": [], "epoch": [],
                          "replicas": {r: {"leo": [], "hw": [], "epoch": [], "role": [], "alive": []} for r in replicas}}
    for t in trace:
        tl["steps"].append(t["step"])
        tl["events"].append(t.get("description") or json.dumps(t.get("event")))
        tl["leader"].append(t["controller"]["leader"])
        tl["epoch"].append(t["controller"]["epoch"])
        for r in replicas:
            s = t["replicas"][r]
            for k in ("leo", "hw", "role", "alive"):
                tl["replicas"][r][k].append(s[k])
            tl["replicas"][r]["epoch"].append(s["leader_epoch"])
    return tl


def trace_log_ops(trace: list[dict[str, Any]]) -> list[list[Any]]:
    """The log changes of a ``--trace`` (each step's whole logs) as the stream's ``log`` rows:
    ``[step, replica, "append"|"truncate", offset, epoch, value]``."""
    return log_ops((t["step"], [(rid, t["replicas"][rid].get("log") or [], None) for rid in sorted(t["replicas"], key=int)])
                   for t in trace)


def view_entry(r: dict[str, Any]) -> dict[str, Any]:
    """A result as the dashboard's views show one scenario: its timeline and log operations (with a
    ``--trace``), violations, losses, errors and final state."""
    trace: Any = r.get("trace")
    return {"key": r["scenario"], "topic": r["scenario"], "partition": 0, "scenario": r["scenario"], "steps": r["steps"],
            "timeline": timeline(trace) if trace else None, "log": trace_log_ops(trace) if trace else None,
            "violations": r["violations"], "losses": r["losses"], "errors": r["errors"], "final": r["final"]}
