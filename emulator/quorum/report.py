"""What a metadata-quorum result shows people: ``replemu run``'s step table (servers' roles, epochs,
LEO/HW), final logs and verdict, the ``--check`` comparison with a quorum ``expect`` block, and the
dashboard's views of a ``--trace``.  ``emulator.quorum.family.QUORUM`` serves them to the engines."""

from __future__ import annotations

from typing import Any

from ..report import log_ops, log_rows
from .run import SERVER_FIELD_DEFAULTS

# -- replemu run's human output ----------------------------------------------------------------------

_MARK = {"leader": "L", "follower": "F", "candidate": "C", "prospective": "P", "unattached": "U", "resigned": "R"}


def _cell(s: dict[str, Any]) -> str:
    mark = "x" if not s["alive"] else _MARK[s["role"]] + ("" if s["voter"] else "o")
    return f"{mark} e{s['epoch']} {s['leo']}/{s['hw']}"


def step_table(result: dict[str, Any]) -> str:
    """One row per step: each server's role, epoch and LEO/HW, errors, events that change a log, violations."""
    ids = list(result["final"]["servers"])
    head = ["step", "event"] + [f"s{i} e LEO/HW" for i in ids] + ["errors / events / violations"]
    rows: list[list[str]] = []
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
        rows.append([str(t["step"]), t["description"]] + [_cell(servers[i]) for i in ids] + ["; ".join(notes)])
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.append("(L leader, F follower, C candidate, P prospective, U unattached, R resigned, x down; o observer; "
                 "!Name = invariant first broken here)")
    return "\n".join(lines)


def final_logs(result: dict[str, Any]) -> str:
    """The servers' final logs side by side, offsets where they disagree marked."""
    servers = result["final"]["servers"]
    ids = list(servers)
    head = ["offset"] + [f"s{i} ({'down' if not servers[i]['alive'] else servers[i]['role']}, HW {servers[i]['hw']})"
                         for i in ids]
    rows = log_rows([servers[i]["log"] for i in ids], max((s["leo"] for s in servers.values()), default=0))
    widths = [max(len(r[c]) for r in rows + [head] if c < len(r)) for c in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths + [0])).rstrip() for r in rows]
    return "\n".join(lines)


def verdict(result: dict[str, Any]) -> str:
    names = [f"{v['invariant']} (step {v['step']})" for v in result["violations"]]
    leader = result["final"]["leader"]
    return (f"verdict {result['scenario']} / {result['protocol']}: "
            + (("VIOLATED " + ", ".join(names)) if names else "no invariant violated")
            + f"; leader at the end: {'none' if leader is None else leader}")


# -- --check ----------------------------------------------------------------------------------------


def check_expectation(result: dict[str, Any], expect: dict[str, Any] | None) -> list[str]:
    """Disagreements with a quorum scenario's ``expect`` block: ``violations`` is the exact set of
    invariants broken, ``leader`` the live leader at the end, ``errors`` every error code in order."""
    if expect is None:
        return []
    problems: list[str] = []
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


# -- the dashboard's views of a --trace ----------------------------------------------------------------


def role(s: dict[str, Any]) -> str:
    """A server's role as the views show it: Kafka's epoch state, with an unattached server that
    voted shown as ``voted``, a non-voter that is not leading, resigned or campaigning as
    ``observer``, and a server that is down as ``stopped``."""
    if not s["alive"]:
        return "stopped"
    kind: str = s["role"]
    if kind == "unattached" and s.get("voted_for") is not None:
        return "voted"
    if not s["voter"] and kind in ("unattached", "follower"):
        return "observer"
    return kind


def timeline(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The views' per-step timeline of a quorum ``--trace``, in the partition timeline's shape
    (``steps``, ``events``, ``leader``, ``epoch``; per server ``leo``, ``hw``, ``epoch``, ``role``,
    ``alive``) plus the quorum's own: ``voters`` (the voter set as the newest leader's log has it;
    without a leader, the previous step's) and, per server, ``voters`` and ``voter``."""
    servers = sorted(trace[0]["state"]["servers"], key=int) if trace else []
    tl: dict[str, Any] = {"family": "quorum", "steps": [], "events": [], "leader": [], "epoch": [], "voters": [],
                          "replicas": {s: {"leo": [], "hw": [], "epoch": [], "role": [], "alive": [], "voters": [], "voter": []}
                                       for s in servers}}
    for t in trace:
        state = t["state"]
        snap, leader = state["servers"], state["leader"]
        tl["steps"].append(t["step"])
        tl["events"].append(t.get("description") or "")
        tl["leader"].append(leader)
        if leader is not None and str(leader) in snap:
            tl["epoch"].append(snap[str(leader)]["epoch"])
            tl["voters"].append(list(snap[str(leader)]["voters"]))
        else:
            tl["epoch"].append(max(s["epoch"] for s in snap.values()))
            tl["voters"].append(tl["voters"][-1] if tl["voters"] else list(snap[servers[0]]["voters"]))
        for sid in servers:
            s, d = snap[sid], tl["replicas"][sid]
            for k in ("leo", "hw", "epoch", "alive", "voter"):
                d[k].append(s[k])
            d["role"].append(role(s))
            d["voters"].append(list(s["voters"]))
    return tl


def trace_log_ops(trace: list[dict[str, Any]]) -> list[list[Any]]:
    """The log changes of a quorum ``--trace`` (each row's whole logs) as the views' log operations:
    ``[step, server, "append"|"truncate", offset, epoch, value]``, an append of a control record
    (LeaderChange, VotersRecord) with a seventh element, 1."""
    return log_ops((t["step"], [(sid, s["log"], set(s.get("control") or ()))
                                for sid, s in sorted(t["state"]["servers"].items(), key=lambda kv: int(kv[0]))
                                if "log" in s])
                   for t in trace)


def view_entry(r: dict[str, Any]) -> dict[str, Any]:
    """A quorum result as the dashboard's views show one scenario."""
    trace: Any = r.get("trace")
    has_logs = bool(trace) and all("log" in s for s in trace[0]["state"]["servers"].values())
    return {"key": r["scenario"], "topic": r["scenario"], "partition": 0, "scenario": r["scenario"], "family": "quorum",
            "steps": r["steps"], "timeline": timeline(trace) if trace else None,
            "log": trace_log_ops(trace) if has_logs else None, "violations": r["violations"], "losses": [],
            "errors": r["errors"], "final": r["final"], "knobs": r.get("knobs")}
