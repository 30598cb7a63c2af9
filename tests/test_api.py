"""The public Python API (docs/api.md): every example on the page runs and its assertions hold,
and the top level is exactly what the page documents."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

import replemu
from conftest import ROOT


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), flags=re.S)


def test_the_examples_of_docs_api_run(monkeypatch, tmp_path, spark):
    """In an empty directory, as someone who installed the wheel runs them: no file of the source
    tree is reachable by a relative path (the bundled scenarios go by name).  ``spark``: the
    tests' one session, which the page's ``replemu.spark_session`` then returns."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    blocks = examples()
    assert len(blocks) >= 5
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/api.md example {i + 1}", "exec"), namespace)
    # ...and what ran is this tree's code, not another copy found from the temporary directory
    ours = ("replemu", "emulator", "scenario_io", "streaming", "expectations")
    loaded = {name: m for name, m in sys.modules.items() if name.split(".")[0] in ours and getattr(m, "__file__", None)}
    assert "replemu.bundled" in loaded
    assert all(Path(m.__file__).resolve().is_relative_to(ROOT) for m in loaded.values()), sorted(
        name for name, m in loaded.items() if not Path(m.__file__).resolve().is_relative_to(ROOT))


def test_the_api_functions_outlive_imports_of_the_submodules_of_the_same_name():
    import importlib

    importlib.import_module("replemu.explore")
    importlib.import_module("replemu.campaign")
    from replemu.campaign import run_campaign  # noqa: F401
    from replemu.explore import Request  # noqa: F401

    assert callable(replemu.explore) and callable(replemu.campaign)
    assert replemu.explore.__module__ == replemu.campaign.__module__ == "replemu.api"


def test_the_top_level_is_the_documented_api():
    from replemu import api

    assert set(api.__all__) <= set(dir(replemu))
    page = (ROOT / "docs" / "api.md").read_text()
    for name in api.__all__:
        assert f"replemu.{name}" in page or name in ("Scenario",), f"replemu.{name} is not documented"
    assert re.fullmatch(r"\d+\.\d+\.\d+", replemu.__version__)


def test_bad_input_names_what_is_wrong():
    with pytest.raises(replemu.ScenarioError, match="mine: step 1: unknown step type .fly."):
        replemu.scenario({"name": "x", "replicas": [1, 2], "steps": [{"fly": {}}]}, source="mine")
    with pytest.raises(ValueError, match="unknown protocol 'kip999'"):
        replemu.run(replemu.scenario({"name": "x", "replicas": [1], "steps": [{"elect": {}}]}), "kip999")
    with pytest.raises(ValueError, match="no trace"):
        replemu.trace_frame(replemu.run(os.path.join(ROOT, "replemu/scenarios/s1-kip101-scenario-1.yaml")))


def test_the_kinds_table_is_the_generated_one():
    from streaming.schemas import kinds_markdown

    page = (ROOT / "docs" / "api.md").read_text()
    begin, end = "<!-- kinds:begin -->\n", "<!-- kinds:end -->"
    assert page.count(begin) == 1 and page.count(end) == 1
    assert page[page.index(begin) + len(begin):page.index(end)] == kinds_markdown(), (
        "regenerate with: python -c \"from streaming.schemas import kinds_markdown; print(kinds_markdown(), end='')\"")
