"""The command line as a whole (issue 46 item 7): every argument of every command has help,
a required option is shown without brackets, the defaults the docs give are the command's,
and a refused command names the argument at fault and leaves nothing behind.  In-process and
argparse-level: no JVM."""

from __future__ import annotations

import argparse
import inspect
import re

import pytest

from replemu.cli import build_parser, main


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its words (``checkpoint check`` included)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{words} {name}".strip()] = sub
                    walk(sub, f"{words} {name}".strip())

    walk(build_parser(), "")
    return found


COMMANDS = commands()


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_argument_of_every_command_has_help(words):
    parser = COMMANDS[words]
    missing = [a.option_strings[0] if a.option_strings else a.metavar or a.dest for a in parser._actions
               if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not (a.help or "").strip()]
    assert missing == [], f"replemu {words}: arguments without help: {missing}"


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_a_required_option_is_shown_without_brackets(words, monkeypatch):
    """Options argparse requires, and those a command needs in its usual case (explore's --depth,
    required for partition protocols), appear bare in the usage; every other option in brackets."""
    monkeypatch.setenv("COLUMNS", "100000")
    parser = COMMANDS[words]
    usage = parser.format_usage()
    needed = {a.option_strings[0] for a in parser._actions if a.required and a.option_strings}
    needed |= {shown.split()[0] for shown in getattr(parser, "required_in_usage", ())}
    for a in parser._actions:
        if a.option_strings and not isinstance(a, argparse._HelpAction):
            option = a.option_strings[0]
            bracketed = re.search(rf"\[{re.escape(option)}[\] ]", usage) is not None
            assert option in usage and bracketed == (option not in needed), f"replemu {words}: {usage}"


def test_explore_shows_depth_as_required_and_still_runs_a_quorum_search_without_it(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")
    usage = COMMANDS["explore"].format_usage()
    assert " --depth D " in usage and "[--depth D]" not in usage
    assert COMMANDS["explore"].parse_args(["--protocol", "kraft853"]).depth is None  # a quorum search's default


def test_every_command_runs_its_own_body(monkeypatch):
    """The CLI's table holds one function per command, each calling its module's ``cmd_<command>``:
    none is missing, none left over, and none calls a neighbour's body (``state`` running ``stream``)."""
    import importlib

    from replemu import cli

    top = {words for words in COMMANDS if " " not in words}
    assert set(cli.COMMANDS) == top
    called = []
    homes = {"run": "replay", "export": "replay", "inspect": "replay", "steps": "replay", "compile": "compile",
             "stream": "stream", "state": "stream", "results": "stream", "checkpoint": "stream", "compact": "stream",
             "dashboard": "dashboard", "serve": "serve", "campaign": "campaign", "shrink": "campaign",
             "explore": "explore", "scenarios": "bundled"}
    for name in sorted(top):
        module = importlib.import_module(f"replemu.{homes[name]}")
        monkeypatch.setattr(module, f"cmd_{name}", lambda args, name=name: called.append((name, args)) or 7)
        marker = argparse.Namespace(command=name)
        assert cli.COMMANDS[name](marker) == 7 and called[-1] == (name, marker), name


def test_the_campaign_defaults_are_the_documented_ones():
    """docs/api.md's replemu.campaign(seed=1, profile="hard", partitions=100): the command's too."""
    from replemu import api

    args = build_parser().parse_args(["campaign"])
    defaults = inspect.signature(api.campaign).parameters
    assert (args.seed, args.partitions) == (defaults["seed"].default, defaults["partitions"].default)
    assert args.profile is None and defaults["profile"].default == "hard"  # hard, or quorum for a quorum protocol
    from conftest import ROOT

    assert "`hard` (the default)" in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def test_a_campaign_without_seed_partitions_or_profile_runs_with_the_defaults(tmp_path, capsys):
    assert main(["campaign", "--engine", "local", "--protocol", "kip320", "--partitions", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seed 1" in out and "hard" in out and "kip320 2 partitions" in out


def test_a_workload_stream_needs_only_the_profile_partitions_and_folders(tmp_path):
    """``replemu stream --workload clean --partitions 3 --output O --checkpoint C``: seed 1,
    every variant (as run), and under available-now the profile's longest partition; it gets
    past the checks to Spark (here a JAVA_HOME without Java: exit 3, the session's error)."""
    import subprocess
    import sys

    from conftest import ROOT, env_without_java

    done = subprocess.run([sys.executable, "-m", "replemu", "stream", "--workload", "clean", "--partitions", "3",
                           "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck")],
                          cwd=ROOT, capture_output=True, text=True, env=env_without_java(), timeout=120)
    assert done.returncode == 3, done.stderr  # not 2: nothing was missing
    assert "--seed" not in done.stderr and "--protocol" not in done.stderr and "Traceback" not in done.stderr


def test_serve_blames_the_host_for_a_host_and_the_port_for_a_port():
    import socket

    from replemu.serve import ServeError, _listen

    with pytest.raises(ServeError, match=r"^--host bad\.invalid: "):
        _listen("bad.invalid", 0)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        with pytest.raises(ServeError, match=rf"^--port {busy.getsockname()[1]}: .*already in use"):
            _listen("127.0.0.1", busy.getsockname()[1])
    finally:
        busy.close()


def test_a_refused_dashboard_leaves_no_output_folder(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{}")
    for inputs in (["bad.json"], ["missing-dir"]):
        assert main(["dashboard", *[str(tmp_path / i) for i in inputs], "--output", str(tmp_path / "dash")]) == 2
        assert not (tmp_path / "dash").exists()
    assert "replemu: error:" in capsys.readouterr().err


def test_counts_agree_with_their_nouns_and_no_leader_is_said_in_words():
    import io
    from types import SimpleNamespace

    from streaming.progress import print_progress
    from streaming.results import _leader_text

    out = io.StringIO()
    stats = {0: SimpleNamespace(partitions=1, violations=1, quarantined=0)}
    print_progress({"batchId": 0, "numInputRows": 1, "durationMs": {"triggerExecution": 1500}}, stats, out)
    assert ", 1 partition, 1 violation, 0 quarantined, 1.50 s" in out.getvalue()
    stats = {0: SimpleNamespace(partitions=2, violations=0, quarantined=0)}
    print_progress({"batchId": 0, "numInputRows": 2, "durationMs": {}}, stats, out)
    assert ", 2 partitions, 0 violations," in out.getvalue()
    assert _leader_text(None, 3) == "no leader e3" and _leader_text(2, 3) == "leader 2 e3" and _leader_text(None, None) == "no leader"


def test_the_stream_names_only_the_output_folders_it_wrote(tmp_path):
    from replemu.stream import _written_kinds

    for kind in ("timeline", "log", "summary", "violations"):
        (tmp_path / kind).mkdir()
    (tmp_path / "run.json").write_text("{}")
    assert _written_kinds(str(tmp_path), None) == "{timeline,log,summary,violations}"  # no empty errors/ or quarantine/


def test_ctrl_c_while_spark_starts_stops_the_session_once_up_and_is_said_at_once(capsys):
    """Interrupted inside pyspark's start, the JVM would run on without this process: the
    interrupt waits until the session is up, which is then stopped."""
    import os
    import signal

    from streaming.session import _interrupts_held

    stopped = []

    class Session:
        def stop(self) -> None:
            stopped.append(True)

    def start():
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the start
        os.kill(os.getpid(), signal.SIGINT)  # and again
        return Session()

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        _interrupts_held(start)
    assert stopped == [True] and signal.getsignal(signal.SIGINT) is before
    assert capsys.readouterr().err.count("replemu: interrupted; stopping as soon as Spark has started") == 1
    assert isinstance(_interrupts_held(Session), Session) and stopped == [True]  # no Ctrl-C: the session


def test_a_second_ctrl_c_is_an_interrupt_not_a_failed_query(capsys):
    import os
    import signal

    from replemu.stream import _graceful_stop

    stop, restore = _graceful_stop()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.is_set() and not stop.at_once
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        assert stop.at_once  # the query's py4j error after it is raised as KeyboardInterrupt
    finally:
        restore()
    assert "send it again to stop at once" in capsys.readouterr().err


def test_py4j_logging_a_ctrl_c_prints_nothing_before_replemu_interrupted(monkeypatch):
    import logging

    from replemu import cli

    monkeypatch.delenv("REPLEMU_DEBUG", raising=False)
    monkeypatch.setattr("sys.argv", ["replemu", "steps"])
    root = logging.getLogger()
    before = list(root.filters)
    try:
        with pytest.raises(SystemExit):
            cli.entry()
        record = root.makeRecord("root", logging.ERROR, "java_gateway.py", 1070, "KeyboardInterrupt while sending command.",
                                 (), None)
        assert not root.filter(record)  # py4j's logging.exception(...) goes nowhere
        assert root.filter(root.makeRecord("root", logging.ERROR, "x.py", 1, "something else", (), None))
    finally:
        root.filters[:] = before


def test_the_apis_spark_session_shows_no_start_up_noise(capfd):
    from streaming import jvm_output

    route = jvm_output._Route()  # no log: a terminal's, as replemu.spark_session() has
    for line in ("WARNING: Using incubator modules: jdk.incubator.vector\n",
                 "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n",
                 'Setting default log level to "WARN".\n',
                 "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n",
                 "26/11/28 22:06:55 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... "
                 "using builtin-java classes where applicable\n",
                 "26/11/28 22:06:56 ERROR Executor: a real error\n"):
        route.write(line)
    assert capfd.readouterr().err == "26/11/28 22:06:56 ERROR Executor: a real error\n"


def test_stream_protocol_all_is_every_variant_of_the_inputs_family(tmp_path):
    """As ``replemu run``'s ``all``: compiled metadata-quorum scenarios stream under every quorum
    preset (they were refused: "not --protocol all"), partition events under every partition variant."""
    import subprocess
    import sys

    from conftest import ROOT, env_without_java
    from emulator import VARIANT_NAMES
    from emulator.quorum.variants import QUORUM_VARIANT_NAMES
    from replemu.compile import compile_scenarios
    from replemu.stream import all_protocols

    assert all_protocols(argparse.Namespace(protocol="all", quorum_all=True)) == list(QUORUM_VARIANT_NAMES)
    assert all_protocols(argparse.Namespace(protocol="all", quorum_all=False)) == list(VARIANT_NAMES)
    assert all_protocols(argparse.Namespace(protocol="kraft853")) == ["kraft853"]
    from replemu.bundled import resolve_scenario

    compile_scenarios([resolve_scenario("thesis-membership-change")], tmp_path / "events")
    done = subprocess.run([sys.executable, "-m", "replemu", "stream", "--input", str(tmp_path / "events"),
                           "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck")],
                          cwd=ROOT, capture_output=True, text=True, env=env_without_java(), timeout=120)
    assert done.returncode == 3 and "JAVA" in done.stderr, done.stderr  # past every check, to Spark's start
