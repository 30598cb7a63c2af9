"""Every command the README shows is run, and prints what the README shows.

The README's fenced blocks are read by ``tests/readme.py``: console commands and the doctest run
here, from a directory that looks like the repository's root (``readme.repo_view``), in README
order (later commands read what earlier ones wrote); a block marked ``<!-- run by
tests/FILE.py::TEST -->`` is run by that test (the streaming tour: a Spark test sharing the suite's
SparkSession, so this file starts no JVM); ``bash scripts/main.sh`` and ``bash scripts/test.sh``
are the main job and CI themselves. A command that nothing runs fails here."""

from __future__ import annotations

import doctest
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import readme

COMMAND_BLOCKS = [b for b in readme.blocks() if b.lang in readme.COMMAND_LANGS]
RUN_HERE = [c for b in COMMAND_BLOCKS if b.lang == "console" and b.run_by is None for c in b.commands]


@pytest.fixture(scope="module")
def view(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The repository's root as the README's commands see it, and an environment whose
    ``replemu`` and ``python`` are this interpreter's (the README's ``source .venv/bin/activate``)."""
    where = readme.repo_view(tmp_path_factory.mktemp("readme") / "repo")
    bin_dir = where.parent / "bin"
    bin_dir.mkdir()
    for name, argv in (("replemu", f'"{sys.executable}" -m replemu'), ("python", f'"{sys.executable}"')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(readme.ROOT), os.environ.get("PYTHONPATH")]))}
    return where, env


def test_the_readme_is_a_front_door_with_a_map_of_every_docs_page():
    text = readme.README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 210, "the README grew past one front door: move the detail to a docs/ page"
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", text))
    pages = {f"docs/{p.name}" for p in (readme.ROOT / "docs").glob("*.md")}
    assert pages - linked == set(), f"docs pages the README's map does not name: {sorted(pages - linked)}"
    for command in readme.EXEMPT:
        assert command in text, f"the README no longer shows `{command}`"


def test_every_command_the_readme_shows_is_run_by_a_test():
    unrun = []
    for block in COMMAND_BLOCKS:
        if block.run_by is not None:
            path, name = block.run_by
            source = (readme.ROOT / path).read_text(encoding="utf-8") if (readme.ROOT / path).is_file() else ""
            assert re.search(rf"^def {name}\(", source, re.M), f"README.md:{block.line}: {path} defines no test {name}"
            assert "readme.blocks_run_by(" in source and f'"{path}::{name}"' in source, (
                f"README.md:{block.line}: {path}::{name} does not run the README's block (readme.blocks_run_by)")
        elif block.lang == "python":
            unrun.append(f"README.md:{block.line}: a ```python block (show Python as a ```pycon session: it is run)")
        elif block.lang in ("bash", "sh", "shell"):
            unrun += [f"README.md:{c.line}: {c.text}" for c in block.commands if c.text not in readme.EXEMPT]
    # a command shown in a block of another kind (```text, ``` …) would be run by nobody
    for block in readme.blocks():
        if block.lang not in readme.COMMAND_LANGS:
            unrun += [f"README.md:{block.line + 1 + i}: {line}" for i, line in enumerate(block.body)
                      if re.match(r"\s*(\$ |replemu |python |bash |\.venv/)", line)]
    assert not unrun, "commands in the README that no test runs (show them in a ```console block, or mark the " \
                      "block with <!-- run by tests/FILE.py::TEST -->):\n" + "\n".join(unrun)
    assert RUN_HERE, "the README's tour shows no command"


@pytest.mark.parametrize("command", RUN_HERE, ids=lambda c: f"README.md:{c.line}")
def test_the_command_prints_what_the_readme_shows(view, command):
    where, env = view
    done = subprocess.run(["bash", "-c", command.text], cwd=where, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"`{command.text}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
    wrong = readme.mismatch(command.shown, done.stdout)
    assert wrong is None, f"README.md:{command.line}: `{command.text}`: {wrong}"


@pytest.mark.parametrize("block", [b for b in COMMAND_BLOCKS if b.lang == "pycon" and b.run_by is None],
                         ids=lambda b: f"README.md:{b.line}")
def test_the_python_session_prints_what_the_readme_shows(view, block, monkeypatch):
    monkeypatch.chdir(view[0])
    test = doctest.DocTestParser().get_doctest("\n".join(block.body), {}, "README", str(readme.README), block.line)
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.write)
    assert runner.failures == 0 and test.examples, report.getvalue()


def test_mismatch_reads_elisions_and_ends():
    printed = "a\nb\nc\nd\n"
    assert readme.mismatch(["a", "...", "d"], printed) is None
    assert readme.mismatch(["...", "b", "c", "..."], printed) is None
    assert readme.mismatch(["b", "..."], printed) is not None  # the output starts with a
    assert readme.mismatch(["...", "c"], printed) is not None  # and ends with d
    assert readme.mismatch(["...", "b", "d", "..."], printed) is not None  # b and d are not adjacent
    assert readme.mismatch(["...", "c", "...", "b", "..."], printed) is not None  # order
    assert readme.mismatch([], "") is None and readme.mismatch([], "x") is not None
