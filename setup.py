"""replemu's build: the core (``emulator/``) compiled with mypyc when it can be, else pure Python.

pyproject.toml holds the project's metadata; this file only adds the extension modules.  They
are built when mypyc is importable in the build environment (``scripts/setup.sh`` installs mypy
into .venv and builds with ``--no-build-isolation``; an isolated build such as ``pip wheel .``
has no mypy and gives a pure-Python wheel) and a C compiler works.  Otherwise, or when mypyc
fails on the sources, the .py files are installed alone.  Either way one line starting with
``replemu build:`` says which.

Every module of ``emulator/`` is compiled but ``emulator._build.NEVER_COMPILED``.  With the
extension modules goes ``emulator/_compiled_from.txt``, the SHA-256 of each source as it was
compiled: ``emulator/_build.py`` loads the .py files instead of extension modules that do not
match their sources (and when ``REPLEMU_PURE=1`` is set).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

HERE = Path(__file__).resolve().parent
CORE = HERE / "emulator"

# emulator/_build.py by its path: importing the package would choose a build for this process.
_spec = importlib.util.spec_from_file_location("replemu_core_build", CORE / "_build.py")
assert _spec is not None and _spec.loader is not None
core_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(core_build)


def say(line: str) -> None:
    print(f"replemu build: {line}", file=sys.stderr, flush=True)


def c_compiler_problem() -> str | None:
    """Why no C extension can be built here (None: a compiler builds against Python's headers)."""
    from distutils.ccompiler import new_compiler  # setuptools' copy (as mypyc uses it)
    from distutils.sysconfig import customize_compiler

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.c"
        probe.write_text("#include <Python.h>\nint replemu_probe(void) { return 0; }\n")
        try:
            compiler = new_compiler()
            customize_compiler(compiler)
            compiler.compile([str(probe)], output_dir=tmp, include_dirs=[sysconfig.get_paths()["include"]])
        except Exception as e:  # CompileError, a missing executable, ...
            return f"no working C compiler ({type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else e})"
    return None


# Stands for mypyc's extensions until a build needs them: setup.py also runs for the metadata
# (and finalizes build_ext there), and mypyc (type check and C generation, ~20 s) serves builds only.
PENDING = Extension("emulator._pending_mypyc_build", sources=[])
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}


class BuildExt(build_ext):
    """build_ext that asks mypyc for the extensions when it runs, writes the record of the compiled
    sources next to them, and replaces extension modules in the source tree by new files (a
    running process maps the old ones: writing over them would crash it)."""

    stamp = ""
    modules: list[str] = []

    def finalize_options(self) -> None:
        if self.distribution.ext_modules == [PENDING] and BUILDS & set(self.distribution.commands):
            self.distribution.ext_modules = mypyc_extensions()
        super().finalize_options()

    def copy_extensions_to_source(self) -> None:
        (CORE / core_build.STAMP).unlink(missing_ok=True)
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            Path(self._get_inplace_equivalent(build_py, ext)[0]).unlink(missing_ok=True)
        super().copy_extensions_to_source()

    def build_extension(self, ext: Extension) -> None:
        """Compile the extension's C files (mypyc writes one per module: ``multi_file``) side by
        side, one compiler process per core, then link them as distutils does: the build's
        time on a 2-core machine is mostly the C compiler's."""
        compile_serially = self.compiler.compile
        jobs = min(len(ext.sources), os.cpu_count() or 1)
        if jobs > 1:
            from concurrent.futures import ThreadPoolExecutor

            def compile_side_by_side(sources: list[str], *args: object, **kwargs: object) -> list[str]:
                biggest_first = sorted(sources, key=lambda src: -os.path.getsize(src))
                with ThreadPoolExecutor(jobs) as pool:
                    objects = dict(zip(biggest_first, pool.map(lambda src: compile_serially([src], *args, **kwargs), biggest_first)))
                return [obj for src in sources for obj in objects[src]]

            self.compiler.compile = compile_side_by_side
        try:
            super().build_extension(ext)
        finally:
            self.compiler.__dict__.pop("compile", None)  # the class's method again

    def run(self) -> None:
        if not self.extensions:
            return
        try:
            super().run()
        except (CCompilerError, BaseError) as e:
            say(f"pure-Python core (the C compiler failed on mypyc's output: {e})")
            self.extensions[:] = []
            return
        where = CORE if self.inplace else Path(self.build_lib) / "emulator"
        where.mkdir(parents=True, exist_ok=True)
        (where / core_build.STAMP).write_text(self.stamp)
        say(f"the core is compiled with mypyc ({len(self.modules)} modules of emulator/; emulator.BUILD says which runs)")


# scripts/setup.sh builds the core (``setup.py build_ext --inplace``) beside pip's install of the
# dependencies and sets this for that install: its editable wheel then carries no extension (the
# editable install finds the in-place build in emulator/ as it finds the .py files).
BUILT_BESIDE = "REPLEMU_CORE_BUILT_BESIDE"


def core_extensions() -> list[Extension]:
    """``[PENDING]`` when mypyc and a C compiler are there, else ``[]`` (pure Python, or the core
    built beside this install: ``$REPLEMU_CORE_BUILT_BESIDE``)."""
    if os.environ.get(BUILT_BESIDE) == "1":
        return []
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        say("pure-Python core (mypy, which brings mypyc, is not installed where this build runs: "
            "scripts/setup.sh installs it and builds with --no-build-isolation)")
        return []
    problem = c_compiler_problem()
    if problem:
        say(f"pure-Python core ({problem})")
        return []
    return [PENDING]


def mypyc_extensions() -> list[Extension]:
    from mypyc.build import mypycify

    os.chdir(HERE)  # mypyc names modules by their paths
    names = core_build.compiled_sources(CORE)
    BuildExt.stamp, BuildExt.modules = core_build.stamp_text(CORE, names), names  # the sources as mypyc reads them now
    try:
        # debug_level 0: no debug information in the objects (gcc -g0 instead of mypyc's default -g1):
        # the same machine code, and ~30% less of the build's C compile time.
        extensions = mypycify([f"emulator/{name}" for name in names], group_name="emulator._native", opt_level="3",
                              debug_level="0", multi_file=True)
        for ext in extensions:  # mypyc writes the group's headers under build/emulator/, its C files under build/
            ext.include_dirs.append(os.path.join("build", "emulator"))
        return extensions
    except SystemExit:  # mypyc printed the type errors and exited
        say("pure-Python core (mypyc could not compile emulator/: see the errors it printed)")
    except Exception as e:
        say(f"pure-Python core (mypyc could not compile emulator/: {type(e).__name__}: {e})")
    return []


setup(ext_modules=core_extensions(), cmdclass={"build_ext": BuildExt})
