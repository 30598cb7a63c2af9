"""The layout stays readable: packages import only downward, no package has an import cycle
(counting the imports a function makes when it runs), and the one table of step kinds is the one
every reader uses.

    replemu  ->  expectations  ->  streaming  ->  emulator
             ->  scenario_io   ------------------>  emulator

Imports inside ``if TYPE_CHECKING:`` are annotations, not arrows, and are not counted.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections import deque
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


@functools.lru_cache(maxsize=None)
def parsed(source: str) -> ast.Module:
    """The syntax tree of a source (parsed once for all the checks here; never modified)."""
    return ast.parse(source)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def runtime_imports(source: str, module: str) -> list[tuple[str, list[str], int]]:
    """``(imported module, imported names, line)`` for every import outside TYPE_CHECKING blocks.

    ``module`` is the dotted name of the file (``emulator.leader``), to resolve relative imports.
    """
    tree = parsed(source)
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


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Each module of ``sources`` -> the modules of ``sources`` it imports, at module level or inside a function
    (``runtime_imports`` walks every body; TYPE_CHECKING blocks excluded).  ``sources``: dotted
    module name -> source (a package's ``__init__`` under the package's name).  ``from p import n``
    is an arrow to the module ``p.n`` when there is one, else to ``p`` (its ``__init__``); the
    parent packages a submodule's import loads first are not arrows."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        arrows = set()
        for target, names, _ in runtime_imports(source, module):
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in sources]
            arrows |= set(submodules)
            if target in sources and (not names or len(submodules) < len(names)):
                arrows.add(target)
        graph[module] = arrows - {module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each group of modules that import each other (a strongly
    connected component of more than one module), as ``[a, b, ..., a]`` from the group's first
    module by name; in the order of those first modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while node not in group:
                group.add(stack.pop())
            on_stack.difference_update(group)
            if len(group) > 1:
                groups.append(group)

    def shortest_cycle(first: str, group: set[str]) -> list[str]:
        paths = {first: [first]}
        queue = deque([first])
        while queue:  # breadth first within the group, back to the first module
            node = queue.popleft()
            for nxt in sorted(graph[node] & group):
                if nxt == first:
                    return paths[node] + [first]
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    queue.append(nxt)
        raise AssertionError(f"{first} is in no cycle of {sorted(group)}")

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [shortest_cycle(min(group), group) for group in sorted(groups, key=min)]


def test_no_package_has_an_import_cycle():
    """Over every package, counting imports inside functions: an import a function makes when it
    runs hides a cycle from Python's import machinery, not from a reader."""
    graph = import_graph({name: path.read_text() for name, path in modules()})
    cycles = [" -> ".join(c) for c in import_cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_cycle_check_catches_a_cycle_made_of_imports_inside_functions():
    """The sink <-> compaction cycle issue 48 found was of this kind: each module imported the
    other only inside a function.  An import under TYPE_CHECKING closes no cycle."""
    sources = {
        "streaming": "",
        "streaming.sink": "def compact():\n    from streaming.compaction import maybe_compact\n",
        "streaming.compaction": "def sort_spec():\n    from . import sink\n    return sink.SORT_KEYS\n",
        "streaming.schemas": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from streaming.sink import x\n",
        "streaming.output_layout": "def f():\n    from streaming import schemas\n",
    }
    assert import_cycles(import_graph(sources)) == [["streaming.compaction", "streaming.sink", "streaming.compaction"]]
    sources["streaming.schemas"] = "def g():\n    import streaming.output_layout\n"
    assert import_cycles(import_graph(sources)) == [
        ["streaming.compaction", "streaming.sink", "streaming.compaction"],
        ["streaming.output_layout", "streaming.schemas", "streaming.output_layout"],
    ]
    sources["streaming.schemas"] = "def g():\n    from streaming import VERSION\n"  # the package's __init__
    sources["streaming"] = "from .output_layout import f\n"
    assert import_cycles(import_graph(sources)) == [
        ["streaming", "streaming.output_layout", "streaming.schemas", "streaming"],
        ["streaming.compaction", "streaming.sink", "streaming.compaction"],
    ]


def unreferenced_names(defining: dict[str, str], using: dict[str, str]) -> list[str]:
    """``module: NAME`` for each name a module of ``defining`` (dotted name -> source) binds at its
    top level that nothing refers to: no name or attribute of that spelling in ``using`` (file ->
    source, the defining modules among them) outside the statement that binds it, no string equal
    to it (``getattr``, ``monkeypatch.setattr``), and no ``__all__`` that exports it."""
    referenced: dict[str, int] = {}
    trees = {path: parsed(source) for path, source in using.items()}

    def references(tree: ast.AST) -> dict[str, int]:
        found: dict[str, int] = {}
        for node in ast.walk(tree):
            name = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                    else node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
            if name is not None:
                found[name] = found.get(name, 0) + 1
        return found

    for tree in trees.values():
        for name, count in references(tree).items():
            referenced[name] = referenced.get(name, 0) + count
    unused = []
    for module, source in defining.items():
        for statement in parsed(source).body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [statement.name]
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            else:
                continue
            own = references(statement)
            unused += [f"{module}: {n}" for n in names if not n.startswith("__") and referenced.get(n, 0) <= own.get(n, 0)]
    return unused


def test_every_module_level_name_is_referenced():
    """A constant, function or class a package defines and nothing uses (code, tests, scripts) is
    dead weight a reader must still understand; the public API is what an ``__all__`` exports."""
    files = [path for name, path in modules()]
    files += sorted((ROOT / "tests").glob("*.py")) + sorted((ROOT / "scripts").glob("*.py")) + [ROOT / "setup.py"]
    unused = unreferenced_names({name: path.read_text() for name, path in modules()},
                                {str(path): path.read_text() for path in files})
    assert not unused, "never referenced:\n" + "\n".join(unused)


def test_the_reference_check_finds_a_name_used_only_by_itself():
    defining = {
        "streaming.output_layout": "import re\nBATCH_DIR = re.compile('x')\ndef batch_dir_name(n):\n    return batch_dir_name(n - 1)\n"
                                   "def reader():\n    return BATCH_DIR\nLOG_OPS = ('append',)\n__all__ = ['reader']\n",
        "streaming.sink": "from streaming.output_layout import LOG_OPS\n",
    }
    assert unreferenced_names(defining, dict(defining)) == ["streaming.output_layout: batch_dir_name",
                                                            "streaming.output_layout: LOG_OPS"]


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
    from emulator.steps import STEP_TABLE, ArgType, StepKind

    assert set(STEP_TABLE) == set(StepKind) == set(HANDLERS)
    for kind, spec in STEP_TABLE.items():
        # The kind of a step, read on one (in the compiled core, the class attribute is a descriptor).
        least = {a.name: {ArgType.REPLICA: 1, ArgType.MILLIS: 0, ArgType.REPLICA_LIST: [1]}[a.type] for a in spec.args if a.required}
        one_of = {StepKind.PRODUCE: {"value": "v"}, StepKind.REASSIGN: {"cancel": True}}  # a cross-argument rule
        step = STEP_TABLE.parse(kind.value, {**least, **one_of.get(kind, {})}, (1,))
        assert type(step) is spec.cls and step.kind is kind
        fields = set(spec.cls.__dataclass_fields__) - {"kind"}  # compiled by mypyc, the kind is a field too
        # Every argument is a field of the step (produce's ``value`` is one of its ``values``).
        assert set(spec.arg_names) - {"value"} == fields, kind


def test_the_docs_step_table_is_generated_from_the_code():
    from emulator.quorum.steps import all_steps_markdown

    assert (ROOT / "docs" / "steps.md").read_text() == all_steps_markdown(), "regenerate with: replemu steps > docs/steps.md"


def test_package_data_is_the_user_editable_conf():
    """conf/ is the user-editable copy the docs point at (docs/layout.md): one file, shipped as package data."""
    from importlib import resources

    assert (ROOT / "conf" / "workloads.yaml").read_bytes() == resources.files("scenario_io").joinpath("data/workloads.yaml").read_bytes()
    assert (ROOT / "conf" / "spark.conf").read_bytes() == resources.files("streaming").joinpath("data/spark.conf").read_bytes()
    bundled = sorted(p.name for p in resources.files("replemu").joinpath("scenarios").iterdir() if p.name.endswith(".yaml"))
    assert bundled == sorted(p.name for p in (ROOT / "conf" / "scenarios").glob("*.yaml")) and len(bundled) >= 7
