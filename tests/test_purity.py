"""The core stays pure: no pyspark, no wall clock, no hash-order-dependent iteration."""

import ast
import subprocess
import sys
from pathlib import Path

from conftest import BUNDLED, ROOT

CORE = ROOT / "emulator"


def test_emulator_runs_with_pyspark_unimportable():
    """Import every core module and replay a scenario with pyspark blocked."""
    code = f"""
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("pyspark is blocked in the core")
sys.meta_path.insert(0, Block())
import pkgutil, emulator
for m in pkgutil.iter_modules(emulator.__path__):
    if m.name != "__main__":
        __import__("emulator." + m.name)
from emulator import run_scenario
from scenario_io.yaml_files import load_scenario
print(run_scenario(load_scenario({str(BUNDLED / 's1-kip101-scenario-1.yaml')!r}), "hw")["violations"][0]["invariant"])
assert not any(k == "pyspark" or k.startswith("pyspark.") for k in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "StrongIsr"


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_imports_no_spark_and_no_clock():
    for path in sorted(CORE.glob("*.py")):
        banned = imported_modules(path) & {"pyspark", "time", "datetime"}
        assert not banned, f"{path.name} imports {banned}"


def test_results_do_not_depend_on_the_hash_seed():
    """String hashing varies with PYTHONHASHSEED; the JSON must not."""
    args = [sys.executable, "-m", "replemu", "run", *map(str, sorted(BUNDLED.glob("*.yaml"))), "--protocol", "all", "--json", "--trace"]
    outs = {
        subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(outs) == 1 and outs.pop().startswith("[")
