"""The dashboard of metadata-quorum results (docs/quorum.md "The dashboard"): ``replemu run FILE
--protocol kraft853 --json --trace`` then ``replemu dashboard``.  The JSON the views read (the
quorum trace's logs and control offsets, the timeline of roles, epochs, LEO/HW and voter sets, the
log operations, the matrix's verdicts), a damaged result refused in one line, and in headless
Chromium the quorum views drawn: a row per server, the voter-set changes, the control records,
and the rule-off run's first violation (step 79) marked."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, replemu
from emulator.quorum.invariants import QUORUM_INVARIANT_NAMES
from replemu.dashboard import logs_at

THESIS = ROOT / "conf" / "scenarios" / "quorum" / "thesis-membership-change.yaml"
RULE_OFF = ("--knob", "reconfig_requires_leader_epoch_commit=false")
SERVERS = ["1", "2", "3", "4", "5"]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    raw = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """The bundled quorum story's ``--json --trace`` results, rule on and rule off, and their dashboard."""
    root = tmp_path_factory.mktemp("qdash")
    out = {}
    for name, extra in (("on", ()), ("off", RULE_OFF)):
        done = replemu("run", str(THESIS), "--protocol", "kraft853", "--json", "--trace", *extra)
        assert done.returncode == 0, done.stderr
        (root / f"{name}.json").write_text(done.stdout)
        out[name] = json.loads(done.stdout)
    built = replemu("dashboard", str(root / "on.json"), str(root / "off.json"), "--output", str(root / "dash"))
    assert built.returncode == 0, built.stderr
    out["page"] = root / "dash" / "dashboard.html"
    out["root"] = root
    return out


def test_the_quorum_trace_rows_carry_every_servers_log_and_its_control_offsets(results):
    result = results["off"]
    for row in result["trace"]:
        for s in row["state"]["servers"].values():
            assert len(s["log"]) == s["leo"]
            assert all(s["log"][o][2].startswith(("LeaderChange", "VotersRecord")) for o in s["control"])
    last = result["trace"][-1]["state"]["servers"]
    for sid, s in result["final"]["servers"].items():  # the last row's logs are the final logs
        assert last[sid]["log"] == s["log"]
        assert "control" not in s  # final's shape is unchanged


def test_the_views_json_of_a_quorum_result(results):
    data = page_data(results["page"])
    on, off = data["runs"]
    assert [r["family"] for r in data["runs"]] == ["quorum", "quorum"]
    assert on["invariants"] == off["invariants"] == list(QUORUM_INVARIANT_NAMES)
    assert "reconfig_requires_leader_epoch_commit=false" in off["name"]
    # the matrix and the statuses: rule on no verdict against it, rule off LeaderCompleteness first at step 79
    assert on["matrix"] == {} and on["counts"]["ok"] == 1
    first = off["matrix"]["LeaderCompleteness"]["first"]
    assert (first["key"], first["step"]) == ("thesis-membership-change", 79) and off["counts"]["violated"] == 1
    p = off["partitions"][0]
    assert p["family"] == "quorum" and p["status"] == "violated" and p["first"] == {"LeaderCompleteness": 79}
    tl = p["timeline"]
    assert tl["family"] == "quorum" and tl["steps"] == list(range(1, 80)) and list(tl["replicas"]) == SERVERS
    trace = results["off"]["trace"]
    for sid in SERVERS:
        rep = tl["replicas"][sid]
        assert rep["leo"] == [t["state"]["servers"][sid]["leo"] for t in trace]
        assert rep["hw"] == [t["state"]["servers"][sid]["hw"] for t in trace]
        assert rep["epoch"] == [t["state"]["servers"][sid]["epoch"] for t in trace]
        assert rep["voters"] == [t["state"]["servers"][sid]["voters"] for t in trace]
    assert tl["leader"] == [t["state"]["leader"] for t in trace] and tl["leader"][-1] == 1 and tl["epoch"][-1] == 3
    roles = {role for rep in tl["replicas"].values() for role in rep["role"]}
    assert {"leader", "follower", "candidate", "voted", "unattached", "observer"} <= roles, roles
    assert tl["replicas"]["5"]["role"][0] == "observer"  # 5 starts outside the voter set
    assert tl["replicas"]["1"]["role"][-1] == "leader" and tl["replicas"]["4"]["role"][-1] == "voted"
    # the voter set as the leader's log has it: the bootstrap set, 5 added, then 1 removed by leader 2
    changes = [(tl["steps"][i], v) for i, v in enumerate(tl["voters"]) if i == 0 or v != tl["voters"][i - 1]]
    sets = [v for _, v in changes]
    assert sets[0] == [1, 2, 3, 4] and [1, 2, 3, 4, 5] in sets and [2, 3, 4] in sets
    # the log operations replay to the final logs; control records are flagged
    for sid in SERVERS:
        assert logs_at(p["log"], 79, SERVERS)[sid] == results["off"]["final"]["servers"][sid]["log"]
    flagged = {(o[1], o[3]) for o in p["log"] if o[2] == "append" and len(o) == 7}
    for sid, s in results["off"]["final"]["servers"].items():
        for offset, _, cell in s["log"]:
            assert ((int(sid), offset) in flagged) == cell.startswith(("LeaderChange", "VotersRecord")), (sid, offset)


def test_a_quorum_result_without_trace_shows_its_verdicts_without_pictures(results, tmp_path):
    plain = {k: v for k, v in results["off"].items() if k != "trace"}
    (tmp_path / "r.json").write_text(json.dumps(plain))
    done = replemu("dashboard", str(tmp_path / "r.json"), "--output", str(tmp_path / "d"))
    assert done.returncode == 0, done.stderr
    p = page_data(tmp_path / "d" / "dashboard.html")["runs"][0]["partitions"][0]
    assert p["timeline"] is None and p["log"] is None and p["violated"] == ["LeaderCompleteness"]


@pytest.mark.parametrize("damage, words", [
    (lambda r: r["final"]["servers"]["3"].pop("hw"), "final.servers.3: missing hw"),
    (lambda r: r["final"]["servers"]["2"].update(role="king"), "final.servers.2.role must be one of"),
    (lambda r: r["trace"][4]["state"]["servers"]["1"].update(log=[[0, "x", "a"]]), "trace[5].state.servers.1.log"),
    (lambda r: r["trace"][0]["state"]["servers"].pop("5"), "trace[1].state.servers must name the servers"),
    (lambda r: r.update(violations="none"), "violations must be a list"),
])
def test_a_damaged_quorum_result_is_refused_in_one_line_naming_the_file(results, tmp_path, damage, words):
    broken = copy.deepcopy(results["off"])
    damage(broken)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(broken))
    done = replemu("dashboard", str(path), "--output", str(tmp_path / "d"))
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert words in done.stderr and str(path) in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


# -- in headless Chromium ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is installed by scripts/test.sh")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield b
        b.close()


def _open(browser, url: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"loaded: {r.url}") if not r.url.startswith(("file:", "data:")) else None)
    page.goto(url)
    page.wait_for_selector("body[data-rendered=ok]", timeout=30_000)
    return context, page, problems


def test_the_quorum_views_render_in_headless_chromium(results, browser):
    page_url = results["page"].resolve().as_uri()
    data = page_data(results["page"])
    on_id, off_id = (r["id"] for r in data["runs"])
    # rule off, opened at its last step: every server's row, the violation marked at step 79
    context, page, problems = _open(browser, f"{page_url}#run={off_id}&p=thesis-membership-change&s=79")
    try:
        page.wait_for_selector("#logpic-svg[data-step='79']")
        labels = page.locator("#logpic-labels .replica-label").evaluate_all("ls => ls.map(l => [l.dataset.replica, l.textContent])")
        assert [r for r, _ in labels] == SERVERS
        assert labels[0][1] == "server 1 ★ leader" and labels[3][1] == "server 4 voted"
        assert page.locator("#timeline-svg .role-row").count() == len(SERVERS)
        assert page.locator("#timeline-svg .role-seg[data-role='observer'][data-replica='5']").count() >= 1
        assert page.locator("#timeline-svg .role-seg[data-role='candidate']").count() >= 1
        first = page.locator("#timeline-svg #first-violation")
        assert first.get_attribute("data-step") == "79" and first.get_attribute("data-invariants") == "LeaderCompleteness"
        assert page.locator("#logpic-svg").get_attribute("data-violation") == "LeaderCompleteness"
        assert "the first violation" in page.locator("#step-event").inner_text()
        marks = page.locator("#timeline-svg .voters-mark").evaluate_all("ms => ms.map(m => m.dataset.voters)")
        assert marks[0] == "1,2,3,4" and "1,2,3,4,5" in marks and "2,3,4" in marks
        controls = page.locator("#logpic-svg g.replica[data-replica='1'] g.rec.ctl").evaluate_all(
            "cs => cs.map(c => [c.dataset.offset, c.dataset.control])")
        assert controls == [["0", "LeaderChange"], ["1", "VotersRecord"], ["2", "VotersRecord"], ["3", "LeaderChange"]]
        assert page.locator("#logpic-svg g.replica[data-leader='1']").get_attribute("data-replica") == "1"
        assert page.locator("#logpic-svg g.replica[data-replica='2'] line.hw").count() == 1
        # the matrix: the quorum invariants, the rule-off run's LeaderCompleteness linking step 79
        cell = page.locator(f"#matrix td[data-run='{off_id}'][data-invariant='LeaderCompleteness'] a.first")
        assert cell.inner_text() == "1" and cell.get_attribute("href").endswith("&s=79")
        # step back: the picture at step 58 (leader 2 appends the voter set without 1) carries no violation
        page.evaluate(f"location.hash = {json.dumps(f'#run={off_id}&p=thesis-membership-change&s=58')}")
        page.wait_for_selector("#logpic-svg[data-step='58']")
        assert page.locator("#logpic-svg").get_attribute("data-violation") is None
        assert problems == [] and page.evaluate("document.body.dataset.error") is None
    finally:
        context.close()
    # rule on: the same rows, no violation marked anywhere
    context, page, problems = _open(browser, f"{page_url}#run={on_id}&p=thesis-membership-change")
    try:
        page.wait_for_selector("#logpic-svg")
        assert page.locator("#logpic-labels .replica-label").count() == len(SERVERS)
        assert page.locator("#timeline-svg .role-row").count() == len(SERVERS)
        assert page.locator("#timeline-svg .violation-mark").count() == 0
        assert page.locator(f"#matrix td.bad[data-run='{on_id}']").count() == 0
        # a run's result is a scenario: its chip says which, not the "partition 0" every result has
        assert page.locator("#pchips .pchip").all_inner_texts() == ["thesis-membership-change"]
        assert problems == [] and page.evaluate("document.body.dataset.error") is None
    finally:
        context.close()
