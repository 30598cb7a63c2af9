"""``replemu dashboard``: one self-contained static HTML page about one or more runs.

Inputs: stream output directories (``OUTPUT`` of ``replemu stream``, or the parent of the
per-variant directories of ``--protocol all``) and/or ``replemu run --json`` files (a result
object or an array; with ``--trace`` they carry the per-step timeline).  The page inlines its
data (JSON), its CSS and its JavaScript; it loads nothing from the network.

Views: the replication timeline of a chosen partition (per replica LEO and HW over the steps,
leader changes and epochs marked, truncations and lost records highlighted); per-invariant
violation counts over micro-batches; a variant × invariant matrix; the expectation results per
batch, with links into the run's GX Data Docs.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from emulator.bounds import short_list
from emulator.invariants import INVARIANT_NAMES
from emulator.result import ResultFormatError, check_result_document

MAX_TIMELINES = 50  # partitions whose step timeline is embedded (the chosen one first)


class DashboardError(ValueError):
    pass


# -- collecting runs ------------------------------------------------------------------------

def _timeline_from_trace(trace: list[dict]) -> dict[str, Any]:
    replicas = sorted(trace[0]["replicas"], key=int) if trace else []
    tl: dict[str, Any] = {"steps": [], "events": [], "leader": [], "epoch": [], "replicas": {r: {"leo": [], "hw": [], "epoch": [], "role": [], "alive": []} for r in replicas}}
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


def _partition_entry(key: str, result: dict, timeline: dict | None) -> dict[str, Any]:
    return {
        "key": key, "scenario": result["scenario"], "steps": result["steps"], "timeline": timeline,
        "violations": result["violations"], "losses": result["losses"], "final": result["final"],
    }


def _run_from_json(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DashboardError(f"{path}: not a replemu result JSON file ({exc})") from None
    try:
        results = check_result_document(data, str(path))
    except ResultFormatError as exc:
        raise DashboardError(str(exc)) from None
    runs: dict[str, dict] = {}
    for r in results:
        run = runs.setdefault(r["protocol"], {"name": f"{path.name} {r['protocol']}", "protocol": r["protocol"],
                                                "source": str(path), "partitions": [], "batches": [], "docs_index": None})
        run["partitions"].append(_partition_entry(r["scenario"], r, _timeline_from_trace(r["trace"]) if r.get("trace") else None))
    return list(runs.values())


def _run_from_output(out: Path, page_dir: Path) -> dict[str, Any]:
    from streaming.results import final_findings, read_output, read_results

    meta = json.loads((out / "run.json").read_text())
    results = read_results(out)  # ordered by (topic, partition)
    timeline = read_output(out, "timeline")
    summary = read_output(out, "summary")
    keys = sorted({(s["topic"], int(s["partition"])) for s in summary[["topic", "partition"]].to_dict("records")}) if not summary.empty else []
    entries = []
    for i, (r, (topic, part)) in enumerate(zip(results, keys)):
        tl = None
        if i < MAX_TIMELINES and not timeline.empty:
            rows = timeline[(timeline["topic"] == topic) & (timeline["partition"] == part)].sort_values(["seq", "replica"])
            tl = _timeline_from_rows(rows)
        entries.append(_partition_entry(f"{topic}/{part}", r, tl))
    batches = []
    violations = read_output(out, "violations")
    validations = read_output(out, "validations")
    batch_ids = sorted(set(summary["batch_id"].tolist()) if not summary.empty else [])
    for b in batch_ids:
        counts = {}
        if not violations.empty:
            vb = violations[violations["batch_id"] == b]
            counts = {str(k): int(v) for k, v in vb.groupby("invariant").size().items()}
        # The final tier (EventualConvergence) is judged at a partition's last step, not per
        # step: count the partitions of this batch whose summary judged it broken.
        for row in summary[summary["batch_id"] == b].to_dict("records"):
            for f in final_findings(row):
                counts[f["invariant"]] = counts.get(f["invariant"], 0) + 1
        checks = []
        if not validations.empty:
            for v in validations[validations["batch_id"] == b].to_dict("records"):
                docs = v.get("docs")
                link = os.path.relpath(out / "data_docs" / docs, page_dir) if isinstance(docs, str) and docs.startswith("validations/") else None
                checks.append({"invariant": v["invariant"], "expectation": v["expectation"], "success": bool(v["success"]),
                               "unexpected_count": int(v["unexpected_count"]), "partitions": list(v["partitions"] if v["partitions"] is not None else []),
                               "docs": link})
        batches.append({"batch_id": int(b), "violations": counts, "validations": checks})
    docs_index = out / "data_docs" / "index.html"
    return {"name": f"{out} ({meta['protocol']})", "protocol": meta["protocol"], "source": str(out), "partitions": entries,
            "batches": batches, "docs_index": os.path.relpath(docs_index, page_dir) if docs_index.exists() else None}


def _timeline_from_rows(rows) -> dict[str, Any]:
    replicas = sorted({int(r) for r in rows["replica"]})
    tl: dict[str, Any] = {"steps": [], "events": [], "leader": [], "epoch": [], "replicas": {str(r): {"leo": [], "hw": [], "epoch": [], "role": [], "alive": []} for r in replicas}}
    for seq, group in rows.groupby("seq", sort=True):
        first = group.iloc[0]
        tl["steps"].append(int(seq))
        tl["events"].append(first["event"])
        tl["leader"].append(None if first["leader"] != first["leader"] or first["leader"] is None else int(first["leader"]))
        tl["epoch"].append(int(first["controller_epoch"]))
        for rec in group.to_dict("records"):
            d = tl["replicas"][str(int(rec["replica"]))]
            d["leo"].append(int(rec["leo"]))
            d["hw"].append(int(rec["hw"]))
            d["epoch"].append(int(rec["leader_epoch"]))
            d["role"].append(rec["role"])
            d["alive"].append(bool(rec["alive"]))
    return tl


def collect_runs(inputs: list[str | Path], page_dir: Path) -> list[dict[str, Any]]:
    runs = []
    for raw in inputs:
        path = Path(raw)
        if path.is_file():
            runs.extend(_run_from_json(path))
        elif (path / "run.json").exists():
            runs.append(_run_from_output(path, page_dir))
        elif path.is_dir() and any((d / "run.json").exists() for d in path.iterdir() if d.is_dir()):
            for d in sorted(p for p in path.iterdir() if (p / "run.json").exists()):
                runs.append(_run_from_output(d, page_dir))
        else:
            raise DashboardError(f"{path}: neither a replemu result JSON file nor a stream output directory")
    if not runs:
        raise DashboardError("nothing to show: give stream output directories or replemu run --json files")
    return runs


# -- the page -------------------------------------------------------------------------------

def render(runs: list[dict[str, Any]], chosen: str | None = None) -> str:
    data = {"runs": runs, "invariants": list(INVARIANT_NAMES), "chosen": chosen}
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    title = "replemu dashboard: " + ", ".join(r["protocol"] for r in runs)
    return _PAGE.replace("%TITLE%", html.escape(title)).replace("%DATA%", payload)


def write_dashboard(inputs: list[str | Path], output_dir: str | Path, chosen: str | None = None) -> Path:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = collect_runs(inputs, out.resolve())
    if chosen is not None:
        known = sorted({p[k] for r in runs for p in r["partitions"] for k in ("key", "scenario")})
        if chosen not in known:
            raise DashboardError(f"--partition {chosen!r}: no such partition or scenario in the inputs (known: {short_list(known)})")
    page = out / "dashboard.html"
    page.write_text(render(runs, chosen), encoding="utf-8")
    return page


_PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>%TITLE%</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: center; }
th { background: #f4f4f4; } td.bad { background: #f8d0d0; } td.ok { background: #d8f0d8; } td.zero { color: #aaa; }
.note { color: #666; font-size: .9em; } svg { background: #fcfcfc; border: 1px solid #ddd; }
select { font: inherit; } .legend span { margin-right: 1.2em; } code { background: #f4f4f4; padding: 0 3px; }
</style>
</head>
<body>
<h1>%TITLE%</h1>
<p class="note">Self-contained page: data, styles and scripts are inlined; nothing is loaded from the network.</p>
<h2>Replication timeline</h2>
<p>Run <select id="run"></select> partition <select id="partition"></select></p>
<div id="timeline"></div>
<h2>Variant × invariant</h2>
<p class="note">Partitions violating each invariant, per run (variant).</p>
<div id="matrix"></div>
<h2>Violations per micro-batch</h2>
<p class="note">Invariants first broken in each batch; EventualConvergence counts the partitions judged diverged at the end of the batch.</p>
<div id="batches"></div>
<h2>Expectation results per batch</h2>
<div id="validations"></div>
<script id="data" type="application/json">%DATA%</script>
<script>
"use strict";
window.addEventListener("error", e => { document.body.dataset.error = String(e.message); });
const DATA = JSON.parse(document.getElementById("data").textContent);
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
const el = (tag, attrs, text) => { const e = document.createElement(tag); for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; };
const svgEl = (tag, attrs) => { const e = document.createElementNS("http://www.w3.org/2000/svg", tag); for (const k in attrs) e.setAttribute(k, attrs[k]); return e; };

function drawTimeline(p) {
  const box = document.getElementById("timeline"); box.innerHTML = "";
  if (!p) { box.append(el("p", {}, "No partition.")); return; }
  box.append(el("p", {}, `${p.key} (scenario ${p.scenario}, ${p.steps} steps): ` + (p.violations.map(v => `${v.invariant} @${v.step}`).join(", ") || "no invariant violated")));
  const tl = p.timeline;
  if (!tl) { box.append(el("p", {class: "note"}, "No per-step data for this partition (run `replemu run --json --trace` to include it).")); return; }
  const ids = Object.keys(tl.replicas), n = tl.steps.length;
  let maxY = 1; ids.forEach(r => tl.replicas[r].leo.forEach(v => { if (v > maxY) maxY = v; }));
  p.losses.forEach(l => { if (l.offset + 1 > maxY) maxY = l.offset + 1; });
  const W = Math.max(640, 40 * n + 80), H = 320, L = 50, B = 40, T = 30;
  const x = i => L + (n <= 1 ? 0 : i * (W - L - 20) / (n - 1)), y = v => H - B - v * (H - B - T) / maxY;
  const svg = svgEl("svg", {width: W, height: H, role: "img"});
  for (let v = 0; v <= maxY; v += Math.max(1, Math.ceil(maxY / 8))) {
    svg.append(svgEl("line", {x1: L, x2: W - 10, y1: y(v), y2: y(v), stroke: "#eee"}));
    const t = svgEl("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11}); t.textContent = v; svg.append(t);
  }
  tl.steps.forEach((s, i) => {
    const changed = i === 0 || tl.leader[i] !== tl.leader[i - 1] || tl.epoch[i] !== tl.epoch[i - 1];
    const t = svgEl("text", {x: x(i), y: H - B + 14, "text-anchor": "middle", "font-size": 10}); t.textContent = s; svg.append(t);
    if (changed) {
      svg.append(svgEl("line", {x1: x(i), x2: x(i), y1: T - 10, y2: H - B, stroke: "#999", "stroke-dasharray": "2,3"}));
      const lab = svgEl("text", {x: x(i) + 2, y: T - 14, "font-size": 10, fill: "#555"});
      lab.textContent = `e${tl.epoch[i]} L${tl.leader[i] === null ? "-" : tl.leader[i]}`; svg.append(lab);
    }
  });
  ids.forEach((r, k) => {
    const d = tl.replicas[r], c = COLORS[k % COLORS.length];
    const path = key => d[key].map((v, i) => `${i ? "L" : "M"}${x(i)},${y(v)}`).join(" ");
    svg.append(svgEl("path", {d: path("leo"), fill: "none", stroke: c, "stroke-width": 2}));
    svg.append(svgEl("path", {d: path("hw"), fill: "none", stroke: c, "stroke-width": 1.5, "stroke-dasharray": "5,3"}));
    d.leo.forEach((v, i) => {
      if (i > 0 && v < d.leo[i - 1]) {
        const m = svgEl("circle", {cx: x(i), cy: y(v), r: 6, fill: "none", stroke: "#d00", "stroke-width": 2});
        const tt = svgEl("title", {}); tt.textContent = `replica ${r} truncated ${d.leo[i - 1]} -> ${v} at step ${tl.steps[i]}`; m.append(tt); svg.append(m);
      }
      if (!d.alive[i]) svg.append(svgEl("rect", {x: x(i) - 3, y: y(v) - 3, width: 6, height: 6, fill: c, opacity: 0.4}));
    });
  });
  p.losses.forEach(l => {
    const i = Math.max(0, tl.steps.indexOf(l.step));
    const m = svgEl("text", {x: x(i), y: y(l.offset + 0.5) + 5, "text-anchor": "middle", fill: l.allowed ? "#e08000" : "#d00", "font-size": 16, "font-weight": "bold"});
    m.textContent = "\u2716"; const tt = svgEl("title", {}); tt.textContent = `lost ${l.value} at offset ${l.offset} (step ${l.step}${l.acked ? ", acked" : ""}${l.allowed ? ", allowed" : ""})`; m.append(tt); svg.append(m);
  });
  box.append(svg);
  const legend = el("p", {class: "legend"});
  ids.forEach((r, k) => { const s = el("span", {}, `\u25A0 replica ${r}: LEO solid, HW dashed`); s.style.color = COLORS[k % COLORS.length]; legend.append(s); });
  legend.append(el("span", {}, "\u25CB truncation"), el("span", {}, "\u2716 lost record (orange: allowed)"), el("span", {}, "dashed vertical: leader/epoch change"));
  box.append(legend);
  const table = el("table"); const head = el("tr"); ["step", "event", "leader", "epoch"].concat(ids.map(r => `r${r} LEO/HW/e`)).forEach(h => head.append(el("th", {}, h))); table.append(head);
  tl.steps.forEach((s, i) => {
    const tr = el("tr"); [s, tl.events[i], tl.leader[i] === null ? "-" : tl.leader[i], tl.epoch[i]].forEach(v => tr.append(el("td", {}, String(v))));
    ids.forEach(r => { const d = tl.replicas[r]; tr.append(el("td", {}, `${d.alive[i] ? ({leader: "L", follower: "F"}[d.role[i]] || "-") : "x"} ${d.leo[i]}/${d.hw[i]}/e${d.epoch[i]}`)); });
    table.append(tr);
  });
  box.append(table);
}

function setup() {
  const runSel = document.getElementById("run"), partSel = document.getElementById("partition");
  DATA.runs.forEach((r, i) => runSel.append(el("option", {value: i}, r.name)));
  const fillParts = () => {
    partSel.innerHTML = ""; const run = DATA.runs[runSel.value];
    run.partitions.forEach((p, i) => partSel.append(el("option", {value: i}, p.key + (p.violations.length ? " \u26A0" : ""))));
    let pick = run.partitions.findIndex(p => p.key === DATA.chosen || p.scenario === DATA.chosen);
    if (pick < 0) pick = Math.max(0, run.partitions.findIndex(p => p.violations.length));
    partSel.value = pick; drawTimeline(run.partitions[pick]);
  };
  runSel.onchange = fillParts; partSel.onchange = () => drawTimeline(DATA.runs[runSel.value].partitions[partSel.value]);
  fillParts();
}

function drawMatrix() {
  const t = el("table"), head = el("tr"); head.append(el("th", {}, "run"));
  DATA.invariants.forEach(n => head.append(el("th", {}, n))); t.append(head);
  DATA.runs.forEach(r => {
    const tr = el("tr"); tr.append(el("th", {}, r.name));
    DATA.invariants.forEach(n => { const c = r.partitions.filter(p => p.violations.some(v => v.invariant === n)).length; tr.append(el("td", {class: c ? "bad" : "zero"}, String(c))); });
    t.append(tr);
  });
  document.getElementById("matrix").append(t);
}

function drawBatches() {
  const box = document.getElementById("batches");
  DATA.runs.forEach(r => {
    if (!r.batches.length) return;
    box.append(el("h3", {}, r.name));
    const t = el("table"), head = el("tr"); head.append(el("th", {}, "invariant"));
    r.batches.forEach(b => head.append(el("th", {}, `batch ${b.batch_id}`))); t.append(head);
    DATA.invariants.forEach(n => {
      const tr = el("tr"); tr.append(el("th", {}, n));
      r.batches.forEach(b => { const c = b.violations[n] || 0; tr.append(el("td", {class: c ? "bad" : "zero"}, String(c))); });
      t.append(tr);
    });
    box.append(t);
  });
  if (!box.children.length) box.append(el("p", {class: "note"}, "No micro-batches: these runs come from replemu run."));
}

function drawValidations() {
  const box = document.getElementById("validations");
  DATA.runs.forEach(r => {
    const rows = r.batches.flatMap(b => b.validations.map(v => Object.assign({batch: b.batch_id}, v)));
    if (!rows.length) return;
    box.append(el("h3", {}, r.name));
    if (r.docs_index) { const p = el("p"); const a = el("a", {href: r.docs_index}, "GX Data Docs for this run"); p.append(a); box.append(p); }
    const t = el("table"), head = el("tr"); ["batch", "invariant", "expectation", "result", "unexpected", "partitions", "docs"].forEach(h => head.append(el("th", {}, h))); t.append(head);
    rows.forEach(v => {
      const tr = el("tr"); [v.batch, v.invariant, v.expectation].forEach(x => tr.append(el("td", {}, String(x))));
      tr.append(el("td", {class: v.success ? "ok" : "bad"}, v.success ? "pass" : "FAIL"));
      tr.append(el("td", {}, String(v.unexpected_count)), el("td", {}, v.partitions.join(" ")));
      const d = el("td"); if (v.docs) d.append(el("a", {href: v.docs}, "page")); tr.append(d); t.append(tr);
    });
    box.append(t);
  });
  if (!box.children.length) box.append(el("p", {class: "note"}, "No expectation results: these runs come from replemu run."));
}

setup(); drawMatrix(); drawBatches(); drawValidations();
document.body.dataset.rendered = "ok";
</script>
</body>
</html>
"""
