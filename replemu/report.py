"""Human output of ``replemu run`` over the families: the scenario × variant matrix.  A family's
own output (the step table, the final logs, the verdict, the ``--check`` comparison with an
``expect`` block) is its ``Family``'s (``emulator.report``, ``emulator.quorum.report``)."""

from __future__ import annotations

from typing import Any

from emulator.invariants import VERDICT_INVARIANTS


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
