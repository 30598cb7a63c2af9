// The replemu dashboard: every view rendered here, from JSON that is either inlined in the page
// (replemu dashboard, a static export) or fetched from replemu serve's endpoints (and polled).
"use strict";
(function () {
window.addEventListener("error", e => { document.body.dataset.error = String(e.message); });
window.addEventListener("unhandledrejection", e => { document.body.dataset.error = String((e.reason && e.reason.message) || e.reason); });

const BOOT = JSON.parse(document.getElementById("data").textContent);
const SERVED = BOOT.mode === "served";
const INVARIANTS = BOOT.invariants || [];
const STATUSES = BOOT.statuses || ["ok", "violated", "lost data", "error", "not expressible"];
// "not expressible": the variant could not take one of the partition's steps, so it has no verdict
const STATUS_CLASS = {"ok": "st-ok", "violated": "st-violated", "lost data": "st-lost", "error": "st-error", "not expressible": "st-nx"};
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
const EPOCH_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1b9e77", "#7570b3"];
const MAX_BOXES = 400;  // record boxes drawn per replica row (the last ones)

const $ = id => document.getElementById(id);
const el = (tag, attrs, text) => { const e = document.createElement(tag); for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; };
const svgEl = (tag, attrs, text) => { const e = document.createElementNS("http://www.w3.org/2000/svg", tag); for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; };
const title = (node, text) => { const t = svgEl("title", {}, text); node.append(t); return node; };
const fmtInt = n => (n === null || n === undefined) ? "-" : Number(n).toLocaleString("en");
const epochColor = e => (e === null || e === undefined || e < 0) ? "#999" : EPOCH_COLORS[e % EPOCH_COLORS.length];
const ROLE_COLORS = {leader: "#e0a800", follower: "#8fd18f", candidate: "#f28e2b", prospective: "#ffd2a6", voted: "#c9a0dc",
                     unattached: "#e2e2e2", resigned: "#9c755f", observer: "#a6cee3", stopped: "#555", down: "#555", none: "#e2e2e2"};
const ROLE_ABBR = {leader: "L", follower: "F", candidate: "C", prospective: "P", voted: "V", unattached: "U", resigned: "R",
                   observer: "O", stopped: "x", down: "x", none: "-"};
const isQuorum = d => !!(d && ((d.timeline && d.timeline.family === "quorum") || d.family === "quorum"));
const unitOf = d => isQuorum(d) ? "server" : "replica";
const roleAt = (rep, i) => rep.alive[i] ? rep.role[i] : (rep.role[i] === "stopped" ? "stopped" : "down");  // a replica down: its role greyed out
const darkText = e => [4, 5, 7, 9].includes(((e % EPOCH_COLORS.length) + EPOCH_COLORS.length) % EPOCH_COLORS.length);

// -- state ------------------------------------------------------------------------------------
const S = {
  runs: [],            // every run (variant): {id, name, protocol, batches, partitions, matrix, counts, docs_index, version, sigs}
  runId: null,
  key: null,           // the open partition
  detail: null,        // its timeline, log operations, findings
  detailVersion: null,
  stepIdx: 0,
  followLast: true,    // the stepper stays on the last step as batches land
  seen: null,          // violation ids known (the banner shows new ones)
  news: [],            // partitions with violations that appeared while the page was open, newest first
  newsCount: 0,
  filter: null,        // partitions-by-status filter
  showAllChecks: false,
  pendingHash: null,
  logScroll: null,     // the log picture's scroll position (null: keep its end in view)
  openToken: 0,        // the latest partition request (an earlier one that answers late is dropped)
};
const run = () => S.runs.find(r => r.id === S.runId) || S.runs[0];
const partitionEntry = (r, key) => r ? r.partitions.find(p => p.key === key) : undefined;

// -- data: inlined (static) or fetched (served) -------------------------------------------------
async function api(path) {
  const res = await fetch(path, {cache: "no-store", headers: {"Accept": "application/json"}});
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}
const runPath = (r, rest) => `/api/runs/${encodeURIComponent(r.id)}/${rest}`;

async function refreshServed() {
  const status = await api("/api/status");
  const changed = [];
  const runs = [];
  for (const st of status.runs) {
    let r = S.runs.find(x => x.id === st.id);
    if (!r) r = {id: st.id, name: st.name, protocol: st.protocol, batches: [], partitions: [], matrix: {}, counts: {},
                 docs_index: null, version: null, sigs: {}, quarantined: 0};
    runs.push(r);
    if (r.version === st.version) continue;
    const want = st.batches.filter(([b, sig]) => r.sigs[b] !== sig).map(([b]) => b);
    const alive = new Set(st.batches.map(([b]) => b));
    // every batch at first, and when more changed than one request may list (BOOT.max_batch_ids)
    const every = r.version === null || want.length > (BOOT.max_batch_ids || 1000);
    const fresh = want.length ? await api(runPath(r, "batches") + (every ? "" : `?ids=${want.join(",")}`)) : [];
    const overview = await api(runPath(r, "overview"));
    const byId = new Map(r.batches.filter(b => alive.has(b.batch_id)).map(b => [b.batch_id, b]));
    fresh.forEach(b => byId.set(b.batch_id, b));
    r.batches = [...byId.values()].sort((a, b) => a.batch_id - b.batch_id);
    Object.assign(r, {name: overview.name, protocol: overview.protocol, partitions: overview.partitions, matrix: overview.matrix,
                      counts: overview.counts, findings: overview.findings, docs_index: overview.docs_index, quarantined: overview.quarantined,
                      source: overview.source});
    r.sigs = Object.fromEntries(st.batches);
    r.version = st.version;
    changed.push(r.id);
  }
  S.runs = runs;
  return {changed, started: status.started};
}

async function loadDetail(r, key) {
  const p = partitionEntry(r, key);
  if (!p) return null;
  if (!SERVED) return (p.timeline || p.log) ? p : Object.assign({notEmbedded: p.embedded === false}, p);
  return api(runPath(r, `partition?topic=${encodeURIComponent(p.topic)}&partition=${p.partition}`));
}

// -- the job ----------------------------------------------------------------------------------
// A small chart's y axis: steps of 1, 2 or 5 x 10^k, about four of them, from 0 (or the lowest value
// below it) to the first step at or above the highest value; integer data (counts) gets integer
// steps, so no two labels read the same ("1, 1, 0" for a constant 1 was the rounding of 0.5), and a
// range of nothing (a constant 0) is padded to 0..1. Returns the axis' ends, its ticks and labels.
function axisTicks(lo, hi, integer) {
  lo = Math.min(0, lo); hi = Math.max(0, hi);
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / 4, mag = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw * (1 - 1e-9));
  if (integer) step = Math.max(1, Math.round(step));
  const decimals = integer ? 0 : Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
  const ticks = [];
  for (let k = first; k <= last; k++) ticks.push(Number((k * step).toFixed(decimals)));
  const labels = ticks.map(v => integer ? fmtInt(v) : v.toFixed(decimals));
  return {lo: ticks[0], hi: ticks[ticks.length - 1], ticks, labels};
}
window.replemu = Object.freeze({axisTicks});  // for the page's tests (tests/test_serve.py)

function lineChart(label, batches, value, fmt, marks, integer) {
  const pts = batches.filter(b => value(b) !== null && value(b) !== undefined);
  const box = el("div", {class: "chart"}); box.append(el("h4", {}, label));
  if (!pts.length) { box.append(el("p", {class: "note"}, "no data yet")); return box; }
  const W = 340, H = 150, L = 56, R = 10, T = 10, B = 26;
  const x0 = pts[0].batch_id, x1 = pts[pts.length - 1].batch_id;
  const axis = axisTicks(Math.min(...pts.map(value)), Math.max(...pts.map(value)), integer);
  const x = b => L + (x1 === x0 ? (W - L - R) / 2 : (b - x0) * (W - L - R) / (x1 - x0));
  const y = v => H - B - (v - axis.lo) * (H - B - T) / (axis.hi - axis.lo);
  const svg = svgEl("svg", {width: W, height: H, role: "img", "aria-label": label});
  axis.ticks.forEach((v, i) => {
    svg.append(svgEl("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee"}));
    svg.append(svgEl("text", {x: L - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 10, class: "ytick"}, axis.labels[i]));
  });
  svg.append(svgEl("text", {x: x(x0), y: H - 8, "text-anchor": x1 === x0 ? "middle" : "start", "font-size": 10}, `batch ${x0}`));
  if (x1 !== x0) svg.append(svgEl("text", {x: x(x1), y: H - 8, "text-anchor": "end", "font-size": 10}, `batch ${x1}`));
  svg.append(svgEl("path", {d: pts.map((b, i) => `${i ? "L" : "M"}${x(b.batch_id)},${y(value(b))}`).join(" "), fill: "none", stroke: "#1f77b4", "stroke-width": 1.5}));
  pts.forEach(b => svg.append(title(svgEl("circle", {cx: x(b.batch_id), cy: y(value(b)), r: pts.length > 60 ? 1.5 : 3, fill: "#1f77b4"}),
                                    `batch ${b.batch_id}: ${fmt(value(b))}`)));
  (marks || []).forEach(b => { if (b >= x0 && b <= x1) svg.append(title(svgEl("rect", {x: x(b) - 2, y: H - B, width: 4, height: 5, fill: "#d00"}), `batch ${b}: invariants first broken`)); });
  box.append(svg);
  return box;
}

function drawJob() {
  const r = run(), summary = $("job-summary"), charts = $("charts"), statuses = $("statuses");
  summary.innerHTML = ""; charts.innerHTML = ""; statuses.innerHTML = "";
  const docs = $("docs-link"); docs.innerHTML = "";
  if (!r) { summary.append(el("p", {class: "note"}, "No run yet.")); return; }
  if (r.docs_index) { docs.append("· "); docs.append(el("a", {href: r.docs_index}, "GX Data Docs")); }
  const bs = r.batches || [];
  const last = bs[bs.length - 1];
  const errs = r.partitions.reduce((n, p) => n + (p.error_answers || 0), 0);
  let text = `${r.name}: `;
  if (!bs.length && SERVED) text += "waiting for the first micro-batch. ";
  else if (bs.length) text += `${bs.length} micro-batches (last: batch ${last.batch_id}${last.timestamp ? " at " + last.timestamp : ""}${last.steps !== null && last.steps !== undefined ? `, ${fmtInt(last.steps)} steps applied` : ""}${last.duration_s ? `, ${last.duration_s.toFixed(2)} s` : ""}). `;
  text += `${fmtInt(r.partitions.length)} ${r.family === "quorum" ? "quorum scenarios" : "partitions"}, ${fmtInt(errs)} error answers, ${fmtInt(r.quarantined || 0)} quarantined rows.`;
  summary.append(el("p", {id: "job-line"}, text));
  if (bs.length) {
    const marks = bs.filter(b => Object.keys(b.violations || {}).length).map(b => b.batch_id);
    const row = el("div", {class: "charts"});
    // steps (input events) applied, not Spark's numInputRows: a file stream's source counts files
    row.append(lineChart("steps applied per batch", bs, b => b.steps, v => fmtInt(Math.round(v)), marks, true));
    row.append(lineChart("batch duration (s)", bs, b => b.duration_s, v => (v === 0 ? "0" : v.toFixed(v < 10 ? 2 : 0)), marks, false));
    row.append(lineChart("state (KiB)", bs, b => b.state_bytes === null || b.state_bytes === undefined ? null : b.state_bytes / 1024, v => fmtInt(Math.round(v)), marks, true));
    row.append(lineChart("violations first found per batch", bs, b => Object.values(b.violations || {}).reduce((a, c) => a + c, 0), v => fmtInt(Math.round(v)), marks, true));
    charts.append(row);
    if (marks.length) {
      const legend = el("p", {class: "note chart-legend", id: "chart-legend"});
      legend.append(el("span", {class: "tick-mark"}), ` red tick under the x axis: a batch in which an invariant was first broken (${fmtInt(marks.length)} of ${fmtInt(bs.length)} batches)`);
      charts.append(legend);
    }
  }
  const counts = el("p", {class: "counts"});
  // A status names a partition's gravest finding (lost data before violated): the findings say
  // how many partitions broke an invariant and lost data, whatever their status.
  const found = r.findings || {};
  STATUSES.forEach(s => {
    const n = (r.counts || {})[s] || 0;
    let text = `${s}: ${fmtInt(n)}`;
    if (s === "violated" && (found.violated || 0) > n) text += ` (+${fmtInt(found.violated - n)} that lost data too)`;
    if (s === "lost data" && found["lost data, allowed only"]) text += ` (${fmtInt(found["lost data, allowed only"])} allowed only)`;
    const chip = el("span", {class: `${STATUS_CLASS[s]}${S.filter === s ? " active" : ""}`, "data-status": s, title: "show only these"}, text);
    chip.onclick = () => { S.filter = S.filter === s ? null : s; drawJob(); };
    counts.append(chip);
  });
  statuses.append(counts);
  if (r.findings) statuses.append(el("p", {class: "note", id: "findings"},
    `${fmtInt(found.violated || 0)} ${r.family === "quorum" ? "scenarios" : "partitions"} broke an invariant; ${fmtInt(found["lost data"] || 0)} lost data` +
    `${found["lost data"] ? ` (${fmtInt(found["lost data, allowed only"] || 0)} of them only records a fault allowed to lose: unclean election, power loss)` : ""}.`));
  const grid = el("div", {class: "pchips", id: "pchips"});
  const topics = new Set(r.partitions.map(p => p.topic));
  r.partitions.filter(p => !S.filter || p.status === S.filter).forEach(p => {
    const allowedOnly = p.status === "lost data" && p.lost && p.lost_allowed === p.lost;  // orange, not the forbidden loss's dark red
    const a = el("a", {class: `pchip ${allowedOnly ? "st-lost-allowed" : STATUS_CLASS[p.status] || ""}${p.key === S.key ? " current" : ""}`, href: hashFor(r.id, p.key), "data-key": p.key,
                       title: p.not_expressible ? `${p.key} (${p.scenario || "?"}): ${p.not_expressible.text}; no verdict`
                                                : `${p.key} (${p.scenario || "?"}): ${p.status}${p.violated.length ? "; " + p.violated.join(", ") : ""}${p.lost ? `; ${p.lost} lost` : ""}${p.quarantined ? `; ${p.quarantined} quarantined rows` : ""}`},
                 r.results ? p.scenario : topics.size > 1 ? p.key : String(p.partition));  // a run's result: its scenario
    grid.append(a);
  });
  if (!r.partitions.length) grid.append(el("span", {class: "note"}, SERVED ? "no partition has landed yet" : "no partitions"));
  statuses.append(grid);
}

function drawMatrix() {
  // Invariants as rows, runs (variants) as columns: a column per invariant was 2,840 px wide.
  const box = $("matrix"); box.innerHTML = "";
  const own = r => r.invariants || INVARIANTS;   // a run of quorum results judges the quorum's invariants
  const names = [...new Set(S.runs.length ? S.runs.flatMap(own) : INVARIANTS)];
  const protocols = S.runs.map(r => r.protocol);
  const unique = new Set(protocols).size === protocols.length;  // else the runs' names tell them apart
  const t = el("table", {class: "matrix"}), head = el("tr"); head.append(el("th", {}, "invariant"));
  S.runs.forEach(r => head.append(el("th", {title: r.name, class: "run"}, unique && r.protocol ? r.protocol : r.name)));
  t.append(head);
  names.forEach(n => {
    const tr = el("tr"); tr.append(el("th", {class: "invariant"}, n));
    S.runs.forEach(r => {
      if (!own(r).includes(n)) { tr.append(el("td", {class: "na", title: `${n} is not an invariant of this run's family`}, "\u00B7")); return; }
      const m = (r.matrix || {})[n], c = m ? m.partitions : 0;
      const td = el("td", {class: c || (m && m.first) ? "bad" : "zero", "data-run": r.id, "data-invariant": n});
      if (m && m.first) {
        const f = m.first;
        td.append(el("a", {href: hashFor(r.id, f.key, f.step), class: "first", title: `first: ${f.key} step ${f.step}${f.batch_id !== null && f.batch_id !== undefined ? `, batch ${f.batch_id}` : ""}`}, String(c)));
        if (f.docs) td.append(el("a", {href: f.docs, class: "gx", title: `GX validation result of batch ${f.batch_id}`}, "GX"));
      } else td.textContent = String(c);
      tr.append(td);
    });
    t.append(tr);
  });
  // partitions a variant could not replay are in no count above: how many there are, under each
  if (S.runs.some(r => (r.counts || {})["not expressible"])) {
    const tr = el("tr", {id: "matrix-nx"}); tr.append(el("th", {class: "invariant st-nx", title: "partitions whose variant could not take one of their steps: no verdict, in none of the counts above"}, "not expressible"));
    S.runs.forEach(r => tr.append(el("td", {class: "nx", "data-run": r.id}, String((r.counts || {})["not expressible"] || 0))));
    t.append(tr);
  }
  const wrap = el("div", {class: "scroll"}); wrap.append(t); box.append(wrap);
}

function drawBatches() {
  const box = $("batches"); box.innerHTML = "";
  S.runs.forEach(r => {
    if (!r.batches.length) return;
    box.append(el("h3", {}, r.name));
    const broken = INVARIANTS.filter(n => r.batches.some(b => (b.violations || {})[n]));
    if (!broken.length) { box.append(el("p", {class: "note"}, `No invariant broken in ${r.batches.length} batches.`)); return; }
    const shown = r.batches.slice(-200);
    const t = el("table"), head = el("tr"); head.append(el("th", {}, "invariant"));
    shown.forEach(b => head.append(el("th", {}, `batch ${b.batch_id}`))); t.append(head);
    broken.forEach(n => {
      const tr = el("tr"); tr.append(el("th", {}, n));
      shown.forEach(b => { const c = (b.violations || {})[n] || 0; tr.append(el("td", {class: c ? "bad" : "zero"}, String(c))); });
      t.append(tr);
    });
    const wrap = el("div", {class: "scroll"}); wrap.append(t); box.append(wrap);
    if (shown.length < r.batches.length) box.append(el("p", {class: "note"}, `the last ${shown.length} of ${r.batches.length} batches`));
  });
  if (!box.children.length) box.append(el("p", {class: "note"}, SERVED ? "No micro-batch yet." : "No micro-batches: these runs come from replemu run."));
}

function drawValidations() {
  const box = $("validations"); box.innerHTML = "";
  S.runs.forEach(r => {
    const rows = r.batches.flatMap(b => (b.validations || []).map(v => Object.assign({batch: b.batch_id}, v)));
    if (!rows.length) return;
    box.append(el("h3", {}, r.name));
    const failed = rows.filter(v => !v.success && !v.no_verdict);  // no_verdict: only not-expressible partitions failed it
    const p = el("p", {class: "note"}, `${rows.length} expectation results, ${failed.length} failed. `);
    if (r.docs_index) p.append(el("a", {href: r.docs_index}, "GX Data Docs for this run"));
    box.append(p);
    const all = S.showAllChecks || rows.length <= 60;
    if (!all) {
      const b = el("button", {type: "button"}, `show all ${rows.length} results`);
      b.onclick = () => { S.showAllChecks = true; drawValidations(); };
      box.append(b);
    }
    const list = (all ? rows : rows.filter(v => !v.success)).slice(-3000);
    if (!list.length) return;
    const t = el("table"), head = el("tr"); ["batch", "invariant", "expectation", "result", "unexpected", "partitions", "docs"].forEach(h => head.append(el("th", {}, h))); t.append(head);
    list.forEach(v => {
      const tr = el("tr"); [v.batch, v.invariant, v.expectation].forEach(x => tr.append(el("td", {}, String(x))));
      tr.append(v.no_verdict ? el("td", {class: "nx", title: "only partitions their variant could not replay failed it: no verdict"}, "not expressible")
                             : el("td", {class: v.success ? "ok" : "bad"}, v.success ? "pass" : "FAIL"));
      const parts = el("td", {}, (v.partitions || []).join(" "));
      if ((v.not_expressible || []).length) parts.append(el("span", {class: "nx", title: "their variant could not replay them: no verdict"},
                                                            `${(v.partitions || []).length ? " " : ""}${v.not_expressible.join(" ")} (not expressible)`));
      tr.append(el("td", {}, String(v.unexpected_count)), parts);
      const d = el("td"); if (v.docs) d.append(el("a", {href: v.docs}, "page")); tr.append(d); t.append(tr);
    });
    const wrap = el("div", {class: "scroll"}); wrap.append(t); box.append(wrap);
  });
  if (!box.children.length) box.append(el("p", {class: "note"}, SERVED ? "No expectation results yet." : "No expectation results: these runs come from replemu run."));
}

// -- one partition: replaying the log ------------------------------------------------------------
function logsAt(ops, step) {
  const logs = {};
  for (const [seq, replica, op, offset, epoch, value, control] of ops) {
    if (seq > step) break;
    const log = logs[replica] || (logs[replica] = []);
    if (op === "append") { if (log.length > offset) log.length = offset; log.push(control ? [offset, epoch, value, 1] : [offset, epoch, value]); }
    else if (op === "truncate") { if (log.length > offset) log.length = offset; }
  }
  return logs;
}
const sameRecord = (a, b) => a && b && a[1] === b[1] && a[2] === b[2];

function findingsAt(d, step) {
  return {
    violations: (d.violations || []).filter(v => v.step === step),
    losses: (d.losses || []).filter(l => l.step === step),
    errors: (d.errors || []).filter(e => e.step === step),
  };
}

function interestingSteps(d) {
  const tl = d.timeline, out = new Set();
  if (!tl) return out;
  (d.violations || []).forEach(v => out.add(v.step)); (d.losses || []).forEach(l => out.add(l.step));
  Object.values(tl.replicas).forEach(rep => rep.leo.forEach((v, i) => { if (i && v < rep.leo[i - 1]) out.add(tl.steps[i]); }));
  (d.log || []).forEach(o => { if (o[2] === "truncate") out.add(o[0]); });
  return out;
}

function drawStepEvent(d, i) {
  const box = $("step-event"); box.innerHTML = "";
  const tl = d.timeline, step = tl.steps[i];
  const line = el("div");
  line.append(`Step ${step} (${i + 1} of ${tl.steps.length}): `, el("span", {class: "ev"}, String(tl.events[i])));
  const u = unitOf(d) === "server" ? "s" : "r";
  line.append(`  · leader ${tl.leader[i] === null ? "none" : u + tl.leader[i]}, ${isQuorum(d) ? "epoch" : "controller epoch"} ${tl.epoch[i]}`);
  if (tl.voters) line.append(`, voters [${(tl.voters[i] || []).join(", ")}]${i > 0 && JSON.stringify(tl.voters[i]) !== JSON.stringify(tl.voters[i - 1]) ? " (changed at this step)" : ""}`);
  box.append(line);
  const first = (d.violations || []).reduce((m, v) => (m === null || v.step < m ? v.step : m), null);
  box.classList.toggle("violation", first !== null && step === first);
  const f = findingsAt(d, step);
  if (d.log) {
    const before = i > 0 ? logsAt(d.log, tl.steps[i - 1]) : {}, now = logsAt(d.log, step);
    Object.keys(tl.replicas).forEach(r => {
      const a = before[r] || [], b = now[r] || [];
      const gone = a.filter((rec, k) => !sameRecord(b[k], rec));
      if (gone.length) box.append(el("div", {class: "cut"}, `✂ ${unitOf(d)} ${r} truncated its log to offset ${gone[0][0]}: removed ${gone.map(x => `${x[2]} (offset ${x[0]}, epoch ${x[1]})`).join(", ")}`));
    });
  }
  f.losses.forEach(l => box.append(el("div", {class: l.allowed ? "lost allowed" : "lost"}, `✖ lost record ${l.value} at offset ${l.offset}${l.acked ? " (acked)" : ""}${l.allowed ? " (allowed: unclean election or power loss of the last ISR member)" : ""}`)));
  f.violations.forEach(v => box.append(el("div", {class: "bad"}, `⚠ ${v.invariant}${v.step === first ? " (the first violation)" : ""}: ${v.detail || ""}`)));
  if (f.errors.length) box.append(el("div", {}, `error answers: ${f.errors.map(e => (e.api ? `${u}${e.server} ${e.api} ` : "") + e.error).join(", ")}`));
}

function drawLogPicture(d, i) {
  const box = $("logpic"); box.innerHTML = "";
  const tl = d.timeline;
  if (!d.log) { box.append(el("p", {class: "note"}, `No log data for this ${isQuorum(d) ? "scenario" : "partition"} (run \`replemu run --json --trace\` to include it).`)); return; }
  const step = tl.steps[i], ids = Object.keys(tl.replicas), unit = unitOf(d), quorum = isQuorum(d);
  const broken = (d.violations || []).filter(v => v.step === step).map(v => v.invariant);
  const now = logsAt(d.log, step), before = i > 0 ? logsAt(d.log, tl.steps[i - 1]) : {};
  const leader = tl.leader[i] === null || tl.leader[i] === undefined ? null : String(tl.leader[i]);
  const leaderLog = leader !== null ? (now[leader] || []) : null;
  let end = 1;
  ids.forEach(r => { const rep = tl.replicas[r]; end = Math.max(end, (now[r] || []).length, (before[r] || []).length, rep.leo[i], rep.hw[i]); });
  const start = Math.max(0, end - MAX_BOXES);
  const CELL = 38, BOX = 34, LABELW = 180, TOP = 22, ROWH = 66, PAD = 8;
  const W = PAD + (end - start) * CELL + 50, H = TOP + ids.length * ROWH + 6;
  const X = off => PAD + (off - start) * CELL;
  const labels = svgEl("svg", {width: LABELW, height: H, id: "logpic-labels"});
  const svg = svgEl("svg", {width: W, height: H, id: "logpic-svg", role: "img", "data-step": step, "aria-label": `logs after step ${step}`,
                            ...(broken.length ? {"data-violation": broken.join(","), class: "violation"} : {})});
  const every = end - start > 60 ? 5 : 1;
  for (let o = start; o < end; o++) if (o % every === 0) svg.append(svgEl("text", {x: X(o) + BOX / 2, y: 14, "text-anchor": "middle", "font-size": 10, fill: "#666"}, String(o)));
  labels.append(svgEl("text", {x: LABELW - 6, y: 14, "font-size": 10, fill: "#666", "text-anchor": "end"}, "offset"));
  const epochs = new Set();
  ids.forEach((r, k) => {
    const rep = tl.replicas[r], y0 = TOP + k * ROWH, alive = rep.alive[i], isLeader = r === leader && alive;
    const band = isLeader ? "#fff5cc" : (alive ? "#fafafa" : "#ececec");
    const g = svgEl("g", {class: "replica", "data-replica": r, "data-len": (now[r] || []).length, "data-hw": rep.hw[i], "data-leo": rep.leo[i], "data-leader": isLeader ? "1" : "0"});
    g.append(svgEl("rect", {x: 0, y: y0, width: W, height: ROWH - 4, fill: band}));
    labels.append(svgEl("rect", {x: 0, y: y0, width: LABELW, height: ROWH - 4, fill: band}));
    if (isLeader) labels.append(svgEl("rect", {x: 0, y: y0, width: 5, height: ROWH - 4, fill: "#e0a800"}));
    const roleText = quorum ? (alive ? ` ${rep.role[i]}` : " ✖ stopped") : (alive ? (rep.role[i] === "follower" ? " follower" : "") : " ✖ down");
    labels.append(svgEl("text", {x: 12, y: y0 + 22, "font-size": 14, "font-weight": isLeader ? "bold" : "normal", fill: alive ? "#111" : "#777", class: "replica-label", "data-replica": r, "data-role": alive ? rep.role[i] : "down"},
                        `${unit} ${r}${isLeader ? " ★ leader" : roleText}`));
    labels.append(svgEl("text", {x: 12, y: y0 + 40, "font-size": 11, fill: "#555"}, `epoch ${rep.epoch[i]} · LEO ${rep.leo[i]} · HW ${rep.hw[i]}`));
    if (rep.voters) labels.append(svgEl("text", {x: 12, y: y0 + 55, "font-size": 10, fill: "#7b3fa0"}, `voters [${(rep.voters[i] || []).join(",")}]${rep.voter && !rep.voter[i] ? " (not one)" : ""}`));
    const log = now[r] || [], prev = before[r] || [];
    log.forEach((rec, k2) => {
      const [off, ep, val, control] = rec;
      if (off < start) return;
      epochs.add(ep);
      const isNew = !sameRecord(prev[k2], rec), replaced = isNew && prev[k2];
      const differs = leaderLog && r !== leader && leaderLog[k2] && !sameRecord(leaderLog[k2], rec);
      const x = X(off), y = y0 + 14;
      const cell = svgEl("g", {class: control ? "rec ctl" : "rec", "data-offset": off, "data-epoch": ep, "data-value": val, ...(control ? {"data-control": String(val).split("[")[0]} : {})});
      cell.append(svgEl("rect", {x, y, width: BOX, height: BOX, rx: control ? 10 : 3, fill: epochColor(ep), stroke: differs ? "#d00" : (isNew ? "#111" : "#fff"),
                                 "stroke-width": differs || isNew ? 2.5 : 1, "stroke-dasharray": differs ? "4,2" : "none"}));
      const ink = darkText(ep) ? "#111" : "#fff";
      if (control) cell.append(svgEl("path", {d: `M${x + BOX - 11},${y} h11 v11 z`, fill: "#111"}));  // a control record's corner
      cell.append(svgEl("text", {x: x + BOX / 2, y: y + 16, "text-anchor": "middle", "font-size": 11, "font-weight": "bold", fill: ink},
                        control ? (String(val).startsWith("VotersRecord") ? "VS" : "LC") : String(val).slice(0, 5)));
      cell.append(svgEl("text", {x: x + BOX / 2, y: y + 29, "text-anchor": "middle", "font-size": 9, fill: ink}, `e${ep}`));
      if (replaced) cell.append(svgEl("text", {x: x + 1, y: y - 1, "font-size": 10, fill: "#8a4b00"}, "✂"));
      title(cell, `${unit} ${r}, offset ${off}, epoch ${ep}, value ${val}${isNew ? (replaced ? ` (replaces ${prev[k2][2]} e${prev[k2][1]} at this step)` : " (appended at this step)") : ""}${differs ? `; differs from leader ${leader}'s ${leaderLog[k2][2]} e${leaderLog[k2][1]}` : ""}`);
      g.append(cell);
    });
    prev.forEach((rec, k2) => {   // truncated at this step: drawn once, as a ghost
      if (k2 < log.length || rec[0] < start) return;
      const x = X(rec[0]), y = y0 + 14;
      const ghost = svgEl("g", {class: "ghost", "data-offset": rec[0]});
      ghost.append(svgEl("rect", {x, y, width: BOX, height: BOX, rx: 3, fill: "none", stroke: "#8a4b00", "stroke-width": 1.5, "stroke-dasharray": "3,3"}));
      ghost.append(svgEl("text", {x: x + BOX / 2, y: y + 16, "text-anchor": "middle", "font-size": 11, fill: "#8a4b00", "text-decoration": "line-through"}, String(rec[2]).slice(0, 5)));
      ghost.append(svgEl("text", {x: x + BOX / 2, y: y + 29, "text-anchor": "middle", "font-size": 9, fill: "#8a4b00"}, "✂ cut"));
      title(ghost, `${unit} ${r} truncated ${rec[2]} (offset ${rec[0]}, epoch ${rec[1]}) at this step`);
      g.append(ghost);
    });
    const hw = rep.hw[i], leo = rep.leo[i];
    if (hw >= start) {
      const hx = X(hw) - 2;
      g.append(title(svgEl("line", {class: "hw", x1: hx, x2: hx, y1: y0 + 8, y2: y0 + 52, stroke: "#0050c8", "stroke-width": 3}), `HW ${hw}`));
      g.append(svgEl("text", {x: hx + 3, y: y0 + 10, "font-size": 10, "font-weight": "bold", fill: "#0050c8"}, `HW ${hw}`));
    }
    if (leo >= start) {
      const lx = X(leo) - 2;
      g.append(title(svgEl("line", {class: "leo", x1: lx, x2: lx, y1: y0 + 10, y2: y0 + 58, stroke: "#111", "stroke-width": 2, "stroke-dasharray": "4,2"}), `LEO ${leo}`));
      g.append(svgEl("text", {x: lx + 3, y: y0 + 59, "font-size": 10, "font-weight": "bold", fill: "#111"}, `LEO ${leo}`));
    }
    svg.append(g);
  });
  const row = el("div", {class: "logpic-row"}), wrap = el("div", {class: "scroll", id: "logpic-scroll"});
  wrap.append(svg); row.append(labels, wrap); box.append(row);
  if (start > 0) box.append(el("p", {class: "note"}, `offsets 0 to ${start - 1} are not drawn (the last ${MAX_BOXES} offsets are)`));
  if (broken.length) box.prepend(el("p", {class: "bad violation-note"}, `⚠ after this step: ${broken.join(", ")} broken`));
  const legend = el("p", {class: "legend"});
  [...epochs].sort((a, b) => a - b).forEach(e => { const s = el("span", {}, `■ epoch ${e}`); s.style.color = epochColor(e); legend.append(s); });
  if (quorum) legend.append(el("span", {}, "◥ rounded: control record (LC LeaderChange, VS VotersRecord; hover for the voters)"));
  legend.append(el("span", {}, "blue bar: HW"), el("span", {}, "dashed bar: LEO"), el("span", {}, "★ leader"),
                el("span", {}, "black outline: appended at this step"), el("span", {}, "red dashed: differs from the leader"), el("span", {}, "✂: truncated at this step"));
  box.append(legend);
  wrap.scrollLeft = S.logScroll === null ? wrap.scrollWidth : S.logScroll;   // follow the log's end unless scrolled back
  wrap.addEventListener("scroll", () => { S.logScroll = wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 4 ? null : wrap.scrollLeft; });
}

// -- one partition: the timeline (per replica LEO and HW over the steps) -------------------------
function drawTimeline(d) {
  const box = $("timeline"); box.innerHTML = "";
  const tl = d.timeline;
  if (!tl) { box.append(el("p", {class: "note"}, `No per-step data for this ${unitOf(d) === "server" ? "scenario" : "partition"} (run \`replemu run --json --trace\` to include it).`)); return; }
  const ids = Object.keys(tl.replicas), n = tl.steps.length, unit = unitOf(d), quorum = isQuorum(d);
  let maxY = 1; ids.forEach(r => tl.replicas[r].leo.forEach(v => { if (v > maxY) maxY = v; }));
  (d.losses || []).forEach(l => { if (l.offset + 1 > maxY) maxY = l.offset + 1; });
  const dx = n <= 100 ? 40 : Math.max(6, Math.min(40, 6000 / n));
  const CH = 320, L = 50, B = 40, T = 30, ROW = 18, STRIP = CH - B + 24;  // the chart, then one role row per replica
  const W = Math.max(640, dx * n + 80), H = STRIP + ids.length * ROW + 8;
  const x = i => L + (n <= 1 ? 0 : i * (W - L - 20) / (n - 1)), y = v => CH - B - v * (CH - B - T) / maxY;
  const half = n <= 1 ? 10 : (W - L - 20) / (n - 1) / 2;
  const svg = svgEl("svg", {width: W, height: H, role: "img", id: "timeline-svg", "data-family": quorum ? "quorum" : "partition"});
  for (let v = 0; v <= maxY; v += Math.max(1, Math.ceil(maxY / 8))) {
    svg.append(svgEl("line", {x1: L, x2: W - 10, y1: y(v), y2: y(v), stroke: "#eee"}));
    svg.append(svgEl("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11}, String(v)));
  }
  const labelEvery = Math.max(1, Math.ceil(30 / dx));
  svg.append(svgEl("rect", {id: "tl-cursor", x: x(0) - Math.max(2, dx / 2), y: T - 10, width: Math.max(4, dx), height: H - T + 6, fill: "#ffe680", opacity: 0.6}));
  // violations: a red band at each step where an invariant first broke; the first one stands out
  const vsteps = [...new Set((d.violations || []).map(v => v.step))].sort((a, b) => a - b);
  vsteps.forEach((s, k) => {
    const i = tl.steps.indexOf(s); if (i < 0) return;
    const names = (d.violations || []).filter(v => v.step === s).map(v => v.invariant);
    const mark = svgEl("g", {class: `violation-mark${k === 0 ? " first" : ""}`, "data-step": s, "data-invariants": names.join(","), ...(k === 0 ? {id: "first-violation"} : {})});
    mark.append(svgEl("rect", {x: x(i) - Math.max(3, half), y: T - 10, width: Math.max(6, 2 * half), height: H - T + 6, fill: "#d00", opacity: k === 0 ? 0.28 : 0.15}));
    mark.append(svgEl("text", {x: x(i), y: T + 4, "text-anchor": "middle", "font-size": 14, fill: "#b00", "font-weight": "bold"}, "\u26A0"));
    svg.append(title(mark, `step ${s}: ${names.join(", ")} broken${k === 0 ? " (the first violation)" : ""}`));
  });
  tl.steps.forEach((s, i) => {
    const changed = i === 0 || tl.leader[i] !== tl.leader[i - 1] || tl.epoch[i] !== tl.epoch[i - 1];
    if (i % labelEvery === 0) svg.append(svgEl("text", {x: x(i), y: CH - B + 14, "text-anchor": "middle", "font-size": 10}, String(s)));
    if (changed) {
      svg.append(svgEl("line", {x1: x(i), x2: x(i), y1: T - 10, y2: CH - B, stroke: "#999", "stroke-dasharray": "2,3"}));
      svg.append(svgEl("text", {x: x(i) + 2, y: T - 14, "font-size": 10, fill: "#555"}, `e${tl.epoch[i]} L${tl.leader[i] === null ? "-" : tl.leader[i]}`));
    }
  });
  if (tl.voters) {   // the quorum's voter set (as its leader's log has it): each change marked
    tl.voters.forEach((v, i) => {
      if (i > 0 && JSON.stringify(v) === JSON.stringify(tl.voters[i - 1])) return;
      const g = svgEl("g", {class: "voters-mark", "data-step": tl.steps[i], "data-voters": (v || []).join(",")});
      if (i > 0) g.append(svgEl("line", {x1: x(i), x2: x(i), y1: T - 4, y2: CH - B, stroke: "#7b3fa0", "stroke-width": 2, "stroke-dasharray": "6,3"}));
      g.append(svgEl("text", {x: x(i) + 3, y: T - 2, "font-size": 10, fill: "#7b3fa0", "font-weight": "bold"}, `voters ${(v || []).join(",")}`));
      svg.append(title(g, i > 0 ? `step ${tl.steps[i]}: the voter set becomes [${(v || []).join(", ")}]` : `voter set at the start: [${(v || []).join(", ")}]`));
    });
  }
  ids.forEach((r, k) => {
    const rep = tl.replicas[r], c = COLORS[k % COLORS.length];
    const path = key => rep[key].map((v, i) => `${i ? "L" : "M"}${x(i)},${y(v)}`).join(" ");
    svg.append(svgEl("path", {d: path("leo"), fill: "none", stroke: c, "stroke-width": 2}));
    svg.append(svgEl("path", {d: path("hw"), fill: "none", stroke: c, "stroke-width": 1.5, "stroke-dasharray": "5,3"}));
    rep.leo.forEach((v, i) => {
      if (i > 0 && v < rep.leo[i - 1]) svg.append(title(svgEl("circle", {cx: x(i), cy: y(v), r: 6, fill: "none", stroke: "#d00", "stroke-width": 2}), `${unit} ${r} truncated ${rep.leo[i - 1]} -> ${v} at step ${tl.steps[i]}`));
      if (!rep.alive[i]) svg.append(svgEl("rect", {x: x(i) - 3, y: y(v) - 3, width: 6, height: 6, fill: c, opacity: 0.4}));
    });
    // the role strip: the replica's role and epoch over the steps, one segment per unchanged run
    const y0 = STRIP + k * ROW, row = svgEl("g", {class: "role-row", "data-replica": r});
    row.append(svgEl("text", {x: L - 6, y: y0 + 12, "text-anchor": "end", "font-size": 11, fill: c, "font-weight": "bold"}, `${unit === "server" ? "s" : "r"}${r}`));
    let from = 0;
    for (let i = 1; i <= n; i++) {
      if (i < n && roleAt(rep, i) === roleAt(rep, from) && rep.epoch[i] === rep.epoch[from]) continue;
      const role = roleAt(rep, from), x1 = x(from) - half, x2 = x(i - 1) + half;
      const seg = svgEl("g", {class: "role-seg", "data-replica": r, "data-role": role, "data-epoch": rep.epoch[from], "data-from": tl.steps[from], "data-to": tl.steps[i - 1]});
      seg.append(svgEl("rect", {x: x1, y: y0, width: Math.max(1, x2 - x1), height: ROW - 3, fill: ROLE_COLORS[role] || "#ccc", stroke: "#fff", "stroke-width": 0.5}));
      if (x2 - x1 > 26) seg.append(svgEl("text", {x: x1 + 3, y: y0 + 11, "font-size": 9, fill: ["stopped", "down", "resigned"].includes(role) ? "#fff" : "#222"}, `${ROLE_ABBR[role] || role} e${rep.epoch[from]}`));
      row.append(title(seg, `${unit} ${r}: ${role}, epoch ${rep.epoch[from]}, steps ${tl.steps[from]}\u2013${tl.steps[i - 1]}`));
      from = i;
    }
    if (rep.voters) rep.voters.forEach((v, i) => {   // this server's own view of the voter set changes
      if (i === 0 || JSON.stringify(v) === JSON.stringify(rep.voters[i - 1])) return;
      row.append(title(svgEl("path", {class: "voters-seen", d: `M${x(i)},${y0 + 1} l4,7 l-4,7 l-4,-7 z`, fill: "#7b3fa0", stroke: "#fff"}),
                       `step ${tl.steps[i]}: ${unit} ${r} now has voter set [${v.join(", ")}]`));
    });
    svg.append(row);
  });
  (d.losses || []).forEach(l => {
    const i = Math.max(0, tl.steps.indexOf(l.step));
    svg.append(title(svgEl("text", {x: x(i), y: y(l.offset + 0.5) + 5, "text-anchor": "middle", fill: l.allowed ? "#e08000" : "#d00", "font-size": 16, "font-weight": "bold"}, "\u2716"),
                     `lost ${l.value} at offset ${l.offset} (step ${l.step}${l.acked ? ", acked" : ""}${l.allowed ? ", allowed" : ""})`));
  });
  svg.addEventListener("click", ev => {
    const rect = svg.getBoundingClientRect(), px = ev.clientX - rect.left;
    const i = n <= 1 ? 0 : Math.round((px - L) * (n - 1) / (W - L - 20));
    setStep(Math.max(0, Math.min(n - 1, i)));
  });
  svg.style.cursor = "pointer";
  const wrap = el("div", {class: "scroll", id: "timeline-scroll"}); wrap.append(svg); box.append(wrap);
  const legend = el("p", {class: "legend"});
  ids.forEach((r, k) => { const s = el("span", {}, `\u25A0 ${unit} ${r}: LEO solid, HW dashed`); s.style.color = COLORS[k % COLORS.length]; legend.append(s); });
  legend.append(el("span", {}, "\u25CB truncation"));
  if (!quorum) legend.append(el("span", {}, "\u2716 lost record (orange: allowed)"));
  legend.append(el("span", {}, "dashed vertical: leader/epoch change"));
  if (tl.voters) { const s = el("span", {}, "purple: voter set change (\u25C6 a server's own view)"); s.style.color = "#7b3fa0"; legend.append(s); }
  if (vsteps.length) { const s = el("span", {}, "\u26A0 red band: an invariant broken (darker: the first)"); s.style.color = "#b00"; legend.append(s); }
  legend.append(el("span", {}, "yellow: the step shown above (click to move)"));
  box.append(legend);
  const roles = el("p", {class: "legend roles"}); roles.append("roles: ");
  [...new Set(ids.flatMap(r => tl.steps.map((_, i) => roleAt(tl.replicas[r], i))))].forEach(role => {
    const s = el("span", {class: "role-key"}, `${ROLE_ABBR[role] || role} ${role}`); s.style.background = ROLE_COLORS[role] || "#ccc";
    if (["stopped", "down", "resigned"].includes(role)) s.style.color = "#fff";
    roles.append(s);
  });
  box.append(roles);
  const details = el("details", {id: "step-table"}); if (n <= 40) details.open = true;
  details.append(el("summary", {}, `step table (${n} steps)`));
  const table = el("table"), head = el("tr");
  ["step", "event", "leader", "epoch"].concat(tl.voters ? ["voters"] : []).concat(ids.map(r => `${unit === "server" ? "s" : "r"}${r} ${quorum ? "role " : ""}LEO/HW/e`)).forEach(h => head.append(el("th", {}, h))); table.append(head);
  tl.steps.forEach((s, i) => {
    const tr = el("tr", {class: `clickable${vsteps.includes(s) ? " violation" : ""}`, "data-index": i});
    [s, tl.events[i], tl.leader[i] === null ? "-" : tl.leader[i], tl.epoch[i]].concat(tl.voters ? [(tl.voters[i] || []).join(",")] : []).forEach(v => tr.append(el("td", {}, String(v))));
    ids.forEach(r => { const rep = tl.replicas[r], role = roleAt(rep, i); tr.append(el("td", {}, `${quorum ? (ROLE_ABBR[role] || role) : (rep.alive[i] ? ({leader: "L", follower: "F"}[rep.role[i]] || "-") : "x")} ${rep.leo[i]}/${rep.hw[i]}/e${rep.epoch[i]}`)); });
    tr.onclick = () => setStep(i);
    table.append(tr);
  });
  details.append(table);
  if (quorum) details.append(el("p", {class: "note"}, "roles: " + Object.keys(ROLE_ABBR).filter(k => !["none", "down"].includes(k)).map(k => `${ROLE_ABBR[k]} ${k}`).join(", ")));
  box.append(details);
}

function moveTimelineCursor(i) {
  const svg = $("timeline-svg"), cur = $("tl-cursor"), d = S.detail;
  if (!svg || !cur || !d || !d.timeline) return;
  const n = d.timeline.steps.length, W = Number(svg.getAttribute("width")), L = 50;
  const dx = n <= 100 ? 40 : Math.max(6, Math.min(40, 6000 / n));
  const x = L + (n <= 1 ? 0 : i * (W - L - 20) / (n - 1));
  cur.setAttribute("x", x - Math.max(2, dx / 2));
  const wrap = $("timeline-scroll");
  if (wrap && (x < wrap.scrollLeft + 60 || x > wrap.scrollLeft + wrap.clientWidth - 60)) wrap.scrollLeft = Math.max(0, x - wrap.clientWidth / 2);
  document.querySelectorAll("#step-table tr.current").forEach(tr => tr.classList.remove("current"));
  const row = document.querySelector(`#step-table tr[data-index="${i}"]`); if (row) row.classList.add("current");
}

// -- the stepper ----------------------------------------------------------------------------------
function setStep(i) {
  const d = S.detail;
  if (!d || !d.timeline) return;
  const n = d.timeline.steps.length;
  S.stepIdx = Math.max(0, Math.min(n - 1, i));
  S.followLast = S.stepIdx === n - 1;
  $("step-slider").max = String(n - 1); $("step-slider").value = String(S.stepIdx);
  $("step-label").textContent = `step ${d.timeline.steps[S.stepIdx]} of ${d.timeline.steps[n - 1]}`;
  drawStepEvent(d, S.stepIdx);
  drawLogPicture(d, S.stepIdx);
  moveTimelineCursor(S.stepIdx);
  writeHash();
}

function nextFinding() {
  const d = S.detail; if (!d || !d.timeline) return;
  const marks = interestingSteps(d), steps = d.timeline.steps;
  for (let i = S.stepIdx + 1; i < steps.length; i++) if (marks.has(steps[i])) { setStep(i); return; }
  for (let i = 0; i <= S.stepIdx; i++) if (marks.has(steps[i])) { setStep(i); return; }
}

function setupStepper() {
  $("step-first").onclick = () => setStep(0);
  $("step-prev").onclick = () => setStep(S.stepIdx - 1);
  $("step-next").onclick = () => setStep(S.stepIdx + 1);
  $("step-last").onclick = () => setStep(Infinity);
  $("step-find").onclick = nextFinding;
  $("step-slider").addEventListener("input", e => setStep(Number(e.target.value)));
  document.addEventListener("keydown", e => {
    const t = e.target, tag = t && t.tagName;
    if (t && (tag === "SELECT" || tag === "TEXTAREA" || (tag === "INPUT" && t.type !== "button") || t.isContentEditable)) return;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (!S.detail || !S.detail.timeline) return;
    const moves = {ArrowLeft: () => setStep(S.stepIdx - 1), ArrowRight: () => setStep(S.stepIdx + 1), Home: () => setStep(0), End: () => setStep(Infinity)};
    if (moves[e.key]) { e.preventDefault(); moves[e.key](); }
  });
}

function drawPartition(keepStep) {
  const d = S.detail, info = $("partition-info");
  info.innerHTML = "";
  $("stepper").hidden = !(d && d.timeline);
  ["step-event", "logpic", "timeline"].forEach(id => { $(id).innerHTML = ""; });
  if (!d) { info.textContent = S.key ? "" : "No partition."; return; }
  if (d.not_expressible) {  // no verdict to show: the step the variant could not take, and why
    info.textContent = `(scenario ${d.scenario}): ${d.not_expressible.text}; no verdict` + (d.problem ? `; ${d.problem}` : "");
    info.dataset.status = "not expressible";
    if (!d.timeline && !d.notEmbedded) { $("logpic").append(el("p", {class: "note"}, `No steps to draw: the variant stopped at step ${d.not_expressible.step}.`)); return; }
  } else delete info.dataset.status;
  const names = d.notEmbedded ? (d.violated || []).map(n => `${n} @${(d.first || {})[n]}`) : (d.violations || []).map(v => `${v.invariant} @${v.step}`);
  const lost = d.notEmbedded ? d.lost : (d.losses || []).length;
  if (!d.not_expressible) info.textContent = `(scenario ${d.scenario}, ${d.steps} steps): ` + (names.join(", ") || "no invariant violated") +
                                            (lost ? `; ${lost} lost records` : "") + (d.problem ? `; ${d.problem}` : "");
  if (d.notEmbedded) {
    $("logpic").append(el("p", {class: "note"}, "This partition's steps are not embedded in this static page (it embeds 50: the chosen one, then those with findings). Open it with replemu serve, or export again with --partition."));
    return;
  }
  drawTimeline(d);
  if (!d.timeline) { drawLogPicture(d, 0); return; }
  const n = d.timeline.steps.length;
  let i = keepStep === undefined || S.followLast ? n - 1 : keepStep;
  setStep(Math.min(i, n - 1));
}

async function openPartition(key, stepNumber) {
  const r = run();
  if (S.key !== key) S.logScroll = null;
  S.key = key;
  document.querySelectorAll(".pchip.current").forEach(a => a.classList.remove("current"));
  const chip = document.querySelector(`.pchip[data-key="${CSS.escape(key || "")}"]`); if (chip) chip.classList.add("current");
  if ($("partition").value !== key && key) $("partition").value = key;
  const token = ++S.openToken;
  const d = key ? await loadDetail(r, key) : null;
  if (token !== S.openToken) return;  // asked again meanwhile: the last request wins
  S.detail = d; S.detailVersion = r ? r.version : null;
  if (stepNumber !== undefined && d && d.timeline) {
    let i = d.timeline.steps.findIndex(s => s >= stepNumber);
    if (i < 0) i = d.timeline.steps.length - 1;
    S.followLast = false;
    drawPartition(i);
  } else {
    S.followLast = true;
    drawPartition();
  }
}

function fillPartitionSelect() {
  const r = run(), sel = $("partition");
  const sig = r ? r.id + "|" + r.partitions.map(p => p.key + p.status).join(",") : "";
  if (sel.dataset.sig === sig) return;
  sel.dataset.sig = sig; sel.innerHTML = "";
  if (!r) return;
  r.partitions.forEach(p => sel.append(el("option", {value: p.key}, p.key + (p.status !== "ok" ? ` \u26A0 ${p.status}` : ""))));
  if (S.key && partitionEntry(r, S.key)) sel.value = S.key;
}

function defaultPartition(r) {
  if (!r || !r.partitions.length) return null;
  const chosen = r.partitions.find(p => p.key === BOOT.chosen || p.scenario === BOOT.chosen);
  if (chosen) return chosen.key;
  const bad = r.partitions.find(p => p.status !== "ok" && p.status !== "not expressible");
  return (bad || r.partitions[0]).key;
}

function fillRunSelect() {
  const sel = $("run"), sig = S.runs.map(r => r.id + r.name).join("|");
  if (sel.dataset.sig !== sig) {
    sel.dataset.sig = sig; sel.innerHTML = "";
    S.runs.forEach(r => sel.append(el("option", {value: r.id}, r.name)));
  }
  if (S.runId) sel.value = S.runId;
}

// -- location hash: #run=ID&p=TOPIC/P&s=STEP ------------------------------------------------------
function hashFor(runId, key, step) {
  const q = new URLSearchParams({run: runId, p: key});
  if (step !== undefined && step !== null) q.set("s", String(step));
  return "#" + q.toString();
}
function writeHash() {
  const d = S.detail;
  if (!S.key || !d || !d.timeline) return;
  const h = hashFor(S.runId, S.key, d.timeline.steps[S.stepIdx]);
  if (location.hash !== h) history.replaceState(null, "", h);
}
function readHash() {
  const h = location.hash.replace(/^#/, "");
  if (!h.includes("=")) return null;
  const q = new URLSearchParams(h);
  return {run: q.get("run"), key: q.get("p"), step: q.has("s") ? Number(q.get("s")) : undefined};
}
async function applyHash(h) {
  if (!h || !h.key) return false;
  const r = S.runs.find(x => x.id === h.run);
  if (!r || !partitionEntry(r, h.key)) { S.pendingHash = h; return false; }
  S.pendingHash = null;
  if (S.runId !== r.id) { S.runId = r.id; fillRunSelect(); drawJob(); fillPartitionSelect(); }
  await openPartition(h.key, h.step);
  $("partition-view").scrollIntoView({block: "start"});
  return true;
}

// -- the banner: violations that appear while the page is open -------------------------------------
function violationIds() {
  const ids = new Map();
  S.runs.forEach(r => r.partitions.forEach(p => p.violated.forEach(n => ids.set(`${r.id}|${p.key}|${n}`, {r, p, n}))));
  return ids;
}
function updateBanner() {
  const ids = violationIds();
  if (S.seen !== null) {
    const groups = new Map();
    [...ids.keys()].filter(k => !S.seen.has(k)).forEach(k => {
      const {r, p, n} = ids.get(k), g = groups.get(r.id + "|" + p.key) || {r, p, names: []};
      g.names.push(n); groups.set(r.id + "|" + p.key, g);
    });
    if (groups.size) {
      S.news = [...groups.values(), ...S.news.filter(g => !groups.has(g.r.id + "|" + g.p.key))];
      S.newsCount += [...groups.values()].reduce((a, g) => a + g.names.length, 0);
      drawBanner();
    }
  }
  S.seen = new Set([...(S.seen || []), ...ids.keys()]);  // cumulative: a final-tier finding that comes back is not new
}

function drawBanner() {
  const banner = $("banner"); banner.innerHTML = "";
  if (!S.news.length) { banner.hidden = true; return; }
  const head = el("p");
  head.append(el("strong", {}, `⚠ ${S.newsCount} new violation${S.newsCount > 1 ? "s" : ""} since this page opened`));
  const close = el("button", {type: "button", id: "banner-close"}, "dismiss");
  close.onclick = () => { S.news = []; S.newsCount = 0; drawBanner(); };
  head.append(close); banner.append(head);
  S.news.slice(0, 5).forEach(({r, p, names}) => {
    const steps = names.map(n => (p.first || {})[n]).filter(x => x !== undefined);
    const line = el("p", {class: "new-violation"});
    line.append(`${r.protocol || r.name} `, el("a", {href: hashFor(r.id, p.key, steps.length ? Math.min(...steps) : undefined)}, p.key),
                `: ${names.join(", ")}${steps.length ? ` (step ${Math.min(...steps)})` : ""}`);
    banner.append(line);
  });
  if (S.news.length > 5) banner.append(el("p", {class: "note"}, `… and ${S.news.length - 5} more partitions`));
  banner.hidden = false;
}

// -- putting it together ----------------------------------------------------------------------------
function drawAll() {
  fillRunSelect();
  drawJob();
  drawMatrix();
  drawBatches();
  drawValidations();
  fillPartitionSelect();
  const started = S.runs.some(r => r.batches.length || r.partitions.length);
  $("waiting").hidden = !SERVED || started;
}

async function tick(first) {
  let result;
  try {
    result = await refreshServed();
  } catch (err) {
    $("live").textContent = `connection to replemu serve lost (${err.message}); retrying every ${(BOOT.poll_ms || 2000) / 1000} s`;
    $("live").classList.add("lost");
    return;
  }
  $("live").classList.remove("lost");
  const total = S.runs.reduce((a, r) => a + r.batches.length, 0);
  $("live").textContent = `live: following ${BOOT.root || "the job"}; checked ${new Date().toLocaleTimeString()}; ${total} micro-batches landed`;
  if (!S.runId || !S.runs.some(r => r.id === S.runId)) S.runId = S.runs.length ? S.runs[0].id : null;
  if (first || result.changed.length) {
    drawAll();
    updateBanner();
  }
  if (S.pendingHash) await applyHash(S.pendingHash);
  const r = run();
  if (!S.key && r && r.partitions.length) await openPartition(defaultPartition(r));
  else if (S.key && r && result.changed.includes(r.id) && S.detailVersion !== r.version) {
    const keep = S.stepIdx, key = S.key, token = ++S.openToken;
    const d = await loadDetail(r, key);
    if (token === S.openToken) { S.detail = d; S.detailVersion = r.version; drawPartition(keep); }
  }
}

async function main() {
  setupStepper();
  $("run").onchange = async () => { S.runId = $("run").value; S.key = null; S.filter = null; drawJob(); fillPartitionSelect(); await openPartition(defaultPartition(run())); };
  $("partition").onchange = () => openPartition($("partition").value);
  window.addEventListener("hashchange", () => applyHash(readHash()));
  if (SERVED) {
    $("mode-note").textContent = "Served by replemu serve: the page follows the job (it polls for new micro-batches).";
    S.pendingHash = readHash();
    await tick(true);
    document.body.dataset.rendered = "ok";
    const poll = async () => { try { await tick(false); } finally { setTimeout(poll, BOOT.poll_ms || 2000); } };
    setTimeout(poll, BOOT.poll_ms || 2000);
  } else {
    $("mode-note").textContent = "Self-contained page: data, styles and scripts are inlined; nothing is loaded from the network.";
    S.runs = BOOT.runs;
    S.runId = S.runs.length ? S.runs[0].id : null;
    const h = readHash();
    drawAll();
    S.seen = null;
    if (!(h && await applyHash(h))) await openPartition(defaultPartition(run()));
    document.body.dataset.rendered = "ok";
  }
}

main();
})();
