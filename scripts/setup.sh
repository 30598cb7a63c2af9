#!/usr/bin/env bash
# Create .venv (Python 3.11) and install replemu with its pinned dependencies, the core (emulator/)
# compiled with mypyc when a C compiler works, else pure Python: the last line says which.
# Idempotent: re-running reinstalls only when pyproject.toml or setup.py changed since the last
# install, and rebuilds the core when emulator/*.py changed since it was built (in between, the
# core runs from the .py files with a warning: emulator/_build.py never runs a stale build).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# One setup at a time (a test run and a shell may both start one).
exec 9>.venv/.replemu-setup.lock
! command -v flock >/dev/null 2>&1 || flock 9
# The stamp: what the last install was made from (pyproject.toml and setup.py; the core's sources)
# and how the core was built: compiled, pure-here (no mypyc or C compiler here: rebuilding cannot
# help; remove the stamp to try again) or pure-sources (mypyc or the compiler failed on these
# sources: try again once they change).
stamp=.venv/.replemu-installed
inputs="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
core="$(cat emulator/*.py | sha256sum | cut -d' ' -f1)"
last_inputs="" last_core="" last_build=""
[ ! -f "$stamp" ] || read -r last_inputs last_core last_build <"$stamp" || true
why=""
if [ "$last_inputs" != "$inputs" ]; then
  why="installing replemu and its dependencies into .venv (a few minutes on a fresh machine, the mypyc build included)"
elif [ "$last_core" != "$core" ] && [ "$last_build" != "pure-here" ]; then
  why="emulator/*.py changed since the core was built: building it again (a minute or two)"
fi
if [ -n "$why" ]; then
  echo "setup: $why"
  log=.venv/pip-install.log
  # The old build goes first: a build that ends in pure Python must not leave stale modules behind.
  rm -f emulator/*.so emulator/_compiled_from.txt
  build_log=.venv/core-build.log
  # setup.py compiles with the mypyc of .venv (same pin as pyproject.toml's dev extra): no build isolation.
  # The core is built in place (`setup.py build_ext --inplace`, mostly the C compiler on every core)
  # while pip resolves, unpacks and installs the dependencies, which its editable install is told
  # to leave to that build (REPLEMU_CORE_BUILT_BESIDE, setup.py): ~30 s less than one after the other.
  # pip byte-compiles each package as it installs it, one core; compileall then does all of them on
  # every core (~28 CPU s for ~9,000 files: half the wall time on two cores).
  pip_failed() {
    tail -n 40 "$log"
    echo "setup: pip install failed; the full log is $log" >&2
    exit 1
  }
  { .venv/bin/python -m pip install --upgrade pip \
    && .venv/bin/python -m pip install "setuptools==80.9.0" "mypy==2.4.1"; } >"$log" 2>&1 || pip_failed
  .venv/bin/python setup.py build_ext --inplace >"$build_log" 2>&1 &
  core_build=$!
  if ! { REPLEMU_CORE_BUILT_BESIDE=1 .venv/bin/python -m pip install -v --no-compile --no-build-isolation -e ".[dev,notebook]" \
         && { .venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
              || echo "setup: compileall could not compile some files (as pip, it skips them)"; }; } >>"$log" 2>&1; then
    kill "$core_build" 2>/dev/null || true
    wait "$core_build" 2>/dev/null || true
    pip_failed
  fi
  wait "$core_build" || echo "replemu build: pure-Python core (setup.py build_ext failed: see $build_log)" >>"$build_log"
  said="$(grep -h "^ *replemu build:" "$build_log" | tail -n 1 | sed 's/^ *replemu build: //')"
  echo "setup: ${said:-no word from setup.py on the core (see $build_log)}"
  if ls emulator/*.so >/dev/null 2>&1; then
    build=compiled
  elif [[ "$said" == *"no working C compiler"* || "$said" == *"is not installed where this build runs"* ]]; then
    build=pure-here
  else
    build=pure-sources
    grep -h ": error:" "$build_log" | sed 's/^ */  /' | sort -u | head -n 20 || true
  fi
  echo "$inputs $core $build" >"$stamp"
fi
echo "setup: the core runs $(.venv/bin/python -c 'import emulator; print(emulator.BUILD)' 2>/dev/null || echo '(not importable)')"
