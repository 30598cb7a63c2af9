"""The layout stays readable: packages import only downward, the core has no cycles, and the
one table of step kinds is the one every reader uses.

    replemu  ->  expectations  ->  streaming  ->  emulator
             ->  scenario_io   ------------------>  emulator

Imports inside ``if TYPE_CHECKING:`` are annotations, not arrows, and are not counted.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import ROOT

ALLOWED: dict[str, set[str]] = {
    "emulator": set(),
    "scenario_io": {"emulator"},
    "streaming": {"emulator"},
    "expectations": {"emulator", "streaming"},
    "replemu": {"emulator", "scenario_io", "streaming", "expectations"},
}
PACKAGES = tuple(ALLOWED)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def runtime_imports(source: str, module: str) -> list[tuple[str, list[str], int]]:
    """``(imported module, imported names, line)`` for every import outside TYPE_CHECKING blocks.

    ``module`` is the dotted name of the file (``emulator.leader``), to resolve relative imports.
    """
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        if _type_checking_block(node):
            skip |= {id(n) for n in ast.walk(node)}
    package = module.rsplit(".", 1)[0] if "." in module else module
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = [a.name for a in node.names]
            if node.level and not node.module:  # from . import leader, follower
                out += [(f"{target}.{n}", [], node.lineno) for n in names]
            else:
                out.append((target, names, node.lineno))
    return out


def violations_of(module: str, source: str) -> list[str]:
    """Every upward or sideways arrow, third-party import in the core, and private name taken
    across packages, in one module's source."""
    own = module.split(".")[0]
    found = []
    for target, names, line in runtime_imports(source, module):
        top = target.split(".")[0]
        where = f"{module}:{line} imports {target}"
        if top in PACKAGES and top != own and top not in ALLOWED[own]:
            found.append(f"{where}: {own} may import only {sorted(ALLOWED[own]) or 'the standard library'}")
        if own == "emulator" and top not in PACKAGES and top not in sys.stdlib_module_names and top != "__future__":
            found.append(f"{where}: the core uses the standard library only")
        if top in PACKAGES and top != own:
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                found.append(f"{where}: private name(s) {private} of another package")
    return found


def modules() -> list[tuple[str, Path]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(p for p in rel.parts if p != "__init__")
            out.append((name, path))
    return out


def test_every_package_imports_only_downward():
    problems = [p for name, path in modules() for p in violations_of(name, path.read_text())]
    assert not problems, "\n".join(problems)


def test_the_core_modules_form_no_cycle():
    graph: dict[str, set[str]] = {}
    for name, path in modules():
        if name.split(".")[0] != "emulator":
            continue
        graph[name] = {t for t, _, _ in runtime_imports(path.read_text(), name) if t.startswith("emulator.")}
        graph[name] |= {f"{t}.{n}" for t, names, _ in runtime_imports(path.read_text(), name) if t == "emulator" for n in names
                        if (ROOT / "emulator" / f"{n}.py").exists()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt]) if nxt in path else nxt)
            if nxt in graph and state.get(nxt) is None:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node, [node])


@pytest.mark.parametrize("module, source, complaint", [
    ("emulator.partition", "from streaming.job import run_stream\n", "emulator may import only"),
    ("emulator.cli", "from . import x\nimport yaml\n", "standard library only"),
    ("streaming.job", "from expectations.suites import BatchValidator\n", "streaming may import only"),
    ("streaming.job", "def f():\n    from replemu.cli import main\n", "streaming may import only"),
    ("expectations.suites", "from streaming.results import _read\n", "private name"),
    ("scenario_io.kafka_logs", "from streaming.events import scenario_rows\n", "scenario_io may import only"),
])
def test_the_direction_check_catches_the_arrows_the_old_layout_had(module, source, complaint):
    """Each of these arrows existed before the layout was redrawn; the check must flag them."""
    assert any(complaint in p for p in violations_of(module, source))


def test_type_checking_imports_are_not_arrows():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from replemu.cli import main\n"
    assert violations_of("emulator.x", source) == []


def test_every_step_kind_has_a_spec_a_dataclass_and_a_handler():
    from emulator.partition import HANDLERS
    from emulator.steps import STEP_TABLE, ArgType, StepKind, parse_step

    assert set(STEP_TABLE) == set(StepKind) == set(HANDLERS)
    for kind, spec in STEP_TABLE.items():
        # The kind of a step, read on one (in the compiled core, the class attribute is a descriptor).
        least = {a.name: {ArgType.REPLICA: 1, ArgType.MILLIS: 0, ArgType.REPLICA_LIST: [1]}[a.type] for a in spec.args if a.required}
        one_of = {StepKind.PRODUCE: {"value": "v"}, StepKind.REASSIGN: {"cancel": True}}  # a cross-argument rule
        step = parse_step(kind.value, {**least, **one_of.get(kind, {})}, (1,))
        assert type(step) is spec.cls and step.kind is kind
        fields = set(spec.cls.__dataclass_fields__) - {"kind"}  # compiled by mypyc, the kind is a field too
        # Every argument is a field of the step (produce's ``value`` is one of its ``values``).
        assert set(spec.arg_names) - {"value"} == fields, kind


def test_the_docs_step_table_is_generated_from_the_code():
    from emulator.quorum_steps import all_steps_markdown

    assert (ROOT / "docs" / "steps.md").read_text() == all_steps_markdown(), "regenerate with: replemu steps > docs/steps.md"


def test_package_data_is_the_user_editable_conf():
    """conf/ is the user-editable copy the docs point at (docs/layout.md): one file, shipped as package data."""
    from importlib import resources

    assert (ROOT / "conf" / "workloads.yaml").read_bytes() == resources.files("scenario_io").joinpath("data/workloads.yaml").read_bytes()
    assert (ROOT / "conf" / "spark.conf").read_bytes() == resources.files("streaming").joinpath("data/spark.conf").read_bytes()
    bundled = sorted(p.name for p in resources.files("replemu").joinpath("scenarios").iterdir() if p.name.endswith(".yaml"))
    assert bundled == sorted(p.name for p in (ROOT / "conf" / "scenarios").glob("*.yaml")) and len(bundled) >= 7
