"""Expectation suites on every micro-batch, Data Docs, and the dashboard."""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from emulator.invariants import INVARIANT_NAMES
from replemu.dashboard import write_dashboard
from expectations.suites import BatchValidator, ExpectationsObserver, build_checks
from replemu.compile import compile_scenarios
from streaming.job import run_stream

from conftest import BUNDLED, replemu

S1 = BUNDLED / "s1-kip101-scenario-1.yaml"


def validations(output: Path) -> pd.DataFrame:
    import pyarrow.dataset as ds

    return ds.dataset(str(output / "validations"), format="parquet", partitioning="hive").to_table().to_pandas()


@pytest.fixture(scope="module")
def s1_streams(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("s1")
    compile_scenarios([S1], root / "events", split=3)
    for protocol in ("hw", "kip320"):
        run_stream(root / "events", root / protocol, root / f"ckpt-{protocol}", protocol, max_files_per_trigger=1, spark=spark, quiet=True,
                   observer=ExpectationsObserver())
    return root


def test_each_invariants_expectation_fails_on_exactly_that_invariants_partitions():
    """A partitions frame where row k says only invariant k is broken: GX must fail, for every
    invariant, the expectation carrying that name and blame exactly that row's partition."""
    rows = [{"partition_key": f"t-{name}/0", "leader_in_isr": True, "offsets_contiguous": True,
             **{other: other == name for other in INVARIANT_NAMES}} for name in INVARIANT_NAMES]
    frame = pd.DataFrame(rows)
    empty_timeline = pd.DataFrame(columns=["topic", "partition", "seq", "replica", "role", "alive", "leo", "hw",
                                           "leader_epoch", "cache_increasing", "leading"])
    results = BatchValidator().validate({"timeline": empty_timeline, "partitions": frame}, 0)
    failed = {(r["invariant"], tuple(r["partitions"])) for r in results if not r["success"]}
    assert failed == {(name, (f"t-{name}/0",)) for name in INVARIANT_NAMES}


def test_s1_under_hw_fails_the_expectations_named_after_the_violated_invariants(s1_streams):
    v = validations(s1_streams / "hw")
    assert set(v["batch_id"]) == {0, 1, 2}
    assert list(v.columns[:6]) == ["invariant", "expectation", "frame", "success", "unexpected_count", "partitions"]
    failed = set(v[~v["success"]]["invariant"])
    assert {"NoCommittedDataLoss", "StrongIsr", "EventualConvergence"} <= failed
    row = v[(v["invariant"] == "StrongIsr") & ~v["success"]].iloc[0]
    assert list(row["partitions"]) == ["s1-kip101-scenario-1/0"] and row["unexpected_count"] == 1


def test_s1_under_kip320_passes_every_expectation(s1_streams):
    v = validations(s1_streams / "kip320")
    assert len(v) == 3 * len(build_checks())  # three batches
    assert v["success"].all()


def test_data_docs_are_written_and_linked(s1_streams):
    docs = s1_streams / "hw" / "data_docs"
    assert (docs / "index.html").exists()
    pages = set(validations(s1_streams / "hw")["docs"])
    assert pages and all((docs / p).exists() for p in pages)


def test_structural_expectations_catch_broken_rows():
    """The GX-evaluated checks fail on rows that break them (not only on core verdicts)."""
    frames = {
        "timeline": pd.DataFrame([
            {"topic": "t", "partition": 0, "seq": 1, "replica": 1, "role": "leader", "alive": True, "leo": 1, "hw": 2,
             "leader_epoch": 3, "cache_increasing": True, "leading": True},
            {"topic": "t", "partition": 0, "seq": 1, "replica": 2, "role": "leader", "alive": True, "leo": 1, "hw": 1,
             "leader_epoch": 3, "cache_increasing": False, "leading": True},
            {"topic": "t", "partition": 0, "seq": 1, "replica": 3, "role": "none", "alive": False, "leo": 0, "hw": 5,
             "leader_epoch": -1, "cache_increasing": True, "leading": False},
        ]),
        "partitions": pd.DataFrame([{"partition_key": "t/0", "leader_in_isr": False, "offsets_contiguous": False,
                                     **{n: False for n in INVARIANT_NAMES}}]),
    }
    rows = BatchValidator(None).validate(frames, 0)
    failed = {r["invariant"]: r for r in rows if not r["success"]}
    assert set(failed) == {"HighWatermarkSanity", "UniqueLeaderPerEpoch", "EpochMonotonicity", "LeaderInIsr", "OffsetMonotonicity"}
    assert failed["HighWatermarkSanity"]["unexpected_count"] == 1  # the dead replica's stale HW is not judged
    assert failed["LeaderInIsr"]["partitions"] == ["t/0"]


class _Checker(HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.external = [], [], []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("src", "href") and v and re.match(r"^(https?:)?//", v):
                self.external.append(v)
        if tag == "link":
            self.external.append(dict(attrs).get("href"))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def page_data(page: Path) -> dict:
    text = page.read_text()
    raw = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


def check_page(page: Path):
    checker = _Checker()
    checker.feed(page.read_text())
    assert checker.errors == [] and checker.stack == []
    assert checker.external == []
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_dashboard_of_stream_runs_has_the_chosen_partitions_timeline(s1_streams, tmp_path):
    page = write_dashboard([s1_streams / "hw", s1_streams / "kip320"], tmp_path / "dash", chosen="s1-kip101-scenario-1/0")
    check_page(page)
    data = page_data(page)
    assert [r["protocol"] for r in data["runs"]] == ["hw", "kip320"]
    p = data["runs"][0]["partitions"][0]
    assert p["key"] == "s1-kip101-scenario-1/0" and p["timeline"]["steps"] == list(range(1, 21))
    assert p["timeline"]["replicas"]["1"]["leo"][11] == 1  # the truncation at step 12
    assert [l["value"] for l in p["losses"]] == ["m2"]
    assert data["runs"][0]["batches"][2]["validations"] and data["runs"][0]["docs_index"].endswith("index.html")


def test_dashboard_of_a_replemu_run_result(tmp_path):
    result = replemu("run", str(S1), "--protocol", "all", "--json", "--trace")
    (tmp_path / "r.json").write_text(result.stdout)
    out = replemu("dashboard", str(tmp_path / "r.json"), "--output", str(tmp_path / "dash"))
    assert out.returncode == 0, out.stderr
    page = tmp_path / "dash" / "dashboard.html"
    check_page(page)
    runs = page_data(page)["runs"]
    assert [r["protocol"] for r in runs] == ["hw", "kip101", "kip279", "kip320"]
    assert runs[0]["partitions"][0]["timeline"]["replicas"]["2"]["hw"][-1] == 2
    bad = replemu("dashboard", str(tmp_path / "missing.json"), "--output", str(tmp_path / "d2"))
    assert bad.returncode == 2 and "neither a replemu result JSON file nor a stream output directory" in bad.stderr


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is installed by scripts/test.sh")
def test_dashboard_renders_in_headless_chromium_without_script_errors(s1_streams, tmp_path):
    page = write_dashboard([s1_streams / "hw"], tmp_path / "dash")
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout
    assert 'data-rendered="ok"' in dom and "data-error" not in dom
    assert dom.count("<path") >= 4  # LEO and HW lines of both replicas


def test_data_docs_after_a_restart_still_show_the_batches_validated_before_it(spark, tmp_path):
    """GX keeps its validation results on disk (OUTPUT/gx_results), so the Data Docs a restarted
    job builds link every batch's page, not only the batches of its last start."""
    compile_scenarios([S1], tmp_path / "all", split=3)
    files = sorted((tmp_path / "all").iterdir())
    events = tmp_path / "events"
    events.mkdir()
    for start, present in enumerate((files[:2], files[2:])):  # the second start finds one more file
        for f in present:
            shutil.copy2(f, events / f.name)
        run_stream(events, tmp_path / "out", tmp_path / "ck", "hw", max_files_per_trigger=1, spark=spark, quiet=True,
                   observer=ExpectationsObserver())
    v = validations(tmp_path / "out")
    assert set(v["batch_id"]) == {0, 1, 2}
    docs = tmp_path / "out" / "data_docs"
    pages = set(v["docs"])
    assert all((docs / p).exists() for p in pages), sorted(p for p in pages if not (docs / p).exists())
    index = (docs / "index.html").read_text()
    assert all(f"batch-{b:06d}" in index for b in (0, 1, 2))
