"""Expectation suites on every micro-batch, Data Docs, and the dashboard."""

import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from conftest import BUNDLED, replemu
from emulator import VARIANT_NAMES
from emulator.invariants import INVARIANT_NAMES
from expectations.suites import (
    OFFLINE_URLS,
    RUN_TIME_FORMAT,
    BatchValidator,
    ExpectationsObserver,
    build_checks,
    make_docs_offline,
    offline_page,
    vendored_files,
)
from replemu.compile import compile_scenarios
from replemu.dashboard import write_dashboard
from streaming.job import run_stream

S1 = BUNDLED / "s1-kip101-scenario-1.yaml"


def validations(output: Path) -> pd.DataFrame:
    import pyarrow.dataset as ds

    return ds.dataset(str(output / "validations"), format="parquet", partitioning="hive").to_table().to_pandas()


WINDOWS: dict[str, tuple[datetime, datetime]] = {}  # a stream of s1_streams -> the clock before and after it


def now() -> datetime:
    return datetime.now(timezone.utc)


@pytest.fixture(scope="module")
def s1_streams(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("s1")
    compile_scenarios([S1], root / "events", split=3)
    for protocol in ("hw", "kip320"):
        before = now()
        run_stream(root / "events", root / protocol, root / f"ckpt-{protocol}", protocol, max_files_per_trigger=1, spark=spark, quiet=True,
                   observer=ExpectationsObserver())
        WINDOWS[protocol] = (before, now())
    return root


def dated_page(docs: Path, stable: str) -> tuple[Path, datetime, str]:
    """The GX page a validation row's stable ``docs`` page leads to (its refresh and its link say
    the same), the run time in its path, and its text."""
    text = (docs / stable).read_text(encoding="utf-8")
    refresh = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', text)
    links = re.findall(r'<a href="([^"]+)">', text)
    assert refresh and links == [refresh.group(1)], text
    page = Path(os.path.normpath((docs / stable).parent / refresh.group(1)))
    when = datetime.strptime(page.parent.name, RUN_TIME_FORMAT).replace(tzinfo=timezone.utc)
    return page, when, page.read_text(encoding="utf-8")


def test_a_batchs_data_docs_page_is_dated_by_its_validation_and_a_replay_keeps_it(tmp_path):
    """The Data Docs dated every run 2000-01-01 (issue 46). A batch's GX page is dated by the
    clock when it was validated; its rows hold the batch's stable page, which leads there; a
    restart replaying the batch writes the same rows and keeps the same dated page."""
    frames = {"partitions": pd.DataFrame([{"partition_key": "t/0", "leader_in_isr": True, "offsets_contiguous": True,
                                           **{n: False for n in INVARIANT_NAMES}}])}
    before = now()
    first = ExpectationsObserver().validator(tmp_path).validate(frames, 3)
    after = now()
    restarted = ExpectationsObserver()
    assert restarted.validator(tmp_path).validate(frames, 3) == first
    restarted.finish(tmp_path)
    assert {r["docs"] for r in first} == {"batches/replemu-partitions/batch-000003-partitions.html"}
    page, when, text = dated_page(tmp_path / "data_docs", first[0]["docs"])
    assert before <= when <= after, when
    assert when.strftime("%Y-%m-%dT%H:%M:%SZ") in text and "2000-01-01" not in text
    assert [p.name for p in page.parent.parent.iterdir()] == [page.parent.name]  # one page, not two
    assert when.strftime("%Y-%m-%d %H:%M:%S UTC") in (tmp_path / "data_docs" / "index.html").read_text(encoding="utf-8")


def test_two_runs_of_the_same_input_write_identical_validation_rows_and_date_their_data_docs_by_their_run(spark, s1_streams):
    """Same input, same rows: the validation rows of a second run are the first's, byte for byte;
    the Data Docs pages their links lead to are dated by each run's own clock."""
    again = s1_streams / "hw-again"
    before = now()
    run_stream(s1_streams / "events", again, s1_streams / "ckpt-hw-again", "hw", max_files_per_trigger=1, spark=spark,
               quiet=True, observer=ExpectationsObserver())
    after = now()

    def parquet(out: Path) -> dict[str, bytes]:
        return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "validations").rglob("*.parquet"))}

    first = parquet(s1_streams / "hw")
    assert len(first) == 3 and parquet(again) == first
    stable = sorted(set(validations(again)["docs"]))
    assert len(stable) == 6  # three batches, two frames each
    for rel in stable:
        _, when_first, _ = dated_page(s1_streams / "hw" / "data_docs", rel)
        _, when_again, text = dated_page(again / "data_docs", rel)
        assert WINDOWS["hw"][0] <= when_first <= WINDOWS["hw"][1] < before <= when_again <= after, rel
        assert when_again.strftime("%Y-%m-%dT%H:%M:%SZ") in text


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
    assert [r["protocol"] for r in runs] == list(VARIANT_NAMES)
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
    for present in (files[:2], files[2:]):  # the second start finds one more file
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


# --- Data Docs offline: GX's pages load their CSS, scripts and fonts from CDNs; every build rewrites
# them to load the copies shipped in expectations/data/docs_assets (static/vendor/ under data_docs).

class _Loads(HTMLParser):
    """What a page loads: src-like attributes, <link href>, url(...) in styles; links are not loads."""

    def __init__(self):
        super().__init__()
        self.loads, self._style = [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.loads += [a[k] for k in ("src", "data", "poster") if a.get(k)]
        self.loads += [u.strip().split(" ")[0] for u in (a.get("srcset") or "").split(",") if u.strip()]
        if tag == "link" and a.get("href"):
            self.loads.append(a["href"])
        self.loads += re.findall(r"url\(\s*['\"]?([^'\")]+)", a.get("style") or "")
        self._style = tag == "style"

    def handle_data(self, data):
        if self._style:
            self.loads += re.findall(r"url\(\s*['\"]?([^'\")]+)", data)

    def handle_endtag(self, tag):
        self._style = False


def network_urls(text: str) -> list[str]:
    """Every http(s) URL of a page outside an ``<a …>`` tag (a link the reader may follow; an XML
    namespace is no load either): in src=, <link href>, url(...), inline scripts or anywhere else."""
    text = re.sub(r"<a\s[^>]*>|\bxmlns(?::\w+)?=\"[^\"]*\"", " ", text)
    return re.findall(r"https?://[^\s\"'()<>]+", text)


def test_data_docs_pages_load_nothing_from_the_network_and_every_asset_is_there(s1_streams):
    for protocol in ("hw", "kip320"):
        docs = s1_streams / protocol / "data_docs"
        pages = sorted(docs.rglob("*.html"))
        assert docs / "index.html" in pages and any("validations" in p.parts for p in pages)
        for page in pages:
            text = page.read_text()
            assert network_urls(text) == [], page
            if page.relative_to(docs).parts[0] == "batches":  # a batch's stable page: it loads nothing
                assert dated_page(docs, page.relative_to(docs).as_posix())[0].is_file(), page
                continue
            parser = _Loads()
            parser.feed(text)
            assert parser.loads, page
            for url in parser.loads:
                assert not url.startswith("//") and ":" not in url.split("/")[0], (page, url)  # no scheme, no host
                assert (page.parent / url.split("?")[0].split("#")[0]).resolve().is_file(), (page, url)


def test_data_docs_rewrite_is_deterministic_idempotent_and_names_what_it_does_not_know(tmp_path):
    page = ('<link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>\n'
            '<script src="https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js" integrity="sha384-x" '
            'crossorigin="anonymous"></script>\n'
            '<img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=20261123T160125.424020Z"/>\n'
            '<script src="https://cdn.example.org/new-lib@2/x.js"></script>\n'
            "<style>a { background: url('https://cdn.example.org/bg.png') }</style>\n"
            '<link rel="shortcut icon" href="../../../static/images/favicon.ico" type="image/x-icon"/>\n'
            '<a href="https://greatexpectations.io">Great Expectations</a>\n')
    text, unknown = offline_page(page, 4)
    assert '<link rel="shortcut icon" href="../../../../static/images/favicon.ico"' in text  # GX's is a level short
    assert '<link rel="stylesheet" href="../../../../static/vendor/bootstrap/4.3.1/dist/css/bootstrap.min.css"/>' in text
    assert '<script src="../../../../static/vendor/bootstrap/4.3.1/dist/js/bootstrap.min.js"></script>' in text
    assert '<img src="../../../../static/images/logo-long.png"/>' in text  # GX's build time dropped with the URL
    assert unknown == ["https://cdn.example.org/bg.png", "https://cdn.example.org/new-lib@2/x.js"]
    assert offline_page(page, 4) == (text, unknown) and offline_page(text, 4) == (text, unknown)
    assert offline_page(page, 0)[0].count('"static/vendor/') == 2

    # The build installs the assets once and reports the pages that still load something.
    docs = tmp_path / "data_docs"
    (docs / "validations" / "s").mkdir(parents=True)
    (docs / "validations" / "s" / "p.html").write_text(page)
    assert make_docs_offline(docs) == {url: ["validations/s/p.html"] for url in unknown}
    before = {f: f.read_bytes() for f in docs.rglob("*") if f.is_file()}
    assert make_docs_offline(docs) == {url: ["validations/s/p.html"] for url in unknown}
    assert {f: f.read_bytes() for f in docs.rglob("*") if f.is_file()} == before
    # Every file the table names ships (scripts/vendor_docs_assets.sh was run after the last edit).
    shipped = {tuple(line.split()[:3]) for line in (docs / "static/vendor/MANIFEST.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert set(vendored_files()) <= shipped
    assert all((docs / path).is_file() for path in OFFLINE_URLS.values() if path.startswith("static/vendor/"))


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is installed by scripts/test.sh")
def test_data_docs_render_offline_in_headless_chromium(s1_streams):
    """index.html and a failed batch's validation page, opened from disk: nothing requested beyond
    file://, no failed request, no console error, Bootstrap's CSS, its scripts and font-awesome's
    icons in effect (in the light and the dark colour scheme)."""
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    docs = s1_streams / "hw" / "data_docs"
    v = validations(s1_streams / "hw")
    stable = docs / sorted(v[~v["success"]]["docs"])[0]
    failed, _, _ = dated_page(docs, sorted(v[~v["success"]]["docs"])[0])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
        try:
            for scheme, page_path in (("light", docs / "index.html"), ("light", failed), ("dark", failed)):
                context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 900})
                page = context.new_page()
                problems = []  # one list per page; the handlers run while it is open
                page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))  # noqa: B023
                page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)  # noqa: B023
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))  # noqa: B023

                def only_files(route):
                    if route.request.url.startswith("file:"):
                        route.continue_()
                    else:  # never reaches the network, even on a machine that has one
                        problems.append(f"network: {route.request.url}")  # noqa: B023
                        route.abort()

                page.route("**/*", only_files)
                page.goto(page_path.as_uri(), wait_until="load")
                page.evaluate("document.fonts.ready.then(() => true)")
                seen = page.evaluate("""() => ({
                    bodyMargin: getComputedStyle(document.body).marginTop,
                    navbar: getComputedStyle(document.querySelector('.navbar')).display,
                    padding: getComputedStyle(document.querySelector('.container-fluid')).paddingLeft,
                    scripts: typeof jQuery === 'function' && typeof jQuery.fn.bootstrapTable === 'function'
                             && typeof jQuery.fn.tooltip === 'function' && typeof vegaEmbed === 'function',
                    icon: getComputedStyle(document.querySelector('.fas'), '::before').fontFamily,
                    iconFont: [...document.fonts].some(f => f.family.includes('Font Awesome 6 Free') && f.status === 'loaded'),
                })""")
                if page_path == failed:  # the row's stable page leads the browser to the dated one
                    page.goto(stable.as_uri(), wait_until="load")
                    page.wait_for_url(failed.as_uri())
                context.close()
                assert problems == [], (scheme, page_path.name, problems)
                assert seen == {"bodyMargin": "0px", "navbar": "flex", "padding": "48px", "scripts": True,
                                "icon": '"Font Awesome 6 Free"', "iconFont": True}, (scheme, page_path.name)
        finally:
            browser.close()
