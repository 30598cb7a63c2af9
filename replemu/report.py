"""Human output of ``replemu run``: the step table, the final logs side by side, verdicts,
the scenario × variant matrix, and the ``--check`` comparison with an ``expect`` block."""

from __future__ import annotations

from typing import Any

from emulator.invariants import VERDICT_INVARIANTS
from emulator.quorum_run import SERVER_FIELD_DEFAULTS


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
    rows = []
    for t in trace:
        reps = t["replicas"]
        remote = []
        for i in ids:
            if reps[i]["remote_leo"] is not None:
                remote.append(f"r{i} " + " ".join(f"[{k}]={v}" for k, v in reps[i]["remote_leo"].items()))
        notes = [e["error"] if e["step"] == t["step"] else f"{e['error']}(step {e['step']})" for e in t["outcome"]["errors"]]
        notes += [f"!{v['invariant']}" for v in t["outcome"]["violations"]]
        notes += [f"truncate r{e['replica']} {e['from_leo']}->{e['to']} ({e['rule']})" for e in t["outcome"]["events"] if e["event"] == "Truncation"]
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
    rows = _log_rows([reps[i]["log"] for i in ids], longest)
    caches = ["cache"] + [" ".join(f"({e},{s})" for e, s in reps[i]["epoch_cache"]) or "[]" for i in ids]
    widths = [max(len(r[c]) for r in rows + [head, caches] if c < len(r)) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths + [0])).rstrip() for r in rows + [caches]]
    return "\n".join(lines)


def _log_rows(logs: list[list], longest: int) -> list[list[str]]:
    """One row per offset: ``eEPOCH VALUE`` of each log (``[offset, epoch, value]`` records), and
    ``<- differs`` where the logs that reach the offset disagree."""
    rows = []
    for o in range(longest):
        cells, seen = [], set()
        for log in logs:
            if o < len(log):
                cells.append(f"e{log[o][1]} {log[o][2]}")
                seen.add((log[o][1], log[o][2]))
            else:
                cells.append("")
        rows.append([str(o)] + cells + (["<- differs"] if len(seen) > 1 else []))
    return rows


def verdict(result: dict[str, Any]) -> str:
    names = [f"{v['invariant']} (step {v['step']})" for v in result["violations"]]
    losses = result["losses"]
    lost = ", ".join(
        f"{l['value']}@{l['offset']}{' acked' if l['acked'] else ''}{' allowed' if l['allowed'] else ''}" for l in losses
    )
    head = f"verdict {result['scenario']} / {result['protocol']}: "
    body = ("VIOLATED " + ", ".join(names)) if names else "no invariant violated"
    if losses:
        body += f"; lost {lost}"
    return head + body


def matrix(results: list[dict[str, Any]], protocols: list[str]) -> str:
    """Scenarios × variants; each cell lists the violated invariants (verdict ones first)."""
    scenarios: list[str] = []
    cells: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
        if "not_expressible" in r:  # the variant cannot take one of its steps: no verdict
            cells[(r["scenario"], r["protocol"])] = ["not expressible", f"(step {r['not_expressible']['step']})"]
            continue
        names = [v["invariant"] for v in r["violations"]]
        names.sort(key=lambda n: (n not in VERDICT_INVARIANTS, VERDICT_INVARIANTS.index(n) if n in VERDICT_INVARIANTS else 0))
        if any(l["allowed"] for l in r["losses"]):
            names.append("(allowed loss)")
        cells[(r["scenario"], r["protocol"])] = names or ["ok"]
    width0 = max([len("scenario")] + [len(s) for s in scenarios])
    widths = [max([len(p)] + [len(n) for s in scenarios for n in cells.get((s, p), [])]) for p in protocols]
    lines = ["  ".join(["scenario".ljust(width0)] + [p.ljust(w) for p, w in zip(protocols, widths)]).rstrip()]
    lines.append("  ".join(["-" * width0] + ["-" * w for w in widths]))
    for s in scenarios:
        height = max(len(cells.get((s, p), [])) for p in protocols)
        for k in range(height):
            row = [(s if k == 0 else "").ljust(width0)]
            for p, w in zip(protocols, widths):
                col = cells.get((s, p), [])
                row.append((col[k] if k < len(col) else "").ljust(w))
            lines.append("  ".join(row).rstrip())
    return "\n".join(lines)


# -- --check ----------------------------------------------------------------------------


def check_expectation(result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
    """Disagreements between a result and its variant's ``expect`` block (empty = agrees).

    ``violations`` is exact over the verdict invariants (NoCommittedDataLoss, StrongIsr,
    EventualConvergence) and over every name it lists; other invariants are not compared.
    ``losses`` compares the given fields of each loss, in order.  ``replicas`` and
    ``controller`` compare the given fields of the final state.
    """
    if expect is None:
        return []
    problems = []
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
    problems = []
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


# -- the metadata quorum (emulator.quorum_run) ------------------------------------------------

_QUORUM_MARK = {"leader": "L", "follower": "F", "candidate": "C", "prospective": "P", "unattached": "U", "resigned": "R"}


def _quorum_cell(s: dict[str, Any]) -> str:
    mark = "x" if not s["alive"] else _QUORUM_MARK[s["role"]] + ("" if s["voter"] else "o")
    return f"{mark} e{s['epoch']} {s['leo']}/{s['hw']}"


def quorum_step_table(result: dict[str, Any]) -> str:
    """One row per step: each server's role, epoch and LEO/HW, errors, events that change a log, violations."""
    ids = list(result["final"]["servers"])
    head = ["step", "event"] + [f"s{i} e LEO/HW" for i in ids] + ["errors / events / violations"]
    rows = []
    for t in result["trace"]:
        servers = t["state"]["servers"]
        notes = [f"s{e['server']} {e['api']} {e['error']}" for e in t["outcome"]["errors"]]
        for e in t["outcome"]["events"]:
            if e["event"] == "Truncated":
                notes.append(f"truncate s{e['server']} -> {e['to']}")
            elif e["event"] == "VotersAppended":
                notes.append(f"s{e['server']} voters {e['voters']} @{e['offset']}")
            elif e["event"] == "VoterChangeCompleted":
                notes.append(f"s{e['server']} {e['operation']} {e['voter']} committed")
        notes += [f"!{v['invariant']}" for v in t["outcome"]["violations"]]
        rows.append([str(t["step"]), t["description"]] + [_quorum_cell(servers[i]) for i in ids] + ["; ".join(notes)])
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.append("(L leader, F follower, C candidate, P prospective, U unattached, R resigned, x down; o observer; "
                 "!Name = invariant first broken here)")
    return "\n".join(lines)


def quorum_final_logs(result: dict[str, Any]) -> str:
    """The servers' final logs side by side, offsets where they disagree marked."""
    servers = result["final"]["servers"]
    ids = list(servers)
    head = ["offset"] + [f"s{i} ({'down' if not servers[i]['alive'] else servers[i]['role']}, HW {servers[i]['hw']})" for i in ids]
    rows = _log_rows([servers[i]["log"] for i in ids], max((s["leo"] for s in servers.values()), default=0))
    widths = [max(len(r[c]) for r in rows + [head] if c < len(r)) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths + [0])).rstrip() for r in rows]
    return "\n".join(lines)


def quorum_verdict(result: dict[str, Any]) -> str:
    names = [f"{v['invariant']} (step {v['step']})" for v in result["violations"]]
    leader = result["final"]["leader"]
    return (f"verdict {result['scenario']} / {result['protocol']}: "
            + (("VIOLATED " + ", ".join(names)) if names else "no invariant violated")
            + f"; leader at the end: {'none' if leader is None else leader}")


def check_quorum_expectation(result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
    """Disagreements with a quorum scenario's ``expect`` block: ``violations`` is the exact set of
    invariants broken, ``leader`` the live leader at the end, ``errors`` every error code in order."""
    if expect is None:
        return []
    problems = []
    got = sorted({v["invariant"] for v in result["violations"]})
    if "violations" in expect and got != sorted(set(expect["violations"])):
        problems.append(f"violations: expected {sorted(set(expect['violations']))}, got {got}")
    if "leader" in expect and result["final"]["leader"] != expect["leader"]:
        problems.append(f"leader: expected {expect['leader']}, got {result['final']['leader']}")
    codes = [e["error"] for e in result["errors"]]
    if "errors" in expect and codes != expect["errors"]:
        problems.append(f"errors: expected {expect['errors']}, got {codes}")
    for sid, fields in (expect.get("servers") or {}).items():
        have = {**SERVER_FIELD_DEFAULTS, **result["final"]["servers"][str(sid)]}
        for name, value in fields.items():
            if have[name] != value:
                problems.append(f"server {sid} {name}: expected {value!r}, got {have[name]!r}")
    return problems
