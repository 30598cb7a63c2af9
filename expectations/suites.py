"""Great Expectations suites generated from the core's invariant registry.

Every expectation carries ``meta = {"invariant": <exact §C name>, "ref": "C.x"}``, so a failed
expectation and a core violation read the same.  Two frames are validated per micro-batch,
built from the stream's own output rows by ``frames_from_outputs`` (pandas, in this process) or
by ``spark_frames.validation_frames_spark`` (Spark, where the rows are; the same rows):

* ``timeline`` — one row per step and replica.  Structural truths GX evaluates itself:
  HW <= LEO on live replicas (HighWatermarkSanity), epoch-cache start offsets strictly
  increasing (EpochMonotonicity), one live leader per (partition, step, epoch)
  (UniqueLeaderPerEpoch).
* ``partitions`` — one row per partition touched in the batch: the leader is in the ISR
  (LeaderInIsr), the batch's ``log`` rows append at contiguous offsets (OffsetMonotonicity),
  and the core's verdicts: one boolean column per invariant of the
  registry, True when the core found it violated so far, each expected to be False.

GX runs with an ephemeral, in-code context: no project directory, analytics off, progress
bars off, no network; on pandas frames (its pandas datasource) or on Spark DataFrames (its Spark
datasource: aggregates and bounded samples computed by the executors), with the same result
rows, results files and Data Docs pages (``BatchValidator``'s ``engine``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from emulator.invariants import INVARIANTS, REGISTRY
from expectations.spark_frames import INDEX_COLUMNS
from streaming.output_layout import batch_dir_name
from streaming.results import violated_in_summary
from streaming.sink import kind_frames, write_batch_dir

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")


@dataclass(frozen=True)
class Check:
    frame: str
    invariant: str
    expectation: Any  # a great_expectations Expectation


def _meta(name: str) -> dict:
    return {"invariant": name, "ref": INVARIANTS[name].ref}


def build_checks(family: str = "partition") -> list[Check]:
    """The checks of one protocol family's suites (``family``: its ``Family.name``; ``SUITES``)."""
    return suite_of(family).checks()


def partition_checks() -> list[Check]:
    """The partition family's suites, generated from its registry (``emulator.invariants``)."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    checks = [
        Check("timeline", "HighWatermarkSanity", gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="leo", column_B="hw", or_equal=True, row_condition=Column("alive") == True,  # noqa: E712
            meta=_meta("HighWatermarkSanity"))),
        Check("timeline", "EpochMonotonicity", gxe.ExpectColumnValuesToBeInSet(
            column="cache_increasing", value_set=[True], meta=_meta("EpochMonotonicity"))),
        Check("timeline", "UniqueLeaderPerEpoch", gxe.ExpectCompoundColumnsToBeUnique(
            column_list=["topic", "partition", "seq", "leader_epoch"], row_condition=Column("leading") == True,  # noqa: E712
            meta=_meta("UniqueLeaderPerEpoch"))),
        Check("partitions", "LeaderInIsr", gxe.ExpectColumnValuesToBeInSet(
            column="leader_in_isr", value_set=[True], meta=_meta("LeaderInIsr"))),
        Check("partitions", "OffsetMonotonicity", gxe.ExpectColumnValuesToBeInSet(
            column="offsets_contiguous", value_set=[True], meta=_meta("OffsetMonotonicity"))),
    ]
    for inv in REGISTRY:
        checks.append(Check("partitions", inv.name, gxe.ExpectColumnValuesToBeInSet(
            column=inv.name, value_set=[False], meta=_meta(inv.name))))
    return checks


def quorum_checks() -> list[Check]:
    """The metadata quorum's suites, generated from ``QUORUM_INVARIANTS`` (the core's names; ``ref``:
    the TLA+ property or Kafka code each comes from).  GX checks ElectionSafety itself on the
    timeline (at most one live leader per metadata partition, step and epoch); on the partitions
    frame each invariant's column (True: the core found it violated so far) must be False."""
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    from emulator.quorum.invariants import QUORUM_INVARIANTS

    def meta(name: str) -> dict:
        return {"invariant": name, "ref": next(i.source for i in QUORUM_INVARIANTS if i.name == name)}

    checks = [Check("timeline", "ElectionSafety", gxe.ExpectCompoundColumnsToBeUnique(
        column_list=["topic", "partition", "seq", "leader_epoch"], row_condition=Column("leading") == True,  # noqa: E712
        meta=meta("ElectionSafety")))]
    for inv in QUORUM_INVARIANTS:
        checks.append(Check("partitions", inv.name, gxe.ExpectColumnValuesToBeInSet(
            column=inv.name, value_set=[False], meta=meta(inv.name))))
    return checks


def _cache_increasing(cache_json: str | None) -> bool:
    entries = json.loads(cache_json or "[]")
    return all(b[0] > a[0] and b[1] > a[1] for a, b in zip(entries, entries[1:]))


def _gapped_logs(log_rows) -> set[tuple[str, int]]:
    """Partitions whose ``log`` rows of this batch append at an offset other than the next one
    (after an append at ``o`` the next is ``o + 1``; after a cut to ``t`` it is ``t``)."""
    broken: set[tuple[str, int]] = set()
    if log_rows.empty:
        return broken
    rows = log_rows.sort_values(["topic", "partition", "replica", "seq", "idx"], kind="stable")
    expected: dict[tuple, int] = {}
    for topic, partition, replica, op, offset in zip(rows["topic"], rows["partition"], rows["replica"], rows["op"], rows["offset"]):
        key = (topic, int(partition), int(replica))
        if op == "append":
            if key in expected and expected[key] != offset:
                broken.add(key[:2])
            expected[key] = int(offset) + 1
        elif op == "truncate":
            expected[key] = int(offset)
    return broken


_EMPTY_COLUMNS = ["topic", "partition", "seq", "idx", "replica", "role", "alive", "leo", "hw", "leader_epoch",
                  "epoch_cache", "op", "offset", "final", "violated", "final_findings"]


def frames_from_outputs(outputs: dict[str, Any], family: str = "partition") -> dict[str, Any]:
    """The two validation frames from one micro-batch's outputs (kind -> pandas frame); the
    partitions frame is the family's (``family``: its ``Family.name``; ``SUITES``)."""
    import pandas as pd

    empty = pd.DataFrame(columns=_EMPTY_COLUMNS)
    timeline = outputs.get("timeline", empty)[["topic", "partition", "seq", "replica", "role", "alive", "leo", "hw",
                                               "leader_epoch", "epoch_cache"]].copy()
    timeline["cache_increasing"] = [_cache_increasing(c) for c in timeline["epoch_cache"]]
    timeline["leading"] = (timeline["role"] == "leader") & (timeline["alive"] == True)  # noqa: E712
    timeline = timeline.drop(columns=["epoch_cache"]).reset_index(drop=True)
    return {"timeline": timeline, "partitions": suite_of(family).partitions(outputs)}


def quorum_partitions_frame(outputs: dict[str, Any]):
    """A metadata-quorum stream's partitions frame: one row per summary, one column per invariant
    of the quorum registry (True: violated so far)."""
    import pandas as pd

    from expectations.spark_frames import QUORUM_PARTITION_COLUMNS

    summary = outputs.get("summary", pd.DataFrame(columns=_EMPTY_COLUMNS))
    names = QUORUM_PARTITION_COLUMNS[1:]
    rows = [{"partition_key": f"{s['topic']}/{s['partition']}",
             **{name: name in set((s["violated"] or "").split(",")) for name in names}}
            for s in summary.to_dict("records")]
    return pd.DataFrame(rows, columns=list(QUORUM_PARTITION_COLUMNS))


def partition_partitions_frame(outputs: dict[str, Any]):
    """The partition family's partitions frame: the leader in the ISR, the batch's log rows
    contiguous, and one column per invariant of the registry (True: violated so far)."""
    import pandas as pd

    empty = pd.DataFrame(columns=_EMPTY_COLUMNS)
    summary = outputs.get("summary", empty)
    broken = _gapped_logs(outputs.get("log", empty))
    part_rows = []
    for s in summary.to_dict("records"):
        final = json.loads(s["final"])
        c = final["controller"]
        contiguous = (s["topic"], int(s["partition"])) not in broken
        violated = violated_in_summary(s)
        part_rows.append({
            "partition_key": f"{s['topic']}/{s['partition']}",
            "leader_in_isr": c["leader"] is None or c["leader"] in c["isr"], "offsets_contiguous": contiguous,
            **{inv.name: inv.name in violated for inv in REGISTRY},
        })
    columns = ["partition_key", "leader_in_isr", "offsets_contiguous"] + [inv.name for inv in REGISTRY]
    return pd.DataFrame(part_rows, columns=columns)


@dataclass(frozen=True)
class Suite:
    """One protocol family's expectation suites: its checks, its partitions frame (pandas), the
    prefix of its suites' names (the Spark form of the frames: ``spark_frames.PARTITIONS_FRAMES``)."""

    checks: Callable[[], list[Check]]
    partitions: Callable[[dict[str, Any]], Any]
    prefix: str


# Each protocol family's suites, by ``Family.name`` (``ExpectationsObserver(family=...)``: the
# stream's family, resolved once with its protocol).
SUITES: dict[str, Suite] = {
    "partition": Suite(partition_checks, partition_partitions_frame, "replemu"),
    "quorum": Suite(quorum_checks, quorum_partitions_frame, "replemu-quorum"),
}


def suite_of(family: str) -> Suite:
    try:
        return SUITES[family]
    except KeyError:
        raise ValueError(f"no expectation suites for the protocol family {family!r} (known: {', '.join(SUITES)})") from None



def validate_rows(rows, batch_id: int = 0, validator: "BatchValidator | None" = None, family: str = "partition"):
    """The suites run on one micro-batch of output rows (``streaming.pipeline.replicate``'s
    ``OUTPUT_SCHEMA`` rows: a Spark DataFrame, pandas or Arrow), split by kind as the job's own
    sink splits them: a pandas frame with one row per expectation (``batch_id`` and
    ``VALIDATION_COLUMNS``).  Pass one ``BatchValidator`` for every batch of a stream: building
    one costs about a second."""
    import pandas as pd

    results = (validator or BatchValidator(family=family)).validate(frames_from_outputs(kind_frames(rows), family), batch_id)
    return pd.DataFrame(results, columns=("batch_id",) + VALIDATION_COLUMNS)


ENGINES = ("pandas", "spark")
# The kind whose row count is each validation frame's (``ExpectationsObserver.frame_engines``).
FRAME_ROWS = {"timeline": "timeline", "partitions": "summary"}
OFFENDING_LIMIT = 20  # offending rows named per failed expectation (GX's partial_unexpected_count)


def result_format(frame: str, fmt: str) -> dict[str, Any]:
    """GX's result format of one frame's checkpoint: BOOLEAN_ONLY, or SUMMARY naming the first
    ``OFFENDING_LIMIT`` offending rows by their partition (``spark_frames.INDEX_COLUMNS``)."""
    if fmt == "BOOLEAN_ONLY":
        return {"result_format": fmt}
    return {"result_format": fmt, "partial_unexpected_count": OFFENDING_LIMIT,
            "unexpected_index_column_names": list(INDEX_COLUMNS[frame]), "return_unexpected_index_query": False}


def _is_empty(df) -> bool:
    """Whether a frame has no rows; a Spark frame is counted (one job, a scan of the blocks when
    it is ``materialized``)."""
    return df.count() == 0 if hasattr(df, "sparkSession") else df.empty


def _offending(index: list) -> list[str]:
    """The partition keys of GX's (bounded) list of offending rows, each a dict of the frame's
    ``INDEX_COLUMNS`` (and the checked values)."""
    return sorted({str(i["partition_key"]) if "partition_key" in i else f"{i.get('topic')}/{i.get('partition')}"
                   for i in index if isinstance(i, dict)})


class BatchValidator:
    """Runs the suites on every micro-batch's frames; keeps GX's results for the Data Docs."""

    def __init__(self, docs_dir: str | Path | None = None, results_dir: str | Path | None = None,
                 engine: str = "pandas", family: str = "partition") -> None:
        """``results_dir``: keep GX's validation results there (JSON files), not in memory, so the
        Data Docs built after a restart still show the batches validated before it.  ``engine``:
        the frames ``validate`` is given, pandas (GX's pandas datasource, in this process) or
        spark (GX's Spark datasource: every metric is a Spark aggregate or a bounded ``limit``;
        only O(expectations) values and at most ``OFFENDING_LIMIT`` rows per failed expectation
        reach the driver).  Both give the same rows, results files and Data Docs pages.

        A batch's GX run time is the clock when the batch was first validated (read back from
        ``results_dir`` when the batch is validated again, by a restart replaying it); GX puts it
        into its page's path, so the rows' ``docs`` column holds the batch's stable page instead
        (``batch_page``), the same in every run, which leads to the dated one (``write_batch_pages``)."""
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        self.gx = gx
        config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults())
        if results_dir is not None:
            config.stores[config.validation_results_store_name] = {
                "class_name": "ValidationResultsStore",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(Path(results_dir).resolve())},
            }
        self.context = gx.get_context(project_config=config, mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.family = family
        self.checks = build_checks(family)
        prefix = self.prefix = suite_of(family).prefix
        self.results_dir = Path(results_dir).resolve() if results_dir is not None else None
        self._run_times: dict[tuple[str, str], Any] = {}  # (suite, run name) -> run time, without a results_dir
        self.docs_dir = Path(docs_dir).resolve() if docs_dir else None  # GX resolves relative paths elsewhere
        if self.docs_dir:
            self.context.add_data_docs_site(site_name="replemu", site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(self.docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            })
        self.engine = engine
        # One datasource name for both engines: GX names the results files and Data Docs pages
        # after it. The Spark datasource does not persist the frames itself (persist=False): the
        # caller keeps them on the executors (``materialized``, ``ExpectationsObserver.on_spark_batch``).
        source = (self.context.data_sources.add_pandas("replemu") if engine == "pandas"
                  else self.context.data_sources.add_spark("replemu", persist=False))
        # Each frame is first validated with BOOLEAN_ONLY results (fast); only a frame that fails
        # something is validated again with SUMMARY results, to count the offenders and name at
        # most OFFENDING_LIMIT of them (the first in the frame's order: a top-N in Spark).
        self.checkpoints: dict[str, dict[str, Any]] = {}
        for frame in ("timeline", "partitions"):
            asset = source.add_dataframe_asset(frame)
            batch_def = asset.add_batch_definition_whole_dataframe(frame)
            suite = self.context.suites.add(gx.ExpectationSuite(name=f"{prefix}-{frame}"))
            for check in self.checks:
                if check.frame == frame:
                    suite.add_expectation(check.expectation)
            vd = self.context.validation_definitions.add(gx.ValidationDefinition(name=f"{prefix}-{frame}", data=batch_def, suite=suite))
            self.checkpoints[frame] = {
                fmt: self.context.checkpoints.add(gx.Checkpoint(
                    name=f"{prefix}-{frame}-{fmt.lower()}", validation_definitions=[vd], actions=[],
                    result_format=result_format(frame, fmt)))
                for fmt in ("BOOLEAN_ONLY", "SUMMARY")
            }

    def validate(self, frames: dict[str, Any], batch_id: int) -> list[dict[str, Any]]:
        """One row per expectation: batch_id, invariant, expectation, success, unexpected_count,
        partitions (the partition keys of the first ``OFFENDING_LIMIT`` offending rows in the
        frame's order), docs (the Data Docs page, relative).  ``frames``: the two validation
        frames (or one of them), pandas or Spark as the ``engine`` says; a frame without rows is not validated."""
        rows = []
        for frame, checkpoints in self.checkpoints.items():
            df = frames.get(frame)
            if df is None or _is_empty(df):
                continue
            run_id = self._run_id(batch_id, frame)
            result = checkpoints["BOOLEAN_ONLY"].run(batch_parameters={"dataframe": df}, run_id=run_id)
            if not result.success:
                result = checkpoints["SUMMARY"].run(batch_parameters={"dataframe": df}, run_id=run_id)
            for vr_id, vr in result.run_results.items():
                page = self._page(vr_id)
                for r in vr.results:
                    cfg = r.expectation_config
                    keys = _offending((r.result or {}).get("partial_unexpected_index_list") or [])
                    rows.append({
                        "batch_id": batch_id, "invariant": cfg.meta["invariant"], "expectation": cfg.type,
                        "frame": frame, "success": bool(r.success),
                        "unexpected_count": int((r.result or {}).get("unexpected_count") or 0),
                        "partitions": keys, "docs": page,
                    })
        return rows

    def _run_id(self, batch_id: int, frame: str):
        """Named after the micro-batch; its run time is when the batch was first validated
        (``_run_time``), so the Data Docs date it by its run and a replayed batch keeps its page."""
        from great_expectations.core.run_identifier import RunIdentifier

        run_name = f"batch-{batch_id:06d}-{frame}"
        return RunIdentifier(run_name=run_name, run_time=self._run_time(f"{self.prefix}-{frame}", run_name))

    def _run_time(self, suite: str, run_name: str):
        """The run time of a batch's validation: the one its earlier validation stored under
        ``results_dir`` (a restart replaying the batch: the same results file and page, not a
        second), else the clock (UTC).  Never part of a row (``batch_page``)."""
        from datetime import datetime, timezone

        if self.results_dir is None:
            return self._run_times.setdefault((suite, run_name), datetime.now(timezone.utc))
        return _first_run_time(self.results_dir / suite / run_name) or datetime.now(timezone.utc)

    def _page(self, vr_id) -> str | None:
        """The ``docs`` of a validation's rows: its batch's stable page (``batch_page``)."""
        if not self.docs_dir:
            return None
        try:
            suite, run_name = (str(p) for p in vr_id.to_tuple()[:2])
        except Exception:  # pragma: no cover - GX internals differ between versions
            return None
        return batch_page(suite, run_name)

    def build_docs(self) -> Path | None:
        """GX (re)builds every page; then the pages are made to work offline (``make_docs_offline``)."""
        if not self.docs_dir:
            return None
        self.context.build_data_docs(site_names=["replemu"])
        write_batch_pages(self.docs_dir)
        for url, pages in sorted(make_docs_offline(self.docs_dir).items()):
            print(f"replemu: Data Docs: {len(pages)} page(s) load {url} from the network (not in "
                  f"expectations.suites.OFFLINE_URLS), e.g. {pages[0]}", file=sys.stderr)
        return self.docs_dir / "index.html"


# --- A batch's stable Data Docs page ----------------------------------------------------------------
# GX writes a validation's page at validations/SUITE/RUN_NAME/RUN_TIME/ASSET.html: the run time (the
# clock when the batch was validated) is in the path. The validation rows (OUTPUT/validations) must
# be the same in every run of the same input, so their ``docs`` column holds
# batches/SUITE/RUN_NAME.html, a page each Data Docs build writes that leads (an HTML refresh and a
# link, no script) to the batch's dated page. It lives outside validations/, which GX reads back as
# its own pages (and cleans of those whose results are gone).

RUN_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"  # GX's run time in a results file's and a page's path
BATCH_PAGES = "batches"  # under data_docs/


def batch_page(suite: str, run_name: str) -> str:
    """A batch's stable page, relative to the Data Docs: the same in every run of the same input."""
    return f"{BATCH_PAGES}/{suite}/{run_name}.html"


def _run_times(run_dir: Path) -> list[tuple[Any, str]]:
    """(run time, directory name) of every run-time directory under ``run_dir``, earliest first."""
    from datetime import datetime, timezone

    try:
        names = [e.name for e in os.scandir(run_dir) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    found = []
    for name in names:
        try:
            found.append((datetime.strptime(name, RUN_TIME_FORMAT).replace(tzinfo=timezone.utc), name))
        except ValueError:
            continue
    return sorted(found)


def _first_run_time(run_dir: Path):
    times = _run_times(run_dir)
    return times[0][0] if times else None


def _batch_page_html(run_name: str, suite: str, target: str, run_time) -> str:
    import html

    when = run_time.strftime("%Y-%m-%d %H:%M:%S UTC")
    href = html.escape(target, quote=True)
    label = html.escape(f"{run_name} ({suite}), validated {when}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"refresh\" content=\"0; url={href}\">\n"
            f"<title>{label}</title></head>\n"
            f"<body><p>GX Data Docs: <a href=\"{href}\">{label}</a></p></body></html>\n")


def write_batch_pages(docs_dir: Path) -> int:
    """Every validated batch's stable page (``batch_page``) under ``docs_dir``, leading to its
    dated GX page (the earliest, should a batch have several); a page is written only when its
    text changes, and one whose GX page is gone is removed.  Returns how many were written."""
    docs_dir = Path(docs_dir)
    wanted: dict[Path, str] = {}
    for suite_dir in sorted(p for p in (docs_dir / "validations").glob("*") if p.is_dir() and not p.is_symlink()):
        for run_dir in sorted(p for p in suite_dir.iterdir() if p.is_dir() and not p.is_symlink()):
            for run_time, name in _run_times(run_dir):
                pages = sorted(p.name for p in (run_dir / name).glob("*.html") if p.is_file())
                if pages:
                    target = f"../../validations/{suite_dir.name}/{run_dir.name}/{name}/{pages[0]}"
                    wanted[docs_dir / batch_page(suite_dir.name, run_dir.name)] = _batch_page_html(
                        run_dir.name, suite_dir.name, target, run_time)
                    break
    for page in (docs_dir / BATCH_PAGES).glob("*/*.html"):
        if page not in wanted:
            page.unlink()
    written = 0
    for page, text in wanted.items():
        try:
            if page.read_text(encoding="utf-8") == text:
                continue
        except OSError:
            pass
        page.parent.mkdir(parents=True, exist_ok=True)
        tmp = page.with_name(f".{page.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, page)
        written += 1
    return written


# --- Data Docs that work offline ----------------------------------------------------------------
# GX 1.24.1's page templates load their CSS, scripts and fonts from CDNs, and cannot be overridden.
# After every build the pages are rewritten to load copies that ship with this package
# (expectations/data/docs_assets/, fetched from the npm registry by scripts/vendor_docs_assets.sh
# and copied to data_docs/static/vendor/), by paths relative to each page, so the docs work opened
# from disk (file://) and served over HTTP.

VENDOR_DIR = "static/vendor"  # under data_docs/: <npm package>/<version>/<path in the package>

# Every URL a GX 1.24.1 page loads from the network -> the file under data_docs/ that replaces it.
# A vendored path names the npm package, its version and the file in the package
# (scripts/vendor_docs_assets.sh fetches exactly these). Floating jsdelivr versions (vega@5 …) are
# pinned to the release they resolved to when vendored (the file jsdelivr serves: package.json's
# "jsdelivr" field); bootstrap-prefers-dark.css is replaced by the same release's minified twin
# (the unminified one carries a 700 KB inline source map); GX's S3 logos by GX's own copy of its
# logo, which every build writes to static/images/.
OFFLINE_URLS: dict[str, str] = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css":
        "static/vendor/bootstrap/4.3.1/dist/css/bootstrap.min.css",
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js":
        "static/vendor/bootstrap/4.3.1/dist/js/bootstrap.min.js",
    "https://code.jquery.com/jquery-3.7.1.min.js":
        "static/vendor/jquery/3.7.1/dist/jquery.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js":
        "static/vendor/popper.js/1.12.9/dist/umd/popper.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css":
        "static/vendor/@fortawesome/fontawesome-free/6.6.0/css/all.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css":
        "static/vendor/bootstrap-table/1.19.1/dist/bootstrap-table.min.css",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js":
        "static/vendor/bootstrap-table/1.19.1/dist/bootstrap-table.min.js",
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js":
        "static/vendor/bootstrap-table/1.19.1/dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css":
        "static/vendor/bootstrap-table/1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css",
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css":
        "static/vendor/bootstrap-table/1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css":
        "static/vendor/bootstrap-datepicker/1.9.0/dist/css/bootstrap-datepicker.min.css",
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js":
        "static/vendor/bootstrap-datepicker/1.9.0/dist/js/bootstrap-datepicker.min.js",
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css":
        "static/vendor/@forevolve/bootstrap-dark/1.1.0/dist/css/bootstrap-prefers-dark.min.css",
    "https://cdn.jsdelivr.net/npm/vega@5": "static/vendor/vega/5.33.1/build/vega.min.js",
    "https://cdn.jsdelivr.net/npm/vega-lite@5": "static/vendor/vega-lite/5.23.0/build/vega-lite.min.js",
    "https://cdn.jsdelivr.net/npm/vega-embed@6": "static/vendor/vega-embed/6.29.0/build/vega-embed.min.js",
    "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png": "static/images/logo-long.png",
    "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/full_logo_dark.png": "static/images/logo-long.png",
}

# Files the vendored files load themselves (no page names them): font-awesome's CSS loads its
# webfonts. Only the WOFF2 faces ship: all.min.css lists each face as woff2 first and a TrueType
# fallback second, which only a browser without WOFF2 support (none current) would fetch.
VENDORED_DEPENDENCIES: tuple[str, ...] = tuple(
    f"static/vendor/@fortawesome/fontawesome-free/6.6.0/webfonts/{face}.woff2"
    for face in ("fa-brands-400", "fa-regular-400", "fa-solid-900", "fa-v4compatibility"))


def vendored_files() -> list[tuple[str, str, str]]:
    """(npm package, version, path in the package) of every vendored file but the licenses: what
    ``scripts/vendor_docs_assets.sh`` fetches."""
    files = set()
    for path in [*OFFLINE_URLS.values(), *VENDORED_DEPENDENCIES]:
        if path.startswith(VENDOR_DIR + "/"):
            parts = path[len(VENDOR_DIR) + 1:].split("/")
            n = 2 if parts[0].startswith("@") else 1  # a scoped package: @scope/name
            files.add(("/".join(parts[:n]), parts[n], "/".join(parts[n + 1:])))
    return sorted(files)


_URL = re.compile(r"""https?://[^\s"'()<>\\]+""")
_VENDORED_TAG = re.compile(r"<(?:script|link)\s[^>]*\b(?:src|href)=\"(?:\.\./)*static/vendor/[^>]*>")
_SRI_ATTR = re.compile(r"\s+(?:integrity|crossorigin)=\"[^\"]*\"")
_STATIC = re.compile("static/")
_BEFORE_STATIC = ('src="', "src='", 'href="', "href='", "url(", "url('", 'url("')
_LINK_START = re.compile(r"<a\s")
_NAMESPACE_END = re.compile(r"\bxmlns(?::\w+)?=[\"']$")


def offline_page(text: str, depth: int) -> tuple[str, list[str]]:
    """A GX page's text with every CDN URL of ``OFFLINE_URLS`` replaced by the relative path of its
    copy (``depth``: how many directories the page is below data_docs/), and the URLs it still
    loads from the network (any outside an ``<a …>`` link tag or an XML namespace).
    Deterministic and idempotent.

    The two scripts GX loads with ``integrity``/``crossorigin`` lose both: a page opened from disk
    has an opaque origin, and Chromium refuses a CORS or integrity-checked load from it (the
    vendored bytes are checked against those hashes when they are fetched). Every reference to
    data_docs/static/ gets the page's own depth: GX's favicon link on a validation page is one
    ``../`` short."""
    prefix = "../" * depth

    def local(m: re.Match) -> str:
        url = m.group(0)
        path = OFFLINE_URLS.get(url.split("#")[0].split("?")[0])  # GX adds ?d=<build time> to its logo
        return prefix + path if path else url

    text = _URL.sub(local, text)
    text = _static_refs(text, prefix)
    text = _VENDORED_TAG.sub(lambda m: _SRI_ATTR.sub("", m.group(0)), text)
    return text, sorted({m.group(0) for m in _URL.finditer(text) if not _in_link(text, m.start())})


def _static_refs(text: str, prefix: str) -> str:
    """Every ``src=``/``href=``/``url(`` reference ``(../)*static/…`` made ``prefix + static/…``."""
    parts, done = [], 0
    for m in _STATIC.finditer(text):  # a literal: scanning ~100 KB pages this way takes microseconds
        start = m.start()
        while start >= 3 and text.startswith("../", start - 3):
            start -= 3
        if start >= done and text[max(0, start - 6):start].endswith(_BEFORE_STATIC) and text[start:m.start()] != prefix:
            parts += [text[done:start], prefix]
            done = m.start()
    return "".join(parts) + text[done:] if parts else text


def _in_link(text: str, at: int) -> bool:
    """Whether position ``at`` lies inside an ``<a …>`` tag (a link the reader may follow) or is an
    XML namespace name: neither is loaded."""
    lt = text.rfind("<", 0, at)
    inside_tag = lt >= 0 and text.find(">", lt, at) < 0
    return (inside_tag and _LINK_START.match(text, lt) is not None) or _NAMESPACE_END.search(text, max(0, at - 40), at) is not None


def _docs_assets():
    from importlib.resources import files

    return files("expectations") / "data" / "docs_assets"


def install_docs_assets(docs_dir: Path) -> int:
    """Copy the vendored files (MANIFEST.txt lists them, with the licenses) to
    ``docs_dir/static/vendor/`` unless a file is there already with the same content; returns how
    many were written."""
    import hashlib

    source = _docs_assets()
    target = Path(docs_dir) / VENDOR_DIR
    manifest = source.joinpath("MANIFEST.txt").read_bytes()
    written = 0
    for name, digest in [("MANIFEST.txt", hashlib.sha256(manifest).hexdigest()), *_manifest_files(manifest.decode())]:
        dest = target / name
        try:
            if hashlib.sha256(dest.read_bytes()).hexdigest() == digest:
                continue
        except OSError:
            pass
        data = source.joinpath(name).read_bytes()
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        written += 1
    return written


def _manifest_files(manifest: str) -> list[tuple[str, str]]:
    """(path under docs_assets/, sha256) of every line of MANIFEST.txt: package version file sha256."""
    rows = []
    for line in manifest.splitlines():
        if line.strip() and not line.startswith("#"):
            package, version, file, digest = line.split()
            rows.append((f"{package}/{version}/{file}", digest))
    return rows


def make_docs_offline(docs_dir: Path) -> dict[str, list[str]]:
    """Install the vendored assets into ``docs_dir`` and rewrite every page (GX rewrites all of them
    at every build) to load them; a page is written only when its text changes. Returns each URL
    a page still loads from the network -> the pages (relative paths) that do."""
    docs_dir = Path(docs_dir)
    install_docs_assets(docs_dir)
    remaining: dict[str, list[str]] = {}
    for page in sorted(docs_dir.rglob("*.html")):
        rel = page.relative_to(docs_dir)
        text = page.read_bytes().decode("utf-8")
        new, urls = offline_page(text, len(rel.parts) - 1)
        if new != text:
            tmp = page.with_name(page.name + ".tmp")
            tmp.write_bytes(new.encode("utf-8"))
            os.replace(tmp, page)
        for url in urls:
            remaining.setdefault(url, []).append(rel.as_posix())
    return remaining


def materialized(df) -> tuple[Any, Any]:
    """``df`` computed once on the executors and kept there, and the function that releases it.

    A classic session checkpoints it locally (``localCheckpoint``: its blocks on the executors, its
    plan cut to a scan of them, their order kept): GX builds a new query for every metric, and
    Spark analyses and optimises the frame's whole plan (from_json, the window, the join, the
    sort) for each of them over a cached one; over the checkpoint it plans a scan. The
    checkpoint's blocks are released at once, not left to the JVM's garbage collector. Spark
    Connect (no JVM here) caches it instead."""
    if hasattr(df, "_jdf"):  # classic pyspark: the Dataset behind the Python object
        checkpoint = df.localCheckpoint(eager=True)
        rdd = checkpoint._jdf.queryExecution().logical().rdd()  # a LogicalRDD over the checkpointed RDD
        return checkpoint, lambda: rdd.unpersist(False)
    df = df.persist()
    return df, df.unpersist


def _error_rows(batch_id: int, exc: Exception) -> list[dict]:
    return [{"batch_id": batch_id, "invariant": None, "expectation": "validation_error", "frame": None,
             "success": False, "unexpected_count": 0, "partitions": [], "docs": f"{type(exc).__name__}: {exc}"}]


RESULTS_DIR = "gx_results"  # OUTPUT/gx_results: GX's validation results, read by every Data Docs build
VALIDATION_COLUMNS = ("invariant", "expectation", "frame", "success", "unexpected_count", "partitions", "docs")


def write_validations(output_dir: Path, batch_id: int, rows: list[dict]) -> None:
    """``OUTPUT/validations/batch_id=N/part-0.parquet``: one row per expectation, replaced on replay."""
    import pyarrow as pa

    schema = pa.schema([("invariant", pa.string()), ("expectation", pa.string()), ("frame", pa.string()),
                        ("success", pa.bool_()), ("unexpected_count", pa.int64()), ("partitions", pa.list_(pa.string())),
                        ("docs", pa.string())])
    rows = sorted(rows, key=lambda r: (r["frame"] or "", r["invariant"] or "", r["expectation"]))
    table = pa.Table.from_pylist([{k: r[k] for k in VALIDATION_COLUMNS} for r in rows], schema=schema)
    write_batch_dir(output_dir / "validations" / batch_dir_name(batch_id), table)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


@dataclass
class ExpectationsObserver:
    """The streaming job's ``BatchObserver``: validates every micro-batch's outputs, writes
    ``OUTPUT/validations`` and the GX Data Docs; a failure never stops the stream.

    Two entry points, the same ``validations`` rows, results files and Data Docs: ``on_batch``
    (kind -> pandas frame, validated in this process) and ``on_spark_batch`` (kind -> Spark
    DataFrame: the frames are built and validated by Spark, on the executors)."""

    docs_every: int = 20  # rebuild the Data Docs every N batches (and at the end of a run)
    # A validation frame of at most this many rows (``frame_engines``) is computed by Spark and
    # validated in this process (Arrow, then the pandas engine); a larger one where it is (the
    # Spark engine).  The Spark engine's cost is fixed but large (a dozen small Spark jobs and GX's
    # planning of each metric: ~2.5 s a 1,000-partition batch on local[2] against ~1 s here), the
    # local one grows with the rows: below the limit the local engine is the cheaper one, and the
    # driver's memory stays bounded by the limit however many partitions the stream has.  0:
    # always Spark.
    driver_rows_limit: int = 100_000
    family: str = "partition"  # "quorum": a metadata-quorum stream's rows, the quorum registry's suites
    validation_ms: list[float] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)  # the engine of each validated batch
    _validators: dict = field(default_factory=dict)
    _validator: Any = None  # the last one used (Data Docs are built from the results on disk)

    def validator(self, output_dir: Path, engine: str = "pandas") -> BatchValidator:
        if engine not in self._validators:
            self._validators[engine] = BatchValidator(Path(output_dir) / "data_docs", Path(output_dir) / RESULTS_DIR, engine=engine,
                                                      family=self.family)
        self._validator = self._validators[engine]
        return self._validator

    def on_batch(self, frames, batch_id: int, output_dir: Path) -> None:
        started = time.perf_counter()
        rows = self._validate_frames(lambda: frames, batch_id, output_dir)
        self._record(rows, batch_id, output_dir, _ms_since(started))

    def _validate_frames(self, frames: Callable[[], dict[str, Any]], batch_id: int, output_dir: Path) -> list[dict]:
        """The suites on the output frames ``frames()`` gives (kind -> pandas); a failure, of the
        fetch or of the validation, becomes the batch's error rows."""
        try:
            return self.validator(output_dir).validate(frames_from_outputs(frames(), self.family), batch_id)
        except Exception as exc:  # noqa: BLE001 - recorded, never raised into the query
            return _error_rows(batch_id, exc)

    def on_spark_batch(self, kinds: Any, batch_id: int, output_dir: Path, counts: dict[str, int] | None = None) -> None:
        """The suites on one micro-batch: ``kinds`` maps an output kind to a Spark DataFrame;
        ``counts`` (rows per kind, when the caller knows them) picks the engines: a batch of at most
        ``driver_rows_limit`` rows of the validated kinds has them fetched and validated here
        (``on_batch``: three plain fetches, ~0.4 s for a small batch against ~1.7 s for the frames
        computed by Spark), a larger one each frame as ``frame_engines`` says (``on_spark``)."""
        self.begin_spark_batch(kinds, batch_id, output_dir, counts)()

    def begin_spark_batch(self, kinds: Any, batch_id: int, output_dir: Path,
                          counts: dict[str, int] | None = None) -> Callable[[], None]:
        """``on_spark_batch`` in two parts, for a sink that validates a micro-batch while its
        writes run (``streaming.sink.ParquetSink.land``): this part validates (the Spark jobs that
        compute or fetch the frames, GX here) and returns the part that records the results
        (``OUTPUT/validations``, the Data Docs every ``docs_every`` batches), which the sink calls
        once the batch's other kinds landed. Never raises: a failure becomes the batch's error rows."""
        from expectations.spark_frames import VALIDATED_KINDS

        started = time.perf_counter()
        if (isinstance(kinds, dict) and counts is not None
                and sum(int(counts.get(k, 0)) for k in VALIDATED_KINDS) <= self.driver_rows_limit):
            from streaming.sink import sorted_kind_table

            self.engines.append("pandas")
            rows = self._validate_frames(
                lambda: {k: sorted_kind_table(k, df.toArrow()).to_pandas() for k, df in kinds.items() if k in VALIDATED_KINDS},
                batch_id, output_dir)
        else:
            rows = self._validate_spark(kinds, batch_id, output_dir, counts)
        elapsed_ms = _ms_since(started)
        return lambda: self._record(rows, batch_id, output_dir, elapsed_ms)

    def frame_engines(self, counts: dict[str, int] | None) -> dict[str, str]:
        """Where each validation frame is validated: a frame of at most ``driver_rows_limit`` rows
        (``FRAME_ROWS``: a timeline row per ``timeline`` row, a partitions row per ``summary`` row)
        is computed by Spark and brought here (the pandas engine), a larger one, or any frame when
        the counts are unknown, is validated where it is (the Spark engine)."""
        if counts is None:
            return {frame: "spark" for frame in FRAME_ROWS}
        return {frame: "pandas" if int(counts.get(kind, 0)) <= self.driver_rows_limit else "spark"
                for frame, kind in FRAME_ROWS.items()}

    def on_spark(self, kinds: Any, batch_id: int, output_dir: Path, counts: dict[str, int] | None = None) -> None:
        """The suites on one micro-batch where its rows are: ``kinds`` maps an output kind to a
        Spark DataFrame of (at least) its ``KIND_COLUMNS`` (a kind without rows may be missing),
        or is the micro-batch's DataFrame of ``OUTPUT_SCHEMA`` rows (a ``kind`` column), persisted
        by the caller so that it is not computed again.
        The two validation frames are computed by Spark (``spark_frames``).  Each is then, as
        ``frame_engines`` says, either brought here (its rows: at most ``driver_rows_limit``;
        the ``log`` kind never is, Spark reduces it to one value per partition) and validated by
        GX's pandas engine, or kept on the executors while GX's Spark datasource validates it
        (``materialized``) and released: the driver then receives O(expectations) values and at
        most ``OFFENDING_LIMIT`` offending rows per failed expectation."""
        started = time.perf_counter()
        rows = self._validate_spark(kinds, batch_id, output_dir, counts)
        self._record(rows, batch_id, output_dir, _ms_since(started))

    def _validate_spark(self, kinds: Any, batch_id: int, output_dir: Path, counts: dict[str, int] | None) -> list[dict]:
        from expectations.spark_frames import kind_dataframes, local_frame, validation_frames_spark

        engines = self.frame_engines(counts)
        releases: list = []
        rows: list[dict] = []
        try:
            if not isinstance(kinds, dict):
                kinds = kind_dataframes(kinds)
            # The ordered frames only for the Spark engine (building a frame is ~100 py4j calls).
            unordered = validation_frames_spark(kinds, ordered=False, family=self.family)
            ordered = validation_frames_spark(kinds, family=self.family) if "spark" in engines.values() else {}
            for name in unordered:  # timeline, then partitions
                if engines[name] == "pandas":
                    frame = local_frame(name, unordered[name].toPandas(), self.family)
                else:
                    frame, release = materialized(ordered[name])
                    releases.append(release)
                rows += self.validator(output_dir, engines[name]).validate({name: frame}, batch_id)
        except Exception as exc:  # noqa: BLE001 - recorded, never raised into the query
            rows = _error_rows(batch_id, exc)
        finally:
            for release in releases:
                release()
        used = sorted(set(engines.values()))
        self.engines.append(used[0] if len(used) == 1 else "+".join(used))
        return rows

    def _record(self, rows: list[dict], batch_id: int, output_dir: Path, elapsed_ms: float) -> None:
        self.validation_ms.append(elapsed_ms)
        write_validations(Path(output_dir), batch_id, rows)
        if self.docs_every and batch_id % self.docs_every == 0:
            self.finish(output_dir)

    def finish(self, output_dir: Path) -> None:
        if self._validator is None and (Path(output_dir) / RESULTS_DIR).is_dir():
            self.validator(output_dir)  # a start with no batch of its own still rebuilds the earlier starts' pages
        if self._validator is not None:
            try:
                self._validator.build_docs()
            except Exception as exc:  # noqa: BLE001
                print(f"replemu: Data Docs not built: {exc}", file=sys.stderr)
