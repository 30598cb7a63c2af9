"""The dashboard's views and their data: ``replemu dashboard`` (a static export) and ``replemu serve``.

One page (``replemu/assets/page.html``, ``app.js``, ``style.css``) renders every view client-side
from JSON.  ``replemu dashboard`` inlines that JSON, the CSS and the script into one
self-contained HTML file (it loads nothing from the network); ``replemu serve``
(``replemu/serve.py``) serves the same page and lets the script fetch the same JSON from small
endpoints, piece by piece, while a job runs.  Both build their JSON with the functions here.

Inputs: stream output directories (``OUTPUT`` of ``replemu stream``, or the parent of the
per-variant directories of ``--protocol all``) and, for the static export, ``replemu run --json``
files (a result object or an array; with ``--trace`` they carry the per-step timeline and logs).

Views: the job (batches over time: input rows, duration, state bytes; partitions by status);
one partition (per replica LEO and HW over the steps, leader changes and epochs marked,
truncations and lost records highlighted; the log picture: every replica's records at any
step, coloured by epoch, with HW, LEO and the leader marked); a variant × invariant matrix
linking each invariant's first violation and its batch's GX validation page; per-invariant
violation counts over micro-batches; the expectation results per batch.

Reading a stream output (``RunReader``) goes by unit (``streaming.output_layout``: a fresh
``OUTPUT/<kind>/batch_id=N`` or a compacted ``batch_range=A-B``, the shadowing rule applied):
each is read once, split into its batches and cached under its inode and modification time (a
batch Spark replays, or a range, is swapped in by a rename, so it gets a new inode), so a page
that follows a running job reads only what landed since; a partition's rows are read with a
filter on (topic, partition), per unit, and cached per batch for the last partitions asked for.

``cmd_dashboard`` is the command ``replemu dashboard``.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import threading
from collections import OrderedDict
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from emulator.bounds import short_list
from emulator.families import FAMILIES, Family
from emulator.invariants import INVARIANT_NAMES
from emulator.partition_family import PARTITION
from emulator.result import ResultFormatError

from .cli_common import EXIT_OK, fail, output_problem

MAX_TIMELINES = 50  # partitions whose step timeline and log are embedded in a static page
STATUSES = ("ok", "violated", "lost data", "error", "not expressible")  # a partition's status, the job view's categories


class DashboardError(ValueError):
    pass


def asset_text(name: str) -> str:
    """A packaged page asset (``replemu/assets/NAME``)."""
    return resources.files("replemu").joinpath("assets", name).read_text(encoding="utf-8")


def partition_status(violated: list[str], lost: int, quarantined: int, not_expressible: bool = False) -> str:
    """``not expressible`` (its variant could not take one of its steps: no verdict at all, what
    followed that step is not the variant's behaviour), ``lost data`` (the partition lost records),
    ``violated`` (an invariant broke), ``error`` (rows of its input went to quarantine, so its
    results lack them), else ``ok``."""
    if not_expressible:
        return "not expressible"
    if lost:
        return "lost data"
    if violated:
        return "violated"
    if quarantined:
        return "error"
    return "ok"


# -- runs of ``replemu run --json`` (static export only) ---------------------------------------

def logs_at(ops: list[list], step: int, replicas: list[str] | None = None) -> dict[str, list[list]]:
    """Every replica's log (``[[offset, epoch, value], ...]``) after step ``step``: the ``log``
    operations up to it replayed (the page's script does the same; a quorum append's seventh
    element, its control flag, is not part of the record)."""
    from itertools import takewhile

    from streaming.results import replay_logs

    upto = takewhile(lambda o: o[0] <= step, ops)  # ops are in step order
    return replay_logs(((o[1], o[2], o[3], o[4], o[5]) for o in upto), replicas or [])[0]


def _summary_of(entry: dict[str, Any], quarantined: int = 0) -> dict[str, Any]:
    if entry.get("not_expressible"):  # no verdict: nothing violated, lost or first
        return {"violated": [], "lost": 0, "lost_allowed": 0, "quarantined": quarantined, "error_answers": 0,
                "status": partition_status([], 0, quarantined, not_expressible=True), "first": {}}
    violated = sorted({v["invariant"] for v in entry["violations"]})
    lost = len(entry["losses"])
    return {"violated": violated, "lost": lost, "lost_allowed": sum(1 for loss in entry["losses"] if loss.get("allowed")),
            "quarantined": quarantined, "error_answers": len(entry.get("errors") or []),
            "status": partition_status(violated, lost, quarantined),
            "first": {name: min(v["step"] for v in entry["violations"] if v["invariant"] == name) for name in violated}}


def _knobs_note(knobs: Any) -> str:
    """`` (knob=value, ...)`` of a result run with knobs off its preset (a quorum result lists only those)."""
    if not isinstance(knobs, dict) or not knobs or len(knobs) > 4:
        return ""
    return " (" + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(knobs.items())) + ")"


def _family_of_results(results: list) -> Family:
    """The family of a ``replemu run --json`` document's results: the first (in the registry's
    order) that claims any of them; the partition family's, whose results of format 1 name none,
    when none does (its check then says what the document is not)."""
    return next((f for f in FAMILIES.values() if any(f.is_result(r) for r in results)), PARTITION)


def _run_from_json(path: Path, index: int) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DashboardError(f"{path}: not a replemu result JSON file ({exc})") from None
    # A variant's "not expressible" answer (no verdict, no state to draw) is its scenario's entry
    # with that status and why; the others' results are read as before.
    items = data if isinstance(data, list) else [data]
    refused = [r for r in items if isinstance(r, dict) and isinstance(r.get("not_expressible"), dict)]
    answered = [r for r in items if not (isinstance(r, dict) and isinstance(r.get("not_expressible"), dict))]
    results: list[dict[str, Any]] = []
    if answered or not refused:
        family = _family_of_results(answered)
        results = _checked(answered, str(path), family)
    else:
        family = _family_of_results(refused)
    if refused:
        _checked(refused, str(path), family)
    for r in refused:
        if not (isinstance(r.get("scenario"), str) and isinstance(r.get("protocol"), str)
                and isinstance(r["not_expressible"].get("step"), int)):
            raise DashboardError(f"{path}: a \"not expressible\" result without its scenario, protocol or step")
    kept = {id(r) for r in (*results, *refused)}
    results = [r for r in items if id(r) in kept]  # the document's order
    names = list(family.invariant_names())
    runs: dict[str, dict] = {}
    for r in results:
        run = runs.setdefault(r["protocol"], {
            "id": f"f{index}-{r['protocol']}", "name": f"{path.name} {r['protocol']}{_knobs_note(r.get('knobs'))}",
            "protocol": r["protocol"], "family": family.name, "invariants": names,
            "source": str(path), "partitions": [], "batches": [], "docs_index": None, "quarantined": 0,
            "results": True})  # a run's results: one entry per scenario, shown by its name
        if isinstance(r.get("not_expressible"), dict):
            entry = {"key": r["scenario"], "topic": r["scenario"], "partition": 0, "scenario": r["scenario"],
                     "steps": r["not_expressible"]["step"], "timeline": None, "log": None, "violations": [], "losses": [],
                     "errors": [], "final": None, "not_expressible": _not_expressible_entry(r)}
        else:
            entry = family.view_entry(r)
        entry.update(_summary_of(entry))
        run["partitions"].append(entry)
    out = list(runs.values())
    for run in out:
        run["matrix"] = _matrix_from_entries(run["partitions"], names)
        run["counts"] = _status_counts(run["partitions"])
        run["findings"] = _finding_counts(run["partitions"])
    return out


def _stream_refusal(result: dict[str, Any] | None, timeline) -> dict[str, Any] | None:
    """A stream partition's result read as ``replemu run``'s "not expressible" answer when its
    variant could not take one of its steps (``streaming.results.not_expressible_results``;
    ``timeline``, an Arrow table, describes the step), else None."""
    from streaming.results import not_expressible_results, refused_step

    if result is None or refused_step(result) is None:
        return None
    frame = timeline.select(["scenario", "seq", "event"]).to_pandas() if timeline is not None else None
    return _not_expressible_entry(not_expressible_results([result], frame)[0])


def _judged(check: dict[str, Any], refused: set[str]) -> dict[str, Any]:
    """An expectation result as the views show it: the offending partitions whose variant could
    not replay them moved to ``not_expressible`` (the GX suites judge every partition's rows; such a
    partition has no verdict), and ``no_verdict`` when they were all its offenders (the list is
    whole: at most ``OFFENDING_LIMIT`` offending rows)."""
    from expectations.suites import OFFENDING_LIMIT

    nx = [k for k in check["partitions"] if k in refused]
    if not nx:
        return check
    judged = [k for k in check["partitions"] if k not in refused]
    out = dict(check, partitions=judged, not_expressible=nx)
    if not check["success"] and not judged and check["unexpected_count"] <= OFFENDING_LIMIT:
        out["no_verdict"] = True
    return out


def _refused_entry(protocol: str | None, step: int) -> dict[str, Any]:
    """A stream partition's "not expressible" (its core answered step ``step`` with
    ``NOT_A_KRAFT_STEP``), as ``_not_expressible_entry`` shows a result's; the partition's own
    view names the step (``RunReader.partition``)."""
    from streaming.results import refused_reason

    variant = protocol or "its variant's"
    reason = refused_reason(variant)
    return {"step": step, "description": None, "reason": reason,
            "text": f"not expressible under {variant}: step {step}: {reason}"}


def _checked(results: list, source: str, family: Family) -> list[dict[str, Any]]:
    try:
        return family.check_results(results, source)
    except ResultFormatError as exc:
        raise DashboardError(str(exc)) from None


def _not_expressible_entry(result: dict[str, Any]) -> dict[str, Any]:
    """What the views show of a variant's "not expressible" answer: the step, what it was, why,
    and the one line (``not_expressible_text``)."""
    from emulator.result import not_expressible_text

    n = result["not_expressible"]
    return {"step": n.get("step"), "description": n.get("description"), "reason": n.get("reason"),
            "text": not_expressible_text(result)}


def _matrix_from_entries(entries: list[dict], names: list[str] | tuple[str, ...] = INVARIANT_NAMES) -> dict[str, Any]:
    matrix: dict[str, Any] = {}
    for name in names:
        hit = [(e["first"][name], e["key"]) for e in entries if name in e["first"]]
        if hit:
            step, key = min(hit)
            matrix[name] = {"partitions": len(hit), "first": {"key": key, "step": step, "batch_id": None, "docs": None}}
    return matrix


def _status_counts(entries: list[dict]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for e in entries:
        counts[e["status"]] += 1
    return counts


def _finding_counts(entries: list[dict]) -> dict[str, int]:
    """What the statuses hide, a status naming only a partition's gravest finding: the partitions
    that broke an invariant (also those that lost data), that lost data, and that lost only
    records a fault the model permits to lose (an unclean election, a power loss)."""
    return {"violated": sum(1 for e in entries if e["violated"]),
            "lost data": sum(1 for e in entries if e["lost"]),
            "lost data, allowed only": sum(1 for e in entries if e["lost"] and e.get("lost_allowed") == e["lost"])}


# -- stream outputs ---------------------------------------------------------------------------

DETAIL_KINDS = ("timeline", "log", "summary", "violations", "losses", "errors")
ALL_KINDS = ("timeline", "log", "summary", "violations", "losses", "errors", "quarantine", "validations")
PARTITION_CACHE = 32  # partitions whose rows stay cached in a RunReader


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, with every symbolic link resolved, lies in ``root`` (resolved)."""
    try:
        real, base = os.path.realpath(path), os.path.realpath(root)
    except (OSError, ValueError):
        return False
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def batch_dirs(out: Path, kind: str) -> dict[int, tuple[str, Any]]:
    """``{batch id: (signature, unit)}`` of the batches of ``kind`` a reader reads
    (``streaming.output_layout``: fresh ``batch_id=N`` directories and compacted
    ``batch_range=A-B`` ones, the shadowing rule applied); the signature is the unit's (a
    directory renamed into place gets a new one), so a range's batches share it.  Symbolic
    links and directories being written (``.NAME.tmp``) are skipped."""
    from streaming.output_layout import LayoutError, visible_units

    try:
        units = visible_units(out, kind)
    except LayoutError:
        return {}
    found: dict[int, tuple[str, Any]] = {}
    for u in units:
        for b in (_range_batches(out, u) if u.ranged else (u.first,)):
            found[b] = (u.signature, u)
    return found


_MANIFESTS: OrderedDict[tuple[str, str], tuple[int, ...]] = OrderedDict()  # (path, signature) -> batch ids
_MANIFESTS_LOCK = threading.Lock()


def _range_batches(out: Path, unit) -> tuple[int, ...]:
    """The batch ids a compacted range holds (its manifest, read once per signature)."""
    from streaming.output_layout import unit_batches

    key = (str(out / unit.kind / unit.name), unit.signature)
    with _MANIFESTS_LOCK:
        if key in _MANIFESTS:
            return _MANIFESTS[key]
    try:
        ids = tuple(sorted(unit_batches(out, unit)))
    except (OSError, ValueError):
        return ()
    with _MANIFESTS_LOCK:
        _MANIFESTS[key] = ids
        while len(_MANIFESTS) > 4096:
            _MANIFESTS.popitem(last=False)
    return ids


def _dropped_before(out: Path) -> dict[str, int]:
    """``OUTPUT/retention.json``'s ``{kind: first batch id kept}`` (``replemu stream --retain``)."""
    from streaming.output_layout import RETENTION_FILE, read_retention

    path = out / RETENTION_FILE
    if path.is_symlink() or not inside(out, path):
        return {}
    dropped = read_retention(out).get("dropped_before")
    return {str(k): int(v) for k, v in dropped.items() if isinstance(v, int)} if isinstance(dropped, dict) else {}


def _read_unit(out: Path, unit, columns: list[str] | None = None, filter=None):
    """One unit (a batch directory or a range) as an Arrow table with ``batch_id`` (None when it
    holds no readable Parquet file, e.g. because it was replaced while being read)."""
    import pyarrow as pa

    from streaming.output_layout import read_units, unit_files

    if not unit_files(out, unit):
        return None
    try:
        return read_units(out, [unit], columns=columns, filter=filter)
    except (OSError, pa.ArrowInvalid, ValueError):
        return None


def stream_run_dirs(path: Path) -> list[tuple[str, Path]] | None:
    """The stream outputs under ``path``: ``[("-", path)]`` for one output (it has ``run.json``),
    ``[(name, path/name), ...]`` for the parent of per-variant outputs (``--protocol all``),
    ``[]`` for an output whose job has not started its query yet (only its lock file),
    None when ``path`` is none of these."""
    from emulator import VARIANT_NAMES

    if (path / "run.json").is_file():
        return [("-", path)]
    try:
        children = [c for c in path.iterdir() if not c.name.startswith((".", "_")) and c.is_dir() and not c.is_symlink()
                    and (c / "run.json").is_file()]
    except (OSError, ValueError):
        return None
    if children:
        order = {n: i for i, n in enumerate(VARIANT_NAMES)}
        return [(c.name, c) for c in sorted(children, key=lambda c: (order.get(c.name, len(order)), c.name))]
    if (path / "replemu.lock").exists():
        return []
    return None


class RunReader:
    """The views' data of one stream output directory, cached per batch directory.

    ``docs_href(rel)`` turns a Data Docs page (relative to ``OUTPUT/data_docs``) into the link
    the page shows (a relative file path for the static export, a URL for the server)."""

    def __init__(self, out: str | Path, run_id: str, docs_href: Callable[[str], str | None]) -> None:
        self.out = Path(out)
        self.run_id = run_id
        self.docs_href = docs_href
        self._lock = threading.RLock()
        self._batch_cache: dict[tuple[str, int], tuple[str, Any]] = {}
        self._progress: dict[str, Any] = {"key": None, "offset": 0, "rows": {}}
        self._overview: tuple[str, dict] | None = None
        self._parts: OrderedDict[tuple[str, int], dict] = OrderedDict()
        self._parts_lock = threading.Lock()  # one partition read at a time (they share the cache)

    # -- cheap: directory listings only
    def meta(self) -> dict[str, Any]:
        path = self.out / "run.json"
        try:
            if path.is_symlink() or not inside(self.out, path):
                return {}
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def listing(self) -> dict[str, dict[int, tuple[str, Any]]]:
        listing = {kind: batch_dirs(self.out, kind) for kind in ALL_KINDS}
        with self._lock:  # units compacted away or replaced: their pieces go
            live = {(kind, entry[1].name, entry[0]) for kind, batches in listing.items() for entry in batches.values()}
            for key in [k for k, (sig, _) in self._batch_cache.items() if (k[0], k[1], sig) not in live]:
                del self._batch_cache[key]
        return listing

    def status(self) -> dict[str, Any]:
        """The run's batches with one signature each (every kind's directory of that batch and
        its progress line), and a version that changes whenever anything landed."""
        listing = self.listing()
        progress = self.progress()
        ids = self._batch_ids(listing, progress)
        batches = []
        for b in ids:
            parts = [listing[k][b][0] if b in listing[k] else "" for k in ALL_KINDS]
            parts.append("p" if b in progress else "")
            batches.append([b, hashlib.sha1("|".join(parts).encode()).hexdigest()[:12]])
        meta = self.meta()
        version = hashlib.sha1(json.dumps(batches).encode()).hexdigest()[:16]
        return {"id": self.run_id, "name": self.name(meta), "protocol": meta.get("protocol"), "batches": batches,
                "version": version}

    def name(self, meta: dict | None = None) -> str:
        meta = self.meta() if meta is None else meta
        return f"{self.out} ({meta.get('protocol', '?')})"

    @staticmethod
    def _batch_ids(listing: dict, progress: dict) -> list[int]:
        ids = set()
        for kind in ALL_KINDS:
            ids |= set(listing[kind])
        ids |= {b for b, p in progress.items() if p.get("input_rows")}
        return sorted(ids)

    def progress(self) -> dict[int, dict[str, Any]]:
        """``OUTPUT/progress.jsonl`` (one Spark query progress per line; the last line of a
        batch id wins, e.g. after a replay), read incrementally as it grows."""
        from streaming.progress import state_bytes

        path = self.out / "progress.jsonl"
        with self._lock:
            try:
                if path.is_symlink():
                    return {}
                st = path.stat()
            except OSError:
                self._progress = {"key": None, "offset": 0, "rows": {}}
                return {}
            cache = self._progress
            if cache["key"] is None or cache["key"][0] != st.st_ino or st.st_size < cache["offset"]:
                cache = self._progress = {"key": (st.st_ino,), "offset": 0, "rows": {}}
            if st.st_size > cache["offset"]:
                try:
                    with open(path, "rb") as f:
                        f.seek(cache["offset"])
                        chunk = f.read(st.st_size - cache["offset"])
                except OSError:
                    return dict(cache["rows"])
                end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
                for line in chunk[:end].splitlines():
                    try:
                        p = json.loads(line)
                        b = int(p["batchId"])
                    except (ValueError, KeyError, TypeError):
                        continue
                    cache["rows"][b] = {"timestamp": p.get("timestamp"), "input_rows": int(p.get("numInputRows") or 0),
                                        "duration_s": (p.get("durationMs") or {}).get("triggerExecution", 0) / 1000,
                                        "state_bytes": state_bytes(p)}
                cache["offset"] += end
            return dict(cache["rows"])

    # -- per unit (a batch directory or a compacted range), cached by signature
    def _unit_pieces(self, kind: str, entry: tuple[str, Any]) -> dict[int, Any]:
        """Each batch's piece of one unit: the unit read once (its view columns only)."""
        signature, unit = entry
        key = (kind, unit.name)
        with self._lock:
            hit = self._batch_cache.get(key)
            if hit is not None and hit[0] == signature:
                return hit[1]
        table = _read_unit(self.out, unit, columns=_OVERVIEW_COLUMNS.get(kind))
        build = _PIECE_BUILDERS[kind]
        if table is None:
            pieces = {} if unit.ranged else {unit.first: build(None)}
        else:  # the unit's rows as Python once (a range holds hundreds of batches), grouped by batch
            grouped: dict[int, list[dict]] = {}
            for row in table.to_pylist():
                b = row.pop("batch_id")
                rows = grouped.get(b)
                if rows is None:
                    rows = grouped[b] = []
                rows.append(row)
            pieces = {b: build(rows) for b, rows in grouped.items()}
        with self._lock:
            self._batch_cache[key] = (signature, pieces)
        return pieces

    def _batch_piece(self, kind: str, batch: int, listing: dict) -> Any:
        entry = listing[kind].get(batch)
        if entry is None:
            return _EMPTY_PIECE[kind]()
        piece = self._unit_pieces(kind, entry).get(batch)
        return _EMPTY_PIECE[kind]() if piece is None else piece

    def batches(self, ids: list[int] | None = None) -> list[dict[str, Any]]:
        """Each batch: its progress (timestamp, input rows, duration, state bytes), the
        partitions it touched, the invariants first broken in it (EventualConvergence: the
        partitions judged diverged at its end) and its expectation results."""
        listing = self.listing()
        progress = self.progress()
        known = self._batch_ids(listing, progress)
        wanted = known if ids is None else sorted(set(ids).intersection(known))  # each batch once
        applied = self._steps_applied(known, listing)
        refused = {key for b in known for key, (_, step) in self._batch_piece("errors", b, listing).items() if step is not None}
        refused_keys = {f"{t}/{p}" for t, p in refused}
        out = []
        for b in wanted:
            summary = self._batch_piece("summary", b, listing)
            counts: dict[str, int] = {}  # a "not expressible" partition's findings are no verdict: not counted
            for v in self._batch_piece("violations", b, listing):
                if (v["topic"], v["partition"]) not in refused:
                    counts[v["invariant"]] = counts.get(v["invariant"], 0) + 1
            for key, entry in summary["latest"].items():
                if key not in refused:
                    for name, _ in entry[3]:
                        counts[name] = counts.get(name, 0) + 1
            checks = [_judged(dict(v, docs=self.docs_href(v["docs"]) if v["docs"] else None), refused_keys)
                      for v in self._batch_piece("validations", b, listing)]
            p = progress.get(b, {})
            out.append({"batch_id": b, "landed": b in progress, "timestamp": p.get("timestamp"),
                        "input_rows": p.get("input_rows"), "steps": applied.get(b, 0),
                        "duration_s": p.get("duration_s"), "state_bytes": p.get("state_bytes"),
                        "partitions": len(summary["latest"]), "violations": counts, "validations": checks,
                        "quarantined": sum(self._batch_piece("quarantine", b, listing).values())})
        return out

    def _steps_applied(self, ids: list[int], listing: dict) -> dict[int, int]:
        """Per batch, the steps (input events) it applied: each partition's step count in the
        batch's summary less its count in the batch before that held it.  Spark's
        ``numInputRows`` counts what its source read — files, for a file stream — not events."""
        before: dict[tuple[str, int], int] = {}
        applied: dict[int, int] = {}
        for b in ids:  # ascending: the step counts only grow
            n = 0
            for key, entry in self._batch_piece("summary", b, listing)["latest"].items():
                n += max(entry[1] - before.get(key, 0), 0)
                before[key] = entry[1]
            applied[b] = n
        return applied

    def overview(self) -> dict[str, Any]:
        """Every partition with its status (latest summary, losses, quarantined rows), the
        variant × invariant row (how many partitions broke each invariant; the first violation:
        partition, step, batch, its batch's GX validation page), status counts."""
        status = self.status()
        with self._lock:
            if self._overview is not None and self._overview[0] == status["version"]:
                return self._overview[1]
        listing = self.listing()
        ids = [b for b, _ in status["batches"]]
        latest: dict[tuple[str, int], tuple] = {}
        lost: dict[tuple[str, int], int] = {}
        lost_allowed: dict[tuple[str, int], int] = {}  # of them, losses a fault the model permits caused
        errors: dict[tuple[str, int], int] = {}
        refused: dict[tuple[str, int], int] = {}  # partition -> the first step its variant could not take
        firsts: dict[tuple[str, tuple[str, int]], tuple[int, int]] = {}  # (invariant, partition) -> first (batch, step)
        quarantined: dict[tuple[str, int], int] = {}
        quarantined_total = 0
        docs: dict[tuple[int, str], str] = {}
        steps_of: dict[tuple[str, int], dict[str, int]] = {}  # partition -> invariant -> first step
        for b in ids:
            summary = self._batch_piece("summary", b, listing)
            latest.update(summary["latest"])
            for key, (_, _, _, final_steps) in summary["latest"].items():
                for name, step in final_steps:
                    steps_of.setdefault(key, {}).setdefault(name, step)
                    if (name, key) not in firsts or (b, step) < firsts[(name, key)]:
                        firsts[(name, key)] = (b, step)
            for v in self._batch_piece("violations", b, listing):
                fk = (v["invariant"], (v["topic"], v["partition"]))
                if fk not in firsts or (b, v["at_step"]) < firsts[fk]:
                    firsts[fk] = (b, v["at_step"])
                known = steps_of.setdefault((v["topic"], v["partition"]), {})
                known[v["invariant"]] = min(known.get(v["invariant"], v["at_step"]), v["at_step"])
            for key, (n, n_allowed) in self._batch_piece("losses", b, listing).items():
                lost[key] = lost.get(key, 0) + n
                lost_allowed[key] = lost_allowed.get(key, 0) + n_allowed
            for key, (n, step) in self._batch_piece("errors", b, listing).items():
                errors[key] = errors.get(key, 0) + n
                if step is not None:
                    refused[key] = min(refused.get(key, step), step)
            for key, n in self._batch_piece("quarantine", b, listing).items():
                quarantined_total += n
                if key[0] is not None and key[1] is not None:
                    quarantined[key] = quarantined.get(key, 0) + n
            for v in self._batch_piece("validations", b, listing):
                if v["invariant"] and v["docs"] and ((b, v["invariant"]) not in docs or not v["success"]):
                    docs[(b, v["invariant"])] = v["docs"]
        partitions = []
        per_invariant: dict[str, int] = {}
        meta = self.meta()
        for key in sorted(set(latest) | set(quarantined), key=lambda k: (k[0], k[1])):
            scenario, steps, violated, _ = latest.get(key, (None, 0, (), ()))
            n_lost, n_q = lost.get(key, 0), quarantined.get(key, 0)
            entry = {"key": f"{key[0]}/{key[1]}", "topic": key[0], "partition": key[1], "scenario": scenario, "steps": steps}
            if key in refused:  # no verdict: what followed the step is not the variant's behaviour
                entry.update({"violated": [], "lost": 0, "lost_allowed": 0, "quarantined": n_q, "error_answers": errors.get(key, 0),
                              "status": partition_status([], 0, n_q, not_expressible=True), "first": {},
                              "not_expressible": _refused_entry(meta.get("protocol"), refused[key])})
                partitions.append(entry)
                continue
            for name in violated:
                per_invariant[name] = per_invariant.get(name, 0) + 1
            entry.update({"violated": list(violated), "lost": n_lost, "lost_allowed": lost_allowed.get(key, 0), "quarantined": n_q,
                          "error_answers": errors.get(key, 0), "status": partition_status(list(violated), n_lost, n_q),
                          "first": {n: s for n, s in steps_of.get(key, {}).items() if n in violated}})
            partitions.append(entry)
        first: dict[str, tuple] = {}  # invariant -> (batch, step, topic, partition), of partitions with a verdict
        for (name, key), (b, step) in firsts.items():
            cand = (b, step, key[0], key[1])
            if key not in refused and (name not in first or cand < first[name]):
                first[name] = cand
        matrix = {}
        for name in INVARIANT_NAMES:
            if name not in first and name not in per_invariant:
                continue
            f = first.get(name)
            matrix[name] = {"partitions": per_invariant.get(name, 0), "first": None if f is None else {
                "key": f"{f[2]}/{f[3]}", "step": f[1], "batch_id": f[0],
                "docs": self.docs_href(docs[(f[0], name)]) if (f[0], name) in docs else None}}
        index = self.out / "data_docs" / "index.html"
        result = {"id": self.run_id, "name": self.name(meta), "protocol": meta.get("protocol"), "source": str(self.out),
                  "version": status["version"], "batch_ids": ids, "partitions": partitions, "matrix": matrix,
                  "counts": _status_counts(partitions), "findings": _finding_counts(partitions), "quarantined": quarantined_total,
                  "docs_index": self.docs_href("index.html") if index.is_file() and inside(self.out, index) else None}
        dropped = _dropped_before(self.out)
        if dropped:  # --retain: these kinds' rows of micro-batches before the id were dropped
            result["dropped_before"] = dropped
        with self._lock:
            self._overview = (status["version"], result)
        return result

    # -- one partition: its rows only
    def _partition_tables(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's rows of every detail kind (Arrow tables with ``batch_id``): per kind,
        the batches not read before (or replaced since) are read in one filtered scan, and
        kept per batch; ``summary``: only the latest batch that holds the partition."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        listing = self.listing()
        key = (topic, partition)
        with self._lock:
            cached = self._parts.pop(key, None) or {kind: {} for kind in DETAIL_KINDS}
            self._parts[key] = cached
            while len(self._parts) > PARTITION_CACHE:
                self._parts.popitem(last=False)
        flt = (ds.field("topic") == topic) & (ds.field("partition") == partition)
        # The summary pieces (cached for the job view) say which batches touched the partition.
        holding = [b for b in sorted(listing["summary"], reverse=True)
                   if key in self._batch_piece("summary", b, listing)["latest"]][:1]
        tables: dict[str, Any] = {}
        for kind in DETAIL_KINDS:
            have = cached[kind]
            present = {b: listing[kind][b] for b in (holding if kind == "summary" else listing[kind])}
            for b in [b for b in have if b not in present]:
                del have[b]
            missing = {b: entry for b, entry in present.items() if b not in have or have[b][0] != entry[0]}
            if missing:
                for b, table in _read_batches(self.out, kind, missing, flt).items():
                    have[b] = (missing[b][0], table)
            parts = [have[b][1] for b in sorted(have) if have[b][1] is not None and have[b][1].num_rows]
            tables[kind] = pa.concat_tables(parts, promote_options="default") if parts else None
        if tables["summary"] is None and tables["timeline"] is None:
            return None
        return tables

    def partition(self, topic: str, partition: int) -> dict[str, Any] | None:
        """One partition: the contract's result rebuilt from its rows (``streaming.results``),
        its per-step timeline and its ``log`` operations in order; None if the outputs hold
        none of its rows.  Rows that do not rebuild (a damaged output) are reported in
        ``problem``, the rest is still shown."""
        import pandas as pd

        from streaming.results import ResultsError, results_from_frames

        with self._parts_lock:
            tables = self._partition_tables(topic, partition)
        if tables is None:
            return None
        frames = {k: (tables[k].to_pandas() if tables[k] is not None else pd.DataFrame())
                  for k in ("summary", "violations", "losses", "errors", "log")}
        problem = None
        try:
            results = results_from_frames(frames) if not frames["summary"].empty else []
        except (ResultsError, ValueError, KeyError, TypeError) as exc:
            results, problem = [], f"the outputs of this partition do not rebuild: {exc}"
        result = results[0] if results else None
        timeline = timeline_from_table(tables["timeline"])
        ops = log_ops_from_table(tables["log"])
        scenario = result["scenario"] if result else (
            tables["timeline"]["scenario"][0].as_py() if tables["timeline"] is not None else None)
        entry = {"key": f"{topic}/{partition}", "topic": topic, "partition": partition, "scenario": scenario,
                 "steps": result["steps"] if result else (timeline["steps"][-1] if timeline and timeline["steps"] else 0),
                 "timeline": timeline, "log": ops,
                 "violations": result["violations"] if result else _violation_rows(frames["violations"]),
                 "losses": result["losses"] if result else [],
                 "errors": result["errors"] if result else [],
                 "final": result["final"] if result else None}
        if problem:
            entry["problem"] = problem
        refusal = _stream_refusal(result, tables["timeline"])
        if refusal is not None:  # no verdict: the views show the step and why, not its findings
            entry.update({"not_expressible": refusal, "violations": [], "losses": []})
        return entry

    def logs_at(self, topic: str, partition: int, step: int) -> dict[str, list] | None:
        entry = self.partition(topic, partition)
        if entry is None:
            return None
        replicas = list(entry["timeline"]["replicas"]) if entry["timeline"] else []
        return logs_at(entry["log"], step, replicas)


def _read_batches(out: Path, kind: str, batches: dict[int, tuple[str, Any]], flt) -> dict[int, Any]:
    """Rows matching ``flt`` of several batches of one kind, in one threaded scan of the units
    holding them: ``{batch id: Arrow table with a batch_id column}`` (an unreadable batch: None)."""
    import pyarrow as pa

    from streaming.output_layout import read_units, split_by_batch

    units = {entry[1].name: entry[1] for entry in batches.values()}
    out_tables: dict[int, Any] = {b: None for b in batches}
    columns = _DETAIL_COLUMNS.get(kind)
    try:
        table = read_units(out, list(units.values()), columns=columns, filter=flt)
        parts = split_by_batch(table)
        empty = table.slice(0, 0)
        for b in batches:
            out_tables[b] = parts.get(b, empty)
        return out_tables
    except (OSError, pa.ArrowInvalid, ValueError):  # a unit replaced while it was read: read them one by one
        pass
    for unit in units.values():
        t = _read_unit(out, unit, columns=columns, filter=flt)
        if t is None:
            continue
        parts = split_by_batch(t)
        for b, entry in batches.items():
            if entry[1].name == unit.name:
                out_tables[b] = parts.get(b, t.slice(0, 0))
    return out_tables


# What a partition's view reads of each kind (the timeline's JSON columns are the bulk of its bytes).
_DETAIL_COLUMNS = {
    "timeline": ["scenario", "seq", "event", "replica", "role", "alive", "leo", "hw", "leader_epoch", "leader",
                 "controller_epoch", "batch_id"],
    "log": ["topic", "partition", "seq", "idx", "replica", "op", "offset", "epoch", "value", "batch_id"],
}


def _violation_rows(frame) -> list[dict]:
    """Violations as the contract lists them, straight from the rows (when the result does not rebuild)."""
    if frame is None or frame.empty:
        return []
    return [{"invariant": r["invariant"], "step": int(r["at_step"]), "detail": r.get("detail")} for r in frame.to_dict("records")]


def timeline_from_table(table) -> dict[str, Any] | None:
    """Per step: event, leader, controller epoch; per replica: LEO, HW, leader epoch, role, alive."""
    if table is None or not table.num_rows:
        return None
    table = table.sort_by([("batch_id", "ascending"), ("seq", "ascending"), ("replica", "ascending")])
    cols = table.select(["seq", "event", "replica", "role", "alive", "leo", "hw", "leader_epoch", "leader",
                         "controller_epoch"]).to_pydict()
    replicas = sorted(set(cols["replica"]))
    tl: dict[str, Any] = {"steps": [], "events": [], "leader": [], "epoch": [],
                          "replicas": {str(r): {"leo": [], "hw": [], "epoch": [], "role": [], "alive": []} for r in replicas}}
    last = None
    for seq, event, replica, role, alive, leo, hw, epoch, leader, cepoch in zip(
            cols["seq"], cols["event"], cols["replica"], cols["role"], cols["alive"], cols["leo"], cols["hw"],
            cols["leader_epoch"], cols["leader"], cols["controller_epoch"]):
        if seq != last:
            if last is not None:
                _pad(tl)
            last = seq
            tl["steps"].append(seq)
            tl["events"].append(event)
            tl["leader"].append(leader)
            tl["epoch"].append(cepoch)
        d = tl["replicas"][str(replica)]
        if len(d["leo"]) == len(tl["steps"]):  # a step written twice (should not happen): keep the first
            continue
        d["leo"].append(leo)
        d["hw"].append(hw)
        d["epoch"].append(epoch)
        d["role"].append(role)
        d["alive"].append(bool(alive))
    _pad(tl)
    return tl


def _pad(tl: dict) -> None:
    """A replica missing from a step's rows repeats its previous values (keeps the arrays aligned)."""
    n = len(tl["steps"])
    for d in tl["replicas"].values():
        if len(d["leo"]) < n:
            for k, empty in (("leo", 0), ("hw", 0), ("epoch", -1), ("role", "none"), ("alive", False)):
                d[k].append(d[k][-1] if d[k] else empty)


def log_ops_from_table(table) -> list[list]:
    """A partition's ``log`` rows (appends and truncations) in emission order:
    ``[step, replica, op, offset, epoch, value]``."""
    if table is None or not table.num_rows:
        return []
    table = table.sort_by([("batch_id", "ascending"), ("seq", "ascending"), ("idx", "ascending")])
    c = table.select(["seq", "replica", "op", "offset", "epoch", "value"]).to_pydict()
    return [[s, r, op, o, e, v] for s, r, op, o, e, v in zip(c["seq"], c["replica"], c["op"], c["offset"], c["epoch"], c["value"])
            if op in ("append", "truncate")]


# What each batch contributes to the job view (only these columns are read; the pieces get row dicts).
_OVERVIEW_COLUMNS = {
    "summary": ["topic", "partition", "scenario", "steps", "violated", "final_findings"],
    "violations": ["topic", "partition", "at_step", "invariant"],
    "losses": ["topic", "partition", "allowed"],
    "errors": ["topic", "partition", "at_step", "error"],
    "quarantine": ["topic", "partition"],
    "validations": ["invariant", "expectation", "frame", "success", "unexpected_count", "partitions", "docs"],
}


def _summary_piece(rows: list[dict] | None) -> dict[str, Any]:
    """The batch's summary rows: per partition (scenario, steps, every invariant broken as of
    the batch, the final tier's findings with their steps)."""
    piece: dict[str, Any] = {"latest": {}}
    for r in rows or ():
        topic, partition, scenario, steps = r["topic"], r["partition"], r["scenario"], r["steps"]
        violated, findings = r["violated"], r["final_findings"]
        names = set(filter(None, (violated or "").split(",")))
        final_steps = []
        for f in (json.loads(findings) if isinstance(findings, str) else []):
            name = f["invariant"]
            names.add(name)
            final_steps.append((name, int(f.get("step") or steps or 0)))
        piece["latest"][(topic, partition)] = (scenario, steps, tuple(sorted(names)), tuple(final_steps))
    return piece


def _rows_piece(rows: list[dict] | None) -> list[dict]:
    return list(rows or ())


def _count_piece(rows: list[dict] | None) -> dict[tuple, int]:
    counts: dict[tuple, int] = {}
    for r in rows or ():
        key = (r["topic"], r["partition"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def _errors_piece(rows: list[dict] | None) -> dict[tuple, tuple[int, int | None]]:
    """Per partition: (error answers, the first step its variant's controller could not take, or
    None: the core's ``NOT_A_KRAFT_STEP`` answer, which makes the partition "not expressible")."""
    from emulator.kraft import REFUSED

    counts: dict[tuple, tuple[int, int | None]] = {}
    for r in rows or ():
        key = (r["topic"], r["partition"])
        n, refused = counts.get(key, (0, None))
        if r.get("error") == REFUSED and r.get("at_step") is not None:
            refused = int(r["at_step"]) if refused is None else min(refused, int(r["at_step"]))
        counts[key] = (n + 1, refused)
    return counts


def _loss_piece(rows: list[dict] | None) -> dict[tuple, tuple[int, int]]:
    """Per partition: (records lost, of them allowed)."""
    counts: dict[tuple, tuple[int, int]] = {}
    for r in rows or ():
        key = (r["topic"], r["partition"])
        n, allowed = counts.get(key, (0, 0))
        counts[key] = (n + 1, allowed + bool(r.get("allowed")))
    return counts


# A validation row's Data Docs page: its batch's stable page (expectations.suites.batch_page), or
# GX's dated page itself (the rows of outputs written before the stable pages).
DOCS_PAGES = ("batches/", "validations/")


def _validations_piece(rows: list[dict] | None) -> list[dict]:
    out = []
    for v in rows or ():
        docs = v.get("docs")
        out.append({"invariant": v.get("invariant"), "expectation": v.get("expectation"), "success": bool(v.get("success")),
                    "unexpected_count": int(v.get("unexpected_count") or 0), "partitions": list(v.get("partitions") or []),
                    "docs": docs if isinstance(docs, str) and docs.startswith(DOCS_PAGES) else None})
    return out


_PIECE_BUILDERS = {"summary": _summary_piece, "violations": _rows_piece, "losses": _loss_piece, "errors": _errors_piece,
                   "quarantine": _count_piece, "validations": _validations_piece}
_EMPTY_PIECE = {"summary": lambda: _summary_piece(None), "violations": list, "losses": dict, "errors": dict,
                "quarantine": dict, "validations": list}


def _static_docs_href(out: Path, page_dir: Path) -> Callable[[str], str | None]:
    def href(rel: str) -> str | None:
        target = out / "data_docs" / rel
        return os.path.relpath(target, page_dir) if target.is_file() else None
    return href


def _run_from_output(out: Path, run_id: str, page_dir: Path, chosen: str | None) -> dict[str, Any]:
    """A stream output as the static page embeds it: the job, every partition, and the timelines
    and logs of up to ``MAX_TIMELINES`` partitions (the chosen one, then the ones with findings)."""
    reader = RunReader(out, run_id, _static_docs_href(out, page_dir))
    run = dict(reader.overview())
    run["batches"] = reader.batches()
    entries = [dict(p) for p in run["partitions"]]
    rank = sorted(range(len(entries)), key=lambda i: (entries[i]["key"] != chosen and entries[i]["scenario"] != chosen,
                                                      entries[i]["status"] == "ok", i))
    embed = set(rank[:MAX_TIMELINES])
    for i, e in enumerate(entries):
        detail = reader.partition(e["topic"], e["partition"]) if i in embed else None
        if detail is None:
            e.update({"timeline": None, "log": None, "violations": [], "losses": [], "errors": [], "final": None,
                      "embedded": False})
        else:
            e.update(detail)
            e["embedded"] = True
        e["first"] = {v["invariant"]: v["step"] for v in reversed(e["violations"])}
    run["partitions"] = entries
    return run


def collect_runs(inputs: list[str | Path], page_dir: Path, chosen: str | None = None) -> list[dict[str, Any]]:
    runs = []
    for i, raw in enumerate(inputs):
        path = Path(raw)
        if path.is_file():
            runs.extend(_run_from_json(path, i))
            continue
        found = stream_run_dirs(path) if path.is_dir() else None
        if not found:
            raise DashboardError(f"{path}: neither a replemu result JSON file nor a stream output directory")
        for name, d in found:
            runs.append(_run_from_output(d, f"r{i}" if name == "-" else f"r{i}-{name}", page_dir, chosen))
    if not runs:
        raise DashboardError("nothing to show: give stream output directories or replemu run --json files")
    return runs


# -- the page -------------------------------------------------------------------------------

def _json_for_script(data: Any) -> str:
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def page_html(title: str, boot: dict[str, Any], inline: bool) -> str:
    """The one page: ``inline`` puts the CSS and script in it (the static export), else it
    links ``assets/style.css`` and ``assets/app.js`` (the server)."""
    if inline:
        script = asset_text("app.js")
        if "</script" in script.lower():
            raise AssertionError("app.js must not contain '</script'")
        head = "<style>\n" + asset_text("style.css") + "</style>"
        tail = "<script>\n" + script + "</script>"
    else:
        head = '<link rel="icon" href="data:,">\n<link rel="stylesheet" href="assets/style.css">'
        tail = '<script src="assets/app.js"></script>'
    return (asset_text("page.html").replace("%TITLE%", html.escape(title)).replace("%HEAD%", head)
            .replace("%DATA%", _json_for_script(boot)).replace("%SCRIPT%", tail))


def render(runs: list[dict[str, Any]], chosen: str | None = None) -> str:
    data = {"mode": "static", "runs": runs, "invariants": list(INVARIANT_NAMES), "chosen": chosen, "statuses": list(STATUSES)}
    title = "replemu dashboard: " + ", ".join(r["protocol"] or "?" for r in runs)
    return page_html(title, data, inline=True)


def write_dashboard(inputs: list[str | Path], output_dir: str | Path, chosen: str | None = None) -> Path:
    out = Path(output_dir)
    runs = collect_runs(inputs, out.resolve(), chosen)
    if chosen is not None:
        known = sorted({p[k] for r in runs for p in r["partitions"] for k in ("key", "scenario") if p.get(k)})
        if chosen not in known:
            raise DashboardError(f"--partition {chosen!r}: no such partition or scenario in the inputs (known: {short_list(known)})")
    html = render(runs, chosen)
    out.mkdir(parents=True, exist_ok=True)  # only once there is a page to write: a refused input leaves no folder
    page = out / "dashboard.html"
    page.write_text(html, encoding="utf-8")
    return page


def cmd_dashboard(args: argparse.Namespace) -> int:
    problem = output_problem(args.output, "--output")
    if problem:
        return fail(f"replemu: error: {problem}")
    try:
        page = write_dashboard(args.inputs, args.output, chosen=args.partition)
    except DashboardError as exc:
        return fail(f"replemu: error: {exc}")
    print(f"wrote {page}")
    return EXIT_OK
