"""Which build of the core runs: mypyc-compiled extension modules, or the .py files.  Never compiled.

``setup.py`` compiles every module of ``emulator/`` but ``NEVER_COMPILED`` with mypyc when it
can, and records the SHA-256 of each source it compiled in ``_compiled_from.txt`` next to the
extension modules.  Python prefers an extension module to the .py file of the same name, so a
build older than its sources would run silently; ``choose_build`` (called by ``emulator/__init__``
before any other submodule is imported) therefore loads every ``emulator.*`` module from its .py
file when the record does not match the sources (one line on stderr says so) or when
``REPLEMU_PURE=1`` is set: all of them or none, because compiled modules call each other directly.

``mypyc_attr`` is the class option mypyc reads at compile time, without ``mypy_extensions`` at
run time: mypy and mypyc resolve the name to ``mypy_extensions.mypyc_attr``; running code gets a
decorator that returns the class unchanged.  ``rebuilt`` is the ``__reduce__`` of the frozen
dataclasses that are pickled (Spark ships a search's ``Space`` to its executors): compiled, their
default unpickling would set each field through the frozen ``__setattr__``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import fields
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, SourceFileLoader
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:
    _T = TypeVar("_T")

    def mypyc_attr(*attrs: str, **kwattrs: Any) -> Callable[[_T], _T]:
        return lambda cls: cls


COMPILED, PURE = "compiled (mypyc)", "pure Python"
STAMP = "_compiled_from.txt"
# The package's __init__ (it chooses the build; a subpackage's __init__ is never compiled either),
# this module, and bugs.py (exceptions derived from built-in exceptions other than Exception, which
# mypyc's native classes cannot be).
NEVER_COMPILED = ("__init__.py", "_build.py", "bugs.py")
PURE_VARIABLE = "REPLEMU_PURE"


def compiled_sources(package_dir: Path) -> list[str]:
    """The paths (relative to the package, ``/``-separated) of the modules ``setup.py`` compiles:
    the package's and its subpackages' (a protocol family's package, ``emulator/quorum/``)."""
    return sorted(p.relative_to(package_dir).as_posix() for p in package_dir.rglob("*.py")
                  if p.name != "__init__.py" and (p.parent != package_dir or p.name not in NEVER_COMPILED))


def stamp_text(package_dir: Path, names: Sequence[str]) -> str:
    return "".join(f"{name} {hashlib.sha256((package_dir / name).read_bytes()).hexdigest()}\n" for name in names)


def stale_reason(package_dir: Path) -> str | None:
    """Why the extension modules in ``package_dir`` may not be used (None: they match the sources)."""
    try:
        recorded = (package_dir / STAMP).read_text()
    except OSError:
        return f"no {STAMP} next to them"
    try:
        if recorded == stamp_text(package_dir, compiled_sources(package_dir)):
            return None
    except OSError:
        pass
    return "emulator/*.py changed since they were built"


class _SourceFinder:
    """Finds ``<package>.<module>`` (``<package>.<subpackage>.<module>`` too) in its .py file, ahead
    of the extension module beside it."""

    def __init__(self, package: str, package_dir: Path) -> None:
        self.prefix, self.package_dir = package + ".", package_dir

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not name.startswith(self.prefix):
            return None
        source = self.package_dir.joinpath(*name[len(self.prefix):].split(".")).with_suffix(".py")
        if not source.is_file():
            return None
        return spec_from_file_location(name, source, loader=SourceFileLoader(name, str(source)))


def choose_build(package: str, init_file: str) -> str | None:
    """Load the package's modules from their .py files if the compiled ones must not run;
    returns why the pure-Python core runs when extension modules are present (else None)."""
    package_dir = Path(init_file).resolve().parent
    if not any(package_dir.rglob("*.so")) and not any(package_dir.rglob("*.pyd")):
        return None  # a pure install, or a zip (extension modules cannot be imported from one)
    if os.environ.get(PURE_VARIABLE, "") not in ("", "0"):
        why = f"{PURE_VARIABLE}={os.environ[PURE_VARIABLE]}"
    else:
        stale = stale_reason(package_dir)
        if stale is None:
            return None
        why = f"the compiled modules are stale ({stale})"
        print(f"replemu: {why}: running the pure-Python core instead (rebuild: bash scripts/setup.sh)", file=sys.stderr)
    sys.meta_path.insert(0, _SourceFinder(package, package_dir))
    return why


def rebuilt(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    """``__reduce__`` of a frozen dataclass: pickled as its class and fields, unpickled by its constructor."""
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj) if f.init)


def build_of(module: ModuleType) -> str:
    """``COMPILED`` when ``module`` was loaded from an extension module, else ``PURE``."""
    return COMPILED if str(getattr(module, "__file__", "")).endswith(tuple(EXTENSION_SUFFIXES)) else PURE
